"""Selecting the wanted topics' records out of ``__remote_log_metadata`` batches
(kafka_tiered_source.protocol.metadata_select): batches built by kafka-python (an independent
writer), what to keep decided by this test's own parser of the upstream schemas
(test_remote_log_metadata.read_frame); the C walk and its pure-Python twin agree record for
record and error for error."""
from __future__ import annotations

import random
import struct
import uuid

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from test_remote_log_metadata import read_frame

from kafka_tiered_source.errors import CorruptRecordError
from kafka_tiered_source.protocol import remote_log_metadata as rlm
from kafka_tiered_source.protocol.metadata_select import select_records
from kafka_tiered_source.testing.batches import control_batch

BACKENDS = ["native", "python"]
R, U = rlm.SegmentRecord, rlm.SegmentUpdate
IDS = [uuid.UUID(int=i * 0x1111_2222_3333_4444_5555_6666_7777_8888).bytes for i in range(1, 6)]


def value_for(topic_id: bytes, name: str, i: int, version: int) -> bytes:
    sid = R.RemoteLogSegmentIdEntry(topic_id_partition=R.TopicIdPartitionEntry(name=name, id=topic_id, partition=i % 3),
                                    id=uuid.UUID(int=i + 1).bytes)
    if i % 2:
        return rlm.encode_record(U(remote_log_segment_id=sid, broker_id=0, event_timestamp_ms=i,
                                   remote_log_segment_state=rlm.COPY_SEGMENT_FINISHED), version)
    return rlm.encode_record(R(remote_log_segment_id=sid, start_offset=i * 10, end_offset=i * 10 + 9, broker_id=0,
                               max_timestamp_ms=i, event_timestamp_ms=i, segment_leader_epochs=[],
                               segment_size_in_bytes=100, remote_log_segment_state=0), version)


def batch(base: int, records: list, codec: int = 0, epoch: int = 3) -> bytes:
    """A v2 batch by kafka-python; records: (key, value, headers)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (key, value, headers) in enumerate(records):
        b.append(i, 1_700_000_000_000 + i, key, value, headers)
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base)
    struct.pack_into(">i", data, 12, epoch)      # partitionLeaderEpoch: outside the CRC
    return bytes(data)


def log_of(rng: random.Random) -> tuple[bytes, list[tuple[int, bytes | None, bytes | None]]]:
    """Batches of every shape the topic may hold, and every (offset, key, value) in them."""
    out, rows, offset = b"", [], 0
    names = {tid: f"topic-{n}" * (n * 9 + 1) for n, tid in enumerate(IDS)}   # names of 1 byte to 2-byte lengths
    for n in range(40):
        count = rng.choice([1, 1, 1, 3])
        records = []
        for k in range(count):
            tid = rng.choice(IDS)
            value = None if rng.random() < 0.1 else value_for(tid, names[tid], offset + k, rng.choice([0, 1]))
            key = None if rng.random() < 0.5 else f"{uuid.UUID(bytes=tid)}:{k}".encode()
            headers = [("h", b"x")] if rng.random() < 0.1 else []
            records.append((key, value, headers))
            rows.append((offset + k, key, value))
        codec = rng.choice([0, 0, 0, 1, 2, 3, 4]) if n != 5 else 4
        out += batch(offset, records, codec, epoch=n // 10)
        offset += count
        if n == 7:                                # a transaction marker: never a record
            out += control_batch(offset, 9, 0, True, 0, 1_700_000_000_000, leader_epoch=0)
            offset += 1
    return out, rows


def wanted_rows(rows, wanted) -> list[tuple[int, bytes]]:
    return [(o, v) for o, _, v in rows if v is not None and (wanted is None or read_frame(v)["tip"][1] in wanted)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wanted", [None, [], IDS[:1], IDS[1:3], IDS])
def test_the_wanted_topics_records_and_nothing_else(backend, wanted):
    data, rows = log_of(random.Random(25))
    got = select_records(data, wanted, backend=backend)
    assert got.hits == wanted_rows(rows, None if wanted is None else set(wanted))
    assert got.passed == len(rows) - len(got.hits)
    assert got.tombstones == [(o, k) for o, k, v in rows if v is None] and got.tombstones
    assert got.keyed == sum(k is not None for _, k, _ in rows)
    assert got.consumed == len(data) and got.next_offset == rows[-1][0] + 1
    assert got.last_epoch == 3


@pytest.mark.decoder
def test_the_default_backend_is_the_decoders():
    data, rows = log_of(random.Random(7))
    assert select_records(data, IDS[2:4]).hits == wanted_rows(rows, set(IDS[2:4]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_batch_cut_off_by_the_end_of_the_answer_is_left_for_the_next_fetch(backend):
    data, rows = log_of(random.Random(3))
    first = batch(0, [(None, value_for(IDS[0], "a", 0, 0), [])])
    cut = first + data[: len(data) // 2]
    got = select_records(cut, IDS, backend=backend)
    whole = select_records(cut[: got.consumed], IDS, backend=backend)
    assert got.consumed < len(cut) and got == whole


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_is_no_metadata_record_is_kept_so_the_decoder_names_it(backend):
    odd = [b"", b"\x02\x00\x00", b"\x01\x09\x00", b"\x01\x00\x00\x05ab", b"\x01\x00\x00\x01" + IDS[0][:15]]
    data = batch(100, [(None, v, []) for v in odd] + [(None, value_for(IDS[1], "b", 1, 1), [])])
    got = select_records(data, [IDS[0]], backend=backend)
    assert got.hits == [(100 + i, v) for i, v in enumerate(odd)]


def corruptions() -> list[tuple[str, bytes, str]]:
    good = batch(50, [(b"k", value_for(IDS[0], "t", 0, 0), [("h", b"v")])])
    def at(pos, value, data=good, fmt=">B"):
        out = bytearray(data)
        struct.pack_into(fmt, out, pos, value)
        return bytes(out)
    return [
        ("crc", at(70, good[70] ^ 1), "CRC-32C mismatch"),
        ("magic", at(16, 1), "unsupported record batch magic 1"),
        ("length", at(8, 10, fmt=">i"), "invalid batch length 10"),
        ("count", at(57, 2, fmt=">i"), "truncated record length"),
    ]


@pytest.mark.parametrize("name,data,fragment", corruptions(), ids=[c[0] for c in corruptions()])
def test_malformed_batches_are_errors_naming_the_byte(name, data, fragment):
    errors = []
    for backend in BACKENDS:
        with pytest.raises(CorruptRecordError) as info:
            select_records(data, None, backend=backend, verify_crc=name == "crc")
        errors.append((str(info.value), info.value.position, info.value.base_offset))
    assert errors[0] == errors[1] and fragment in errors[0][0] and errors[0][2] == 50


def test_both_backends_agree_on_mangled_bytes():
    """Random bytes flipped (CRC not checked, so the record walk meets them): the same hits, or
    the same error at the same byte, from both."""
    rng = random.Random(1266)
    data, _ = log_of(random.Random(11))
    for _ in range(300):
        mangled = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            mangled[rng.randrange(len(mangled))] = rng.randrange(256)
        outcomes = []
        for backend in BACKENDS:
            try:
                outcomes.append(select_records(bytes(mangled), IDS[:2], backend=backend, verify_crc=False))
            except CorruptRecordError as exc:
                outcomes.append((str(exc), exc.position, exc.base_offset))
            except Exception as exc:   # a codec library's refusal: the same from both, or the test fails
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1]


# ---- rows: the records decoded by the walk (native/rlm_rows.c and its twin rlm.row_of) ----------
def _b64(raw: bytes) -> str:
    import base64
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _made(version: int):
    """Records of every kind with the rows they were made from: (value, expected row at offset 7)."""
    D = rlm.PartitionDelete
    tid, sid = IDS[0], uuid.UUID(int=99).bytes
    tip = R.TopicIdPartitionEntry(name="orders-é", id=tid, partition=5)
    seg = R(remote_log_segment_id=R.RemoteLogSegmentIdEntry(topic_id_partition=tip, id=sid), start_offset=100,
            end_offset=199, broker_id=1, max_timestamp_ms=-5, event_timestamp_ms=2,
            segment_leader_epochs=[R.SegmentLeaderEpochEntry(leader_epoch=e, offset=o) for e, o in ((4, 150), (2, 100))],
            segment_size_in_bytes=4096, custom_metadata=b"\x00cm", remote_log_segment_state=0, txn_index_empty=True,
            broker_leader_epoch=9)
    upd = U(remote_log_segment_id=U.RemoteLogSegmentIdEntry(
        topic_id_partition=U.TopicIdPartitionEntry(name="orders-é", id=tid, partition=5), id=sid),
        broker_id=1, event_timestamp_ms=3, remote_log_segment_state=1, broker_leader_epoch=9, end_offset=188)
    dele = D(topic_id_partition=D.TopicIdPartitionEntry(name="x", id=tid, partition=-1), broker_id=2,
             event_timestamp_ms=4, remote_partition_delete_state=2)
    v1 = version >= 1
    return [(rlm.encode_record(seg, version),
             (0, 7, _b64(tid), 5, "orders-é", _b64(sid), 100, 199, -5, 4096, ((2, 100), (4, 150)), b"\x00cm", True, 0,
              9 if v1 else 0)),
            (rlm.encode_record(upd, version), (1, 7, _b64(tid), 5, _b64(sid), 1, None, 188 if v1 else -1)),
            (rlm.encode_record(dele, version), (2, 7, _b64(tid), -1))]


@pytest.mark.parametrize("version", [0, 1])
def test_rows_are_the_records_as_made(version):
    for value, row in _made(version):
        data = batch(7, [(None, value, [])])
        for backend in BACKENDS:
            assert select_records(data, None, backend=backend, decode=True).hits == [row]


def test_rows_agree_with_the_twin_on_mangled_values():
    """Every value the codec reads gives the same row both ways; every other stays (offset, value)."""
    rng = random.Random(36)
    values = [v for version in (0, 1) for v, _ in _made(version)]
    values.append(values[0] + b"\x00")                                     # a trailing byte
    values.append(values[0][:-1] + bytes([1, 77, 2]) + b"ab")              # an unknown top-level tag
    declined = 0
    for n in range(1500):
        v = bytearray(rng.choice(values))
        for _ in range(rng.choice([1, 1, 2])):
            if not v:
                break
            i = rng.randrange(len(v))
            if rng.random() < 0.3:
                del v[i:]
            else:
                v[i] = rng.choice([0, 1, 0x7F, 0x80, 0xC3, 0xFF, rng.randrange(256)])
        if not v:
            continue
        data = batch(n, [(None, bytes(v), [])])
        native, python = (select_records(data, None, backend=b, decode=True).hits for b in BACKENDS)
        assert native == python, bytes(v)
        declined += len(native[0]) == 2
    assert 100 < declined < 1400      # both outcomes were exercised
