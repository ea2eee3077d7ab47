"""testing/apis/fetch_request.py, the embedded broker's reader of flexible Fetch requests of the
usual shape: what it reads equals what the codec decodes from the same bytes, on every flexible
version, for requests the codec wrote from known values (the KIP-1248 walk's, a consumer's); it
declines what it does not read (partition tags, forgotten topics, ClusterId or ReplicaState, a
bool that is not 0 or 1, anything cut short, another API), which the codec then reads.  (Every
broker test's Fetch goes through it: tests/test_broker_*, test_synthetic_*, test_fetch_answers.)"""
from __future__ import annotations

import pytest

from kafka_tiered_source.protocol import codec, kip1248 as K, messages as m
from kafka_tiered_source.testing.apis import fetch_request

R = m.FetchRequest
UUID_A, UUID_B = bytes(range(16)), bytes(range(16, 32))


def _request(version: int, **kw):
    topics = [R.FetchTopic(topic="t", topic_id=UUID_A, partitions=[
                  R.FetchPartition(partition=p, current_leader_epoch=p - 1, fetch_offset=10 * p + 7,
                                   last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=2**31 - 1)
                  for p in range(5)]),
              R.FetchTopic(topic="\u00e9t\u00e9", topic_id=UUID_B, partitions=[
                  R.FetchPartition(partition=3, fetch_offset=2**40, partition_max_bytes=1)])]
    values = dict(max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=1, session_id=0,
                  session_epoch=-1, topics=topics, rack_id="rack-1", remote_log_segment_location_requested=True,
                  supported_storage_format_versions=[K.STORAGE_FORMAT_APACHE_KAFKA_V1, "other"])
    values.update(kw)
    return R(**values)


def _frame(req, version: int, client_id: str | None = "planner") -> bytes:
    return codec.encode_request(req, version, 1234, client_id, framed=False)


@pytest.mark.parametrize("version", range(12, 19))
@pytest.mark.parametrize("kw", [{}, {"remote_log_segment_location_requested": False,
                                     "supported_storage_format_versions": []},
                                {"topics": []}, {"rack_id": ""}])
def test_reads_as_the_codec(version, kw):
    for client_id in ("planner", None, ""):
        data = _frame(_request(version, **kw), version, client_id)
        got = fetch_request.read(data)
        assert got is not None, "declined a request of the usual shape"
        hdr, req = got
        want_hdr, want = codec.decode_request(data)
        assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id, hdr.client_id) == \
            (1, version, 1234, client_id)
        assert hdr == want_hdr
        assert req == want
        # and the values are the ones written (the codec leaves a v12 topic id, a v13+ name, out)
        assert [[(p.partition, p.fetch_offset, p.current_leader_epoch) for p in t.partitions] for t in req.topics] \
            == [[(p.partition, p.fetch_offset, p.current_leader_epoch) for p in t.partitions]
                for t in _request(version, **kw).topics]
        # trailing bytes are ignored by both (Kafka's broker ignores them)
        assert fetch_request.read(data + b"\0\0")[1] == want


@pytest.mark.parametrize("version", [12, 13, 17, 18])
def test_declines_what_it_does_not_read(version):
    plain = _request(version)
    tagged = _request(version)
    tagged.topics[0].partitions[2].log_start_offset = 5
    tagged.topics[0].partitions[2].unknown_tags = {9: b"x"}
    others = [tagged, _request(version, cluster_id="c1"),
              _request(version, forgotten_topics_data=[R.ForgottenTopic(topic="t", topic_id=UUID_A, partitions=[1])])]
    if version >= 15:
        others.append(_request(version, replica_state=R.ReplicaState(replica_id=1, replica_epoch=2)))
    if version >= 17:
        hw = _request(version)
        hw.topics[0].partitions[0].replica_directory_id = UUID_B
        others.append(hw)
    for req in others:
        data = _frame(req, version)
        assert fetch_request.read(data) is None
        codec.decode_request(data)          # well-formed: the codec reads it
    data = _frame(plain, version)
    for cut in range(len(data)):
        got = fetch_request.read(data[:cut])
        if got is not None:             # only a cut inside trailing tags could read, and there are none
            pytest.fail(f"read a request cut to {cut} of {len(data)} bytes")
    # a bool tag that is neither 0 nor 1, tags not ascending: left to the codec
    i = data.index(bytes([K.TAG_REMOTE_LOG_SEGMENT_LOCATION_REQUESTED, 1, 1]))
    assert fetch_request.read(data[:i + 2] + b"\x02" + data[i + 3:]) is None
    assert fetch_request.read(b"\0\0" + data[2:]) is None            # not a Fetch (Produce)
