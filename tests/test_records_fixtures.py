"""The decoder against segments written by Apache Kafka 3.9.1's own record code, compared with
the records Kafka's consumer-side code read back (expected/*.jsonl)."""
import base64
import json
import os
import random

import pyarrow as pa
import pytest

from conftest import FIXTURES
from kafka_tiered_source.records import (ReadCommittedFilter, decode, decode_batches,
                                         decoder_backend, kafka_schema)

pytestmark = pytest.mark.decoder

META = json.load(open(os.path.join(FIXTURES, "meta.json")))
PARTITIONS = {f"{m['topic']}-{m['partition']}": m for m in META}
LEVELS = ["read_uncommitted", "read_committed"]


def segments(tp):
    m = PARTITIONS[tp]
    return [open(os.path.join(FIXTURES, "segments", tp, s["file"]), "rb").read()
            for s in m["segments"]]


def expected(tp, level):
    name = "committed" if level == "read_committed" else "uncommitted"
    rows = []
    with open(os.path.join(FIXTURES, "expected", f"{tp}.{name}.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            b64 = lambda v: None if v is None else base64.b64decode(v)  # noqa: E731
            rows.append({
                "offset": e["offset"], "timestamp": e["timestamp"],
                "timestampType": e["timestampType"], "key": b64(e["key"]),
                "value": b64(e["value"]),
                # Spark (and this decoder) gives null, not [], for a record without headers.
                "headers": [(k, b64(v)) for k, v in e["headers"]] or None,
            })
    return rows


def rows_of(table, topic, partition):
    assert table.schema == kafka_schema(True)
    d = table.to_pydict()
    assert set(d["topic"]) <= {topic} and set(d["partition"]) <= {partition}
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert all(us % 1000 == 0 for us in micros)
    out = []
    for i in range(table.num_rows):
        out.append({
            "offset": d["offset"][i],
            "timestamp": micros[i] // 1000,
            "timestampType": d["timestampType"][i], "key": d["key"][i], "value": d["value"][i],
            "headers": None if d["headers"][i] is None
            else [(h["key"], h["value"]) for h in d["headers"][i]],
        })
    return out


def filter_for(m, level):
    if level == "read_uncommitted":
        return None
    return ReadCommittedFilter([(a["producerId"], a["firstOffset"])
                                for a in m["abortedTransactions"]], m["lastStableOffset"])


def test_default_mode_uses_the_native_backend():
    want = "python" if os.environ.get("KAFKA_TIERED_NO_EXTENSIONS") == "1" else "native"
    assert decoder_backend() == want


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("tp", sorted(PARTITIONS))
def test_whole_partition(tp, level):
    m = PARTITIONS[tp]
    table = decode(b"".join(segments(tp)), topic=m["topic"], partition=m["partition"],
                   isolation_level=level,
                   aborted_transactions=[(a["producerId"], a["firstOffset"])
                                         for a in m["abortedTransactions"]],
                   last_stable_offset=m["lastStableOffset"])
    assert rows_of(table, m["topic"], m["partition"]) == expected(tp, level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("tp", sorted(PARTITIONS))
def test_segment_by_segment_with_one_filter(tp, level):
    m = PARTITIONS[tp]
    filt = filter_for(m, level)
    got = []
    for seg in segments(tp):
        res = decode_batches(memoryview(seg), topic=m["topic"], partition=m["partition"],
                             filter=filt)
        assert res.leftover == b"" and (res.consumed == len(seg) or res.done)
        got += rows_of(res.table(), m["topic"], m["partition"])
    assert got == expected(tp, level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("tp", sorted(PARTITIONS))
def test_random_byte_ranges_stitched_with_leftover(tp, level):
    m = PARTITIONS[tp]
    rnd = random.Random(f"{tp}/{level}")
    data = b"".join(segments(tp))
    filt = filter_for(m, level)
    got, carry, start, calls = [], b"", 0, 0
    while start < len(data):
        end = min(len(data), start + rnd.choice([1, 7, 61, 500, 4096, 30000, 200000]))
        chunk = carry + data[start:end]
        res = decode_batches(chunk, topic=m["topic"], partition=m["partition"], filter=filt,
                             position=start - len(carry))
        assert res.consumed + len(res.leftover) == len(chunk) or res.done
        got += rows_of(res.table(), m["topic"], m["partition"])
        carry = res.leftover
        start = end
        calls += 1
        if res.done:
            break
    assert carry == b""
    assert calls > 5
    assert got == expected(tp, level)


@pytest.mark.parametrize("tp", sorted(PARTITIONS))
def test_offset_bounds(tp):
    m = PARTITIONS[tp]
    exp = expected(tp, "read_uncommitted")
    rnd = random.Random(tp)
    data = b"".join(segments(tp))
    for _ in range(5):
        a = rnd.randrange(exp[0]["offset"], exp[-1]["offset"] + 2)
        b = rnd.randrange(a, exp[-1]["offset"] + 3)
        table = decode(data, topic=m["topic"], partition=m["partition"], start_offset=a,
                       end_offset=b)
        assert rows_of(table, m["topic"], m["partition"]) == [
            r for r in exp if a <= r["offset"] < b]


def test_mmap_input_and_no_headers():
    import mmap

    tp = "orders-0"
    path = os.path.join(FIXTURES, "segments", tp, PARTITIONS[tp]["segments"][0]["file"])
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        table = decode(mm, topic="orders", include_headers=False)
        assert table.schema == kafka_schema(False)
        n = PARTITIONS[tp]["segments"][0]["lastOffset"] + 1
        assert table.column("offset").to_pylist() == list(range(n))


def test_small_max_batch_bytes_splits_arrow_batches():
    tp = "orders-0"
    data = segments(tp)[0]
    res = decode_batches(data, topic="orders", max_batch_bytes=4096)
    assert len(res.batches) > 10
    for b in res.batches:
        for col in ("key", "value"):
            size = sum(len(v) for v in b.column(col).to_pylist() if v)
            # a single record may exceed the cap on its own; otherwise the cap holds
            assert size <= 4096 or b.num_rows == 1
    whole = decode_batches(data, topic="orders")
    assert res.table().to_pylist() == whole.table().to_pylist()
    assert res.records == whole.records == sum(b.num_rows for b in res.batches)


def test_log_append_time_batch():
    exp = expected("orders-0", "read_uncommitted")
    lat = [r for r in exp if r["timestampType"] == 1]
    assert lat, "fixture has a LogAppendTime batch"
    got = rows_of(decode(b"".join(segments("orders-0")), topic="orders"), "orders", 0)
    assert [r for r in got if r["timestampType"] == 1] == lat


def test_next_offset_and_done():
    m = PARTITIONS["compacted-0"]
    data = b"".join(segments("compacted-0"))
    res = decode_batches(data, topic="compacted")
    assert res.next_offset == m["segments"][-1]["lastOffset"] + 1
    assert not res.done and res.consumed == len(data)
    res = decode_batches(data, topic="compacted", end_offset=1000)
    offsets = res.table().column("offset").to_pylist()
    assert res.done and res.leftover == b"" and max(offsets) < 1000
    # the batch that straddles the bound was walked, so next_offset is past its last offset
    assert res.next_offset > max(offsets) and res.consumed < len(data)
