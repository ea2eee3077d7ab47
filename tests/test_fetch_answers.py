"""protocol/fetch_answers.py and fetch_frames.py, the KIP-1248 walk's Fetch answers and requests:
native/fetch_answers.c and its pure-Python twin read the embedded broker's real answers
(locations with aborted lists, records, empty records, partition errors, an unknown topic id)
into the same tuples the codec's objects make, on every flexible version; they decline what is
cut short or left over, and then the codec names the fault; the requests encoded from parts, and
patched from the last one, and the broker's answers written without the codec
(testing/apis/fetch_body.py) are byte for byte the codec's.

Expected values come from how the partitions were written (tests/histories.py): which
producer's transaction aborted where, where the log ends, what was tiered."""
from __future__ import annotations

import pytest
from histories import History

from kafka_tiered_source import _native
from kafka_tiered_source.errors import ProtocolError
from kafka_tiered_source.protocol import codec, fetch_answers as fa, messages as m
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.protocol.fetch import FetchAsk
from kafka_tiered_source.protocol.fetch_frames import FetchFrames, encode
from kafka_tiered_source.testing.apis import fetch_body

VERSIONS = range(12, 19)
INT32_MAX = 2**31 - 1


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Partition 0: an aborted transaction of producer 7 (offsets 0-9, marker 10), 10 plain
    records, tiered; then producer 9's aborted transaction in the local log.  Partition 1:
    10 plain records, local."""
    from kafka_tiered_source.testing import EmbeddedCluster
    base = tmp_path_factory.mktemp("fetch-answers")
    c = EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote").start()
    try:
        c.create_topic("t", 2)
        h = History(c, "t", 0)
        h.produce(10, pid=7)
        h.end_txn(7, commit=False)                # marker at 10
        h.produce(10)                             # 11-20
        c.roll("t", 0)
        assert c.tier("t")
        tiered_end = h.log_end                    # 21
        h.produce(5, pid=9)                       # 21-25, local
        h.end_txn(9, commit=False)                # marker at 26
        h.produce(3)                              # 27-29
        History(c, "t", 1).produce(10)
        yield c, tiered_end, h.log_end
    finally:
        c.stop()


def _frames(c, version: int, asks: list[FetchAsk], *, extra_topic: bool = False) -> bytes:
    """One read_committed Fetch of ``asks`` with the KIP-1248 tags at ``version``: the raw
    response frame."""
    got = []
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as bc:
        conn = bc.leader("t", 0)
        conn.ensure_connected()
        b = bc.fetch_builder(conn, ["t"], request_remote_location=True)
        b.version, b.send_tags = version, True
        req = b.request(asks, max_wait_ms=0, min_bytes=0, max_bytes=INT32_MAX, isolation_level=1)
        if extra_topic:      # a topic id no broker knows: UNKNOWN_TOPIC_ID
            F = m.FetchRequest
            req.topics.append(F.FetchTopic(topic_id=b"\x42" * 16, partitions=[
                F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=100)]))
        conn.exchange([req], lambda resp, r: [], version, decode=lambda data, v: got.append(bytes(data)))
    return got[0]


def _all_ways(frame: bytes, version: int) -> tuple:
    native = _native.fetch_answers(memoryview(frame), 5, version)
    python = fa.read_answers(memoryview(frame), 5, version)
    cid, decoded = codec.decode_response(frame, m.FetchResponse, version)
    # the embedded broker writes its answers without the codec (testing/apis/fetch_body.py): the
    # bytes are the codec's
    assert codec.encode_response(decoded, version, cid, framed=False) == frame
    assert fetch_body.encode(decoded, version).body == frame[5:]
    reference = fa.answers_of(decoded, version)
    assert native is not None and python is not None, "the fast readers declined a well-formed answer"

    def plain(answers):
        throttle, error, topics = answers
        return throttle, error, [(n, i, [tuple(bytes(x) if isinstance(x, memoryview) else x for x in p) for p in ps])
                                 for n, i, ps in topics]
    assert plain(native) == plain(python) == plain(reference)
    for backend in ("native", "python"):
        assert plain(_as_tuple(fa.decode(frame, version, backend=backend))) == plain(reference)
    return reference


def _as_tuple(a: fa.FetchAnswers) -> tuple:
    return a.throttle_time_ms, a.error_code, a.topics


def _partitions(answers) -> dict:
    return {(p[fa.P_INDEX], i): p for i, (_, _, ps) in enumerate(answers[2]) for p in ps}


@pytest.mark.parametrize("version", VERSIONS)
def test_both_readers_read_real_answers_as_the_codec(written, version):
    c, tiered_end, log_end = written
    frame = _frames(c, version, [FetchAsk("t", 0, 0, INT32_MAX), FetchAsk("t", 1, 10, INT32_MAX)],
                    extra_topic=version >= 13)
    got = _partitions(_all_ways(frame, version))
    loc = got[(0, 0)]
    # offset 0 lies in the tiered copy: a location, the aborted transaction of producer 7 listed
    assert loc[fa.P_ERROR] == 0 and loc[fa.P_SEGMENT_ID] is not None and loc[fa.P_RECORDS] == b""
    assert loc[fa.P_BASE_OFFSET] == 0 and loc[fa.P_END_OFFSET] == tiered_end - 1
    assert [pid for pid, _ in loc[fa.P_ABORTED]] == [7] and loc[fa.P_ABORTED][0][1] == 0
    empty = got[(1, 0)]                  # partition 1 at its log end: empty records, no error
    assert empty[fa.P_ERROR] == 0 and empty[fa.P_RECORDS] == b"" and empty[fa.P_HIGH_WATERMARK] == 10
    assert empty[fa.P_SEGMENT_ID] is None
    if version >= 13:
        assert got[(0, 1)][fa.P_ERROR] == 100        # UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", (12, 18))
def test_records_errors_and_a_local_aborted_list(written, version):
    c, tiered_end, log_end = written
    frame = _frames(c, version, [FetchAsk("t", 0, tiered_end, INT32_MAX),
                                 FetchAsk("t", 1, 50, INT32_MAX, leader_epoch=-1)])
    got = _partitions(_all_ways(frame, version))
    local = got[(0, 0)]
    assert local[fa.P_SEGMENT_ID] is None and len(local[fa.P_RECORDS]) > 0
    assert [pid for pid, _ in local[fa.P_ABORTED]] == [9]
    assert got[(1, 0)][fa.P_ERROR] == 1                    # OFFSET_OUT_OF_RANGE past the log end
    fenced = _frames(c, version, [FetchAsk("t", 0, 0, INT32_MAX, leader_epoch=99)])
    assert _partitions(_all_ways(fenced, version))[(0, 0)][fa.P_ERROR] == 75     # UNKNOWN_LEADER_EPOCH


def test_cut_short_or_left_over_is_declined_and_the_codec_names_it(written):
    c, _, _ = written
    frame = _frames(c, 18, [FetchAsk("t", 0, 0, INT32_MAX), FetchAsk("t", 1, 0, INT32_MAX)])
    for bad in [frame[:n] for n in range(5, len(frame))] + [frame + b"\0"]:
        assert _native.fetch_answers(memoryview(bad), 5, 18) is None
        assert fa.read_answers(memoryview(bad), 5, 18) is None
        for backend in ("native", "python"):
            with pytest.raises(ProtocolError):
                fa.decode(bad, 18, backend=backend)


def test_tags_out_of_order_are_declined_and_ascending_unknown_ones_skipped(written):
    c, _, _ = written
    frame = _frames(c, 18, [FetchAsk("t", 0, 0, INT32_MAX)])
    assert frame.endswith(b"\0")           # the response's own tagged section: no field
    body = frame[:-1]
    # two unknown tags, empty: Kafka writes a section's tags in ascending order
    ascending = body + bytes([2, 5, 0, 6, 0])
    assert _native.fetch_answers(memoryview(ascending), 5, 18) is not None
    assert fa.read_answers(memoryview(ascending), 5, 18) is not None
    for bad in (body + bytes([2, 5, 0, 5, 0]), body + bytes([2, 6, 0, 5, 0])):    # repeated, descending
        assert _native.fetch_answers(memoryview(bad), 5, 18) is None
        assert fa.read_answers(memoryview(bad), 5, 18) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_requests_from_parts_and_patched_are_the_codecs(written, version):
    c, _, _ = written
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers, "client.id": "walk"}) as bc:
        conn = bc.leader("t", 0)
        conn.ensure_connected()
        b = bc.fetch_builder(conn, ["t"], request_remote_location=True)
        b.version, b.send_tags = version, True
        frames = FetchFrames(b, "walk", max_wait_ms=0, min_bytes=0, max_bytes=INT32_MAX, isolation_level=1)
        assert frames.fast
        rounds = [[(("t", 0), 5, INT32_MAX), (("t", 1), 7, 1)],
                  [(("t", 0), 2**40 + 3, INT32_MAX), (("t", 1), 8, INT32_MAX)],      # the same keys: patched
                  [(("t", 1), 9, 100)]]                                              # fewer: rebuilt
        for cid, asks in enumerate(rounds):
            req = frames.request(0, asks)
            want = codec.encode_request(b.request([FetchAsk(t, p, o, mb) for (t, p), o, mb in asks], max_wait_ms=0,
                                                  min_bytes=0, max_bytes=INT32_MAX, isolation_level=1),
                                        version, cid, "walk")
            assert bytes(encode(req, version, cid, "walk")) == want
