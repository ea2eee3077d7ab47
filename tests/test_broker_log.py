"""The embedded broker's local log (kafka_tiered_source/testing/log.py + storage.py).

Records are decoded with kafka-python's reader (a real client's code, not ours); expected values
come from the fixtures written by Apache Kafka 3.9.1.
"""
from __future__ import annotations

import base64
import heapq
import json
import os
import shutil
import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_tiered_source.records.header import iter_headers
from kafka_tiered_source.storage.indexes import parse_txn_index
from kafka_tiered_source.testing.log import TXN_ENTRY_SIZE, Segment, StorageError, build_indexes
from kafka_tiered_source.testing.storage import BrokerStorage

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "kafka-3.9.1")
META = {(m["topic"], m["partition"]): m for m in json.load(open(os.path.join(FIXTURES, "meta.json")))}
PARTITIONS = sorted(META)


def seg_dir(topic, partition):
    return os.path.join(FIXTURES, "segments", f"{topic}-{partition}")


def expected(topic, partition, kind):
    out = []
    with open(os.path.join(FIXTURES, "expected", f"{topic}-{partition}.{kind}.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            out.append((r["offset"], r["timestamp"], r["timestampType"],
                        None if r["key"] is None else base64.b64decode(r["key"]),
                        None if r["value"] is None else base64.b64decode(r["value"]),
                        [(k, None if v is None else base64.b64decode(v)) for k, v in r["headers"]]))
    return out


def decode(records: bytes, aborted=None, committed=False):
    """Data records of whole batches; with ``committed`` apply the consumer's read_committed
    filter (facts.md) using the broker's aborted list."""
    heap = sorted((f, p) for p, f in (aborted or []))     # a sorted list is a heap
    aborted_pids = set()
    out = []
    pos = 0
    while pos + 12 <= len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        batch = DefaultRecordBatch(records[pos:pos + 12 + length])
        assert batch.validate_crc(), f"bad CRC at {pos}"
        pos += 12 + length
        if committed and batch.producer_id >= 0:
            while heap and heap[0][0] <= batch.last_offset:
                aborted_pids.add(heapq.heappop(heap)[1])
            if batch.is_control_batch:
                rec = next(iter(batch))
                if struct.unpack(">hh", rec.key)[1] == 0:
                    aborted_pids.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborted_pids:
                continue
        if batch.is_control_batch:
            continue
        for r in batch:
            out.append((r.offset, r.timestamp, r.timestamp_type,
                        None if r.key is None else bytes(r.key),
                        None if r.value is None else bytes(r.value),
                        [(k, None if v is None else bytes(v)) for k, v in r.headers]))
    assert pos == len(records), "a read must return whole batches"
    return out


def read_all(storage, topic, partition, isolation, max_bytes=64 * 1024):
    """Fetch loop as a consumer runs it; returns (records, number of fetches served remotely)."""
    o = storage.offsets(topic, partition)
    offset = o.log_start_offset
    bound = o.last_stable_offset if isolation else o.high_watermark
    out, remote = [], 0
    while offset < bound:
        fr = storage.read(topic, partition, offset, max_bytes, isolation, client_id="test-client")
        assert fr.error_name is None
        assert (fr.aborted is not None) == bool(isolation)
        assert fr.records, f"no progress at offset {offset}"
        out.extend(decode(fr.records, fr.aborted, committed=bool(isolation)))
        remote += fr.from_remote
        offset = list(iter_headers(fr.records))[-1].last_offset + 1
    return out, remote


@pytest.fixture
def imported(tmp_path):
    s = BrokerStorage(str(tmp_path / "data"))
    for t, p in PARTITIONS:
        s.import_log_dir(t, p, seg_dir(t, p))
    return s


def offs(r):
    return r.base_offset, r.last_offset


def make_batch(values, *, producer_id=-1, epoch=-1, seq=-1, transactional=False, codec=0,
               base_offset=0, timestamp=1_700_000_000_000):
    b = DefaultRecordBatchBuilder(2, codec, transactional, producer_id, epoch, seq, 1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp + i, b"k%d" % i, v, [])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


# ------------------------------------------------------------------------------------ indexes

@pytest.mark.parametrize("tp", PARTITIONS, ids=lambda tp: f"{tp[0]}-{tp[1]}")
def test_rebuilt_indexes_equal_kafka_bytes(tp):
    d = seg_dir(*tp)
    logs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    assert logs
    for n in logs:
        base = int(n[:-4])
        with open(os.path.join(d, n), "rb") as f:
            data = f.read()
        index, timeindex = build_indexes(data, base)
        assert index == open(os.path.join(d, n[:-4] + ".index"), "rb").read(), n
        assert timeindex == open(os.path.join(d, n[:-4] + ".timeindex"), "rb").read(), n


def test_segment_load_rebuilds_missing_indexes(tmp_path):
    src = seg_dir("orders", 0)
    base = "00000000000000000563"
    shutil.copyfile(os.path.join(src, base + ".log"), tmp_path / (base + ".log"))
    seg = Segment.load(str(tmp_path), 563)
    for suffix in (".index", ".timeindex"):
        assert (tmp_path / (base + suffix)).read_bytes() == open(os.path.join(src, base + suffix), "rb").read()
    assert seg.next_offset == 1081
    assert seg.size == os.path.getsize(os.path.join(src, base + ".log"))


# ------------------------------------------------------------------------------------ import + local reads

@pytest.mark.parametrize("tp", PARTITIONS, ids=lambda tp: f"{tp[0]}-{tp[1]}")
def test_import_offsets_match_kafka(imported, tp):
    m = META[tp]
    o = imported.offsets(*tp)
    assert o.log_start_offset == m["logStartOffset"]
    assert o.high_watermark == m["highWatermark"]
    assert o.last_stable_offset == m["lastStableOffset"]
    assert imported.list_offsets(*tp, -2) == (m["logStartOffset"], -1)
    assert imported.list_offsets(*tp, -1) == (m["highWatermark"], -1)
    assert imported.list_offsets(*tp, -1, isolation_level=1) == (m["lastStableOffset"], -1)
    assert imported.list_offsets(*tp, -5) == (-1, -1)


@pytest.mark.parametrize("tp", PARTITIONS, ids=lambda tp: f"{tp[0]}-{tp[1]}")
@pytest.mark.parametrize("isolation", [0, 1], ids=["uncommitted", "committed"])
def test_local_reads_return_expected_records(imported, tp, isolation):
    got, remote = read_all(imported, *tp, isolation)
    assert remote == 0
    assert got == expected(*tp, "committed" if isolation else "uncommitted")


def test_read_returns_whole_batches_at_least_one(imported):
    fr = imported.read("orders", 0, 5, 1, 0)            # max_bytes smaller than any batch
    hs = list(iter_headers(fr.records))
    assert len(hs) == 1 and hs[0].base_offset <= 5 <= hs[0].last_offset
    assert hs[0].size == len(fr.records)


def test_read_committed_stops_at_lso_and_lists_aborted(imported):
    m = META[("payments", 0)]
    fr = imported.read("payments", 0, 1800, 10 << 20, 1)
    hs = list(iter_headers(fr.records))
    assert hs and hs[-1].last_offset < m["lastStableOffset"] <= hs[-1].last_offset + 1 + 100
    assert all(h.base_offset < 1855 for h in hs)
    assert fr.last_stable_offset == 1855 and fr.high_watermark == 2362
    # every aborted txn overlapping [1800, end of data) — the 1673 one's marker is past the LSO
    want = {(a["producerId"], a["firstOffset"]) for a in m["abortedTransactions"]
            if a["lastOffset"] >= 1800 and a["firstOffset"] <= hs[-1].last_offset}
    assert want and set(fr.aborted) == want
    # at the LSO: nothing yet, no error
    at = imported.read("payments", 0, 1855, 1 << 20, 1)
    assert at.records == b"" and at.error_name is None
    assert imported.read("payments", 0, 1855, 1 << 20, 0).records


def test_offset_out_of_range(imported):
    below = imported.read("orders", 1, 999, 1000, 0)
    past = imported.read("orders", 1, 2029, 1000, 0)
    assert below.error_name == past.error_name == "OFFSET_OUT_OF_RANGE" and below.error_code == 1
    assert "below the log start offset 1000" in below.error_message
    assert "past the log end offset 2028" in past.error_message
    assert below.records == b"" and below.log_start_offset == 1000 and below.high_watermark == 2028
    at_end = imported.read("orders", 1, 2028, 1000, 0)
    assert at_end.error_name is None and at_end.records == b"" and at_end.high_watermark == 2028
    with pytest.raises(StorageError) as e:
        imported.read("orders", 7, 0, 1000, 0)
    assert e.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION" and e.value.error_code == 3


def test_list_offsets_by_timestamp_local(imported):
    recs = expected("orders", 0, "uncommitted")
    for target in (recs[0][1] - 5, recs[1234][1], recs[5000][1] + 1, recs[-1][1]):
        want = next((r[0], r[1]) for r in recs if r[1] >= target)
        assert imported.list_offsets("orders", 0, target) == want
    assert imported.list_offsets("orders", 0, recs[-1][1] + 10_000_000) == (-1, -1)
    mx = max(r[1] for r in recs)
    assert imported.list_offsets("orders", 0, -3) == (next(r[0] for r in recs if r[1] == mx), mx)


# ------------------------------------------------------------------------------------ appends

def test_append_assigns_offsets_keeps_crc_and_rolls(tmp_path):
    s = BrokerStorage(str(tmp_path), segment_bytes=8 * 1024)
    s.create_topic("t", 2)
    offsets = []
    for i in range(40):
        batch = make_batch([os.urandom(300) for _ in range(3)], codec=[0, 1, 4][i % 3])
        r = s.append("t", 1, batch)
        offsets.append((r.base_offset, r.last_offset))
    assert offsets == [(3 * i, 3 * i + 2) for i in range(40)]
    pdir = tmp_path / "t-1"
    logs = sorted(p.name for p in pdir.iterdir() if p.suffix == ".log")
    assert len(logs) > 3
    for n in logs:
        data = (pdir / n).read_bytes()
        assert len(data) <= 8 * 1024 or len(list(iter_headers(data))) == 1
        idx, tidx = build_indexes(data, int(n[:-4]))
        assert (pdir / n.replace(".log", ".index")).read_bytes() == idx
        assert (pdir / n.replace(".log", ".timeindex")).read_bytes() == tidx
        for h in iter_headers(data):
            assert crc32c.crc32c(data[h.position + 21:h.end]) == h.crc
    got, _ = read_all(s, "t", 1, 0, max_bytes=2000)
    assert [r[0] for r in got] == list(range(120))
    assert s.offsets("t", 0).high_watermark == 0


def test_append_rejects_corrupt_batches(tmp_path):
    s = BrokerStorage(str(tmp_path))
    s.create_topic("t", 1)
    good = make_batch([b"v"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(StorageError) as e:
        s.append("t", 0, bytes(bad))
    assert e.value.error_name == "CORRUPT_MESSAGE" and e.value.error_code == 2
    assert "byte position 0" in str(e.value)
    with pytest.raises(StorageError) as e:
        s.append("t", 0, good + good[:30])
    assert e.value.error_name == "CORRUPT_MESSAGE" and f"byte position {len(good)}" in str(e.value)
    old = bytearray(good)
    old[16] = 1
    with pytest.raises(StorageError) as e:
        s.append("t", 0, bytes(old))
    assert e.value.error_name == "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    assert s.offsets("t", 0).log_end_offset == 0


def test_idempotent_retry_is_deduplicated(tmp_path):
    s = BrokerStorage(str(tmp_path))
    s.create_topic("t", 1)
    b0 = make_batch([b"a", b"b"], producer_id=7, epoch=0, seq=0)
    b1 = make_batch([b"c"], producer_id=7, epoch=0, seq=2)
    assert offs(s.append("t", 0, b0)) == (0, 1)
    assert offs(s.append("t", 0, b1)) == (2, 2)
    assert offs(s.append("t", 0, b0)) == (0, 1)       # retry: same offsets, nothing written
    assert s.offsets("t", 0).log_end_offset == 3
    with pytest.raises(StorageError) as e:
        s.append("t", 0, make_batch([b"x"], producer_id=7, epoch=0, seq=9))
    assert e.value.error_name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert offs(s.append("t", 0, make_batch([b"d"], producer_id=7, epoch=1, seq=0))) == (3, 3)
    with pytest.raises(StorageError) as e:
        s.append("t", 0, make_batch([b"x"], producer_id=7, epoch=0, seq=3))
    assert e.value.error_name == "INVALID_PRODUCER_EPOCH"


def test_log_append_time_topic_rewrites_timestamp_and_crc(tmp_path):
    s = BrokerStorage(str(tmp_path))
    s.create_topic("lat", 1, log_append_time=True)
    r = s.append("lat", 0, make_batch([b"a", b"b"], codec=4))
    assert r.log_append_time > 1_700_000_000_000
    fr = s.read("lat", 0, 0, 1 << 20, 0)
    (h,) = list(iter_headers(fr.records))
    assert h.log_append_time and h.max_timestamp == r.log_append_time
    batch = DefaultRecordBatch(fr.records)
    assert batch.validate_crc()
    assert [rec.timestamp for rec in batch] == [r.log_append_time] * 2


def test_transactions_lso_markers_and_txnindex(tmp_path):
    s = BrokerStorage(str(tmp_path))
    s.create_topic("tx", 1)
    s.append("tx", 0, make_batch([b"plain"]))                                          # 0
    s.append("tx", 0, make_batch([b"a1", b"a2"], producer_id=5, epoch=1, seq=0, transactional=True))  # 1-2
    s.append("tx", 0, make_batch([b"b1"], producer_id=6, epoch=0, seq=0, transactional=True))        # 3
    assert s.offsets("tx", 0).last_stable_offset == 1
    assert s.open_transactions("tx", 0) == {5: 1, 6: 3}
    abort_at = s.write_txn_marker("tx", 0, 5, 1, commit=False, coordinator_epoch=4)    # 4
    assert abort_at == 4
    assert s.offsets("tx", 0).last_stable_offset == 3
    entries = parse_txn_index((tmp_path / "tx-0" / "00000000000000000000.txnindex").read_bytes())
    assert [tuple(e) for e in entries] == [(5, 1, 4, 3)]        # LSO after: pid 6's txn at 3
    commit_at = s.write_txn_marker("tx", 0, 6, 0, commit=True, coordinator_epoch=4)     # 5
    assert s.offsets("tx", 0).last_stable_offset == 6 == s.offsets("tx", 0).high_watermark
    fr = s.read("tx", 0, 0, 1 << 20, 1)
    assert fr.aborted == [(5, 1)]
    assert [r[4] for r in decode(fr.records, fr.aborted, committed=True)] == [b"plain", b"b1"]
    assert [r[4] for r in decode(fr.records)] == [b"plain", b"a1", b"a2", b"b1"]
    # the markers are real control batches Kafka's reader accepts
    hs = list(iter_headers(fr.records))
    markers = [DefaultRecordBatch(fr.records[h.position:h.end]) for h in hs if h.is_control]
    assert [m.base_offset for m in markers] == [abort_at, commit_at]
    assert all(m.validate_crc() and m.is_transactional for m in markers)
    recs = [next(iter(DefaultRecordBatch(fr.records[h.position:h.end]))) for h in hs if h.is_control]
    assert [struct.unpack(">hh", r.key) for r in recs] == [(0, 0), (0, 1)]    # ABORT, COMMIT
    assert [struct.unpack(">hi", r.value) for r in recs] == [(0, 4), (0, 4)]


def test_replaying_payments_gives_kafkas_txn_index(tmp_path):
    """Append payments-0's batches as producers did and write its markers through
    write_txn_marker: offsets, LSO and every .txnindex entry must come out as Kafka wrote them."""
    d = seg_dir("payments", 0)
    s = BrokerStorage(str(tmp_path))
    s.create_topic("replay", 1)
    want_entries = b""
    next_seq = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".txnindex"):
            want_entries += open(os.path.join(d, n), "rb").read()
        if not n.endswith(".log"):
            continue
        data = open(os.path.join(d, n), "rb").read()
        for h in iter_headers(data):
            batch = data[h.position:h.end]
            if h.is_control:
                key = next(iter(DefaultRecordBatch(batch))).key
                coord = struct.unpack(">hi", next(iter(DefaultRecordBatch(batch))).value)[1]
                off = s.write_txn_marker("replay", 0, h.producer_id, h.producer_epoch,
                                         struct.unpack(">hh", key)[1] == 1, coord)
                assert off == h.base_offset
            else:
                # the fixture's generator left gaps in sequence numbers, which a broker refuses:
                # renumber them as a real producer would (the CRC covers them)
                if h.base_sequence >= 0:
                    seq = next_seq.get(h.producer_id, 0)
                    next_seq[h.producer_id] = seq + h.last_offset_delta + 1
                    b = bytearray(batch)
                    struct.pack_into(">i", b, 53, seq)
                    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
                    batch = bytes(b)
                r = s.append("replay", 0, batch)
                assert (r.base_offset, r.last_offset) == (h.base_offset, h.last_offset)
    assert s.offsets("replay", 0).last_stable_offset == META[("payments", 0)]["lastStableOffset"]
    got = b"".join((tmp_path / "replay-0" / n).read_bytes()
                   for n in sorted(os.listdir(tmp_path / "replay-0")) if n.endswith(".txnindex"))
    assert len(want_entries) == TXN_ENTRY_SIZE * len(META[("payments", 0)]["abortedTransactions"])
    assert got == want_entries


# ------------------------------------------------------------------------------------ restart

def test_restart_keeps_topics_logs_and_open_transactions(tmp_path):
    s = BrokerStorage(str(tmp_path), segment_bytes=4096)
    info = s.create_topic("r", 3)
    s.import_log_dir("payments", 0, seg_dir("payments", 0))
    for _ in range(30):
        s.append("r", 2, make_batch([os.urandom(200)]))
    s.append("r", 2, make_batch([b"open"], producer_id=9, epoch=0, seq=0, transactional=True))
    before = {tp: s.offsets(*tp) for tp in [("r", 2), ("payments", 0)]}
    data_before = read_all(s, "r", 2, 0)[0]

    s2 = BrokerStorage(str(tmp_path), segment_bytes=4096)
    assert s2.topics["r"] == info
    assert s2.topic_by_id(info.topic_id_bytes).name == "r"
    assert {tp: s2.offsets(*tp) for tp in before} == before
    assert s2.offsets("r", 2).last_stable_offset == 30
    assert s2.open_transactions("r", 2) == {9: 30}
    assert read_all(s2, "r", 2, 0)[0] == data_before
    assert read_all(s2, "payments", 0, 1)[0] == expected("payments", 0, "committed")
    assert s2.append("r", 2, make_batch([b"more"])).base_offset == 31
    with pytest.raises(StorageError) as e:
        s2.create_topic("r", 1)
    assert e.value.error_name == "TOPIC_ALREADY_EXISTS"


def test_invalid_topic_name_is_a_storage_error_with_a_kafka_error_code(tmp_path):
    from kafka_tiered_source.protocol.errors import code_of
    from kafka_tiered_source.testing.log import StorageError
    from kafka_tiered_source.testing.storage import BrokerStorage
    storage = BrokerStorage(str(tmp_path))
    with pytest.raises(StorageError) as info:
        storage.create_topic("bad/name", 1)
    assert info.value.error_name == "INVALID_TOPIC"
    assert info.value.error_code == code_of("INVALID_TOPIC")
