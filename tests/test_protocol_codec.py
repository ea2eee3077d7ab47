"""Codec round trips for every declared message and version, plus hand-made wire vectors."""
import random
import struct

import pytest

from kafka_tiered_source.errors import ProtocolError
from kafka_tiered_source.protocol import codec, kip1248, messages as m, primitives as P
from kafka_tiered_source.protocol.random_values import random_message

ALL = sorted(list(m.REQUESTS.values()) + list(m.RESPONSES.values()), key=lambda c: (c.API_KEY, c.KIND))
CASES = [(cls, v) for cls in ALL for v in range(cls.VALID_VERSIONS.lo, cls.VALID_VERSIONS.hi + 1)]


def test_every_required_api_and_version_is_declared():
    expected = {
        "ApiVersions": (0, 4), "Metadata": (1, 13), "ListOffsets": (1, 11), "Fetch": (4, 18),
        "Produce": (3, 12), "SaslHandshake": (0, 1), "SaslAuthenticate": (0, 2),
        "FindCoordinator": (0, 6), "InitProducerId": (0, 5), "AddPartitionsToTxn": (0, 5),
        "EndTxn": (0, 5), "OffsetFetch": (1, 9), "OffsetCommit": (2, 9),
        "GetTelemetrySubscriptions": (0, 0), "PushTelemetry": (0, 0),
    }
    names = {v: k for k, v in m.API_NAMES.items()}
    for api, (lo, hi) in expected.items():
        req = m.REQUESTS[names[api]]
        for v in (lo, hi):
            assert v in req.VALID_VERSIONS, (api, v)
            assert v in m.RESPONSES[names[api]].VALID_VERSIONS, (api, v)


@pytest.mark.parametrize("cls,version", CASES, ids=[f"{c.NAME}-v{v}" for c, v in CASES])
def test_random_round_trip(cls, version):
    rng = random.Random(f"{cls.NAME}-{version}")
    for _ in range(8):
        msg = random_message(cls, version, rng)
        data = msg.encode(version)
        back = cls.decode(data, version)
        assert back == msg
        assert back.encode(version) == data


def test_uvarint_and_zigzag_vectors():
    # Vectors from the protobuf/Kafka varint definition: 300 = 0xAC 0x02; zigzag maps
    # 0,-1,1,-2 -> 0,1,2,3.
    out = bytearray()
    P.write_uvarint(out, 300)
    assert bytes(out) == b"\xac\x02"
    for value, wire in ((0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"),
                        (2147483647, b"\xfe\xff\xff\xff\x0f"), (-2147483648, b"\xff\xff\xff\xff\x0f")):
        out = bytearray()
        P.write_varint(out, value)
        assert bytes(out) == wire
        assert P.read_varint(wire, 0) == (value, len(wire))
    out = bytearray()
    P.write_varlong(out, -(1 << 63))
    assert bytes(out) == b"\xff" * 9 + b"\x01"
    assert P.read_varlong(bytes(out), 0)[0] == -(1 << 63)
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        P.read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)


def test_api_versions_request_v3_bytes_by_hand():
    msg = m.ApiVersionsRequest(client_software_name="kt", client_software_version="1.0")
    # compact strings: uvarint(len+1) then utf-8; then an empty tagged-field section
    assert msg.encode(3) == b"\x03kt" + b"\x041.0" + b"\x00"
    assert msg.encode(0) == b""
    frame = codec.encode_request(msg, 3, correlation_id=7, client_id="cli")
    # size, api key 18, version 3, correlation 7, client id as a *classic* string, header tags
    header = struct.pack(">hhih", 18, 3, 7, 3) + b"cli" + b"\x00"
    body = b"\x03kt\x041.0\x00"
    assert frame == struct.pack(">i", len(header) + len(body)) + header + body
    hdr, back = codec.decode_request(frame, framed=True)
    assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id, hdr.client_id) == (18, 3, 7, "cli")
    assert back == msg


def test_request_header_v1_for_classic_versions_and_null_client_id():
    frame = codec.encode_request(m.MetadataRequest(topics=None), 8, correlation_id=1, client_id=None)
    body = b"\xff\xff\xff\xff" + b"\x01" + b"\x00\x00"  # null topics, auto-create, two bools
    assert frame[4:] == struct.pack(">hhih", 3, 8, 1, -1) + body


def test_api_versions_response_header_is_always_v0():
    resp = m.ApiVersionsResponse(error_code=0, api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=1, min_version=4, max_version=17)])
    frame = codec.encode_response(resp, 3, correlation_id=9)
    # no header tagged-field byte after the correlation id: the body starts right away
    assert frame[4:8] == struct.pack(">i", 9)
    assert frame[8:10] == b"\x00\x00"  # error code
    cid, back = codec.decode_response(frame, m.ApiVersionsRequest, 3, framed=True)
    assert cid == 9 and back == resp
    # a flexible non-ApiVersions response has header v1 (one empty tag section)
    frame = codec.encode_response(m.MetadataResponse(), 12, correlation_id=5)
    assert frame[4:9] == struct.pack(">i", 5) + b"\x00"


def test_records_decode_as_a_view_into_the_frame():
    resp = m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(
        topic_id=b"\x01" * 16, partitions=[m.FetchResponse.PartitionData(partition_index=0, records=b"R" * 100)])])
    frame = bytearray(codec.encode_response(resp, 17, correlation_id=3))
    _, back = codec.decode_response(frame, m.FetchResponse, 17, framed=True)
    rec = back.responses[0].partitions[0].records
    assert isinstance(rec, memoryview)
    assert bytes(rec) == b"R" * 100
    # shares memory with the frame: no copy was made
    i = bytes(frame).index(b"R" * 100)
    frame[i] = ord("X")
    assert bytes(rec[:1]) == b"X"


def test_unknown_tags_are_kept_and_reencoded_or_dropped():
    part = m.FetchResponse.PartitionData(partition_index=1, records=None, unknown_tags={250: b"\x01\x02"})
    resp = m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic_id=b"\x02" * 16, partitions=[part])],
                           unknown_tags={7: b"zz"})
    data = resp.encode(16)
    back = m.FetchResponse.decode(data, 16)
    assert back.unknown_tags == {7: b"zz"}
    assert back.responses[0].partitions[0].unknown_tags == {250: b"\x01\x02"}
    assert back.encode(16) == data
    dropped = m.FetchResponse.decode(data, 16, keep_unknown_tags=False)
    assert dropped.unknown_tags is None and dropped.responses[0].partitions[0].unknown_tags is None
    # tag 250 is a two-byte uvarint; each dropped entry = tag + size byte + data
    assert len(dropped.encode(16)) == len(data) - (2 + 1 + 2) - (1 + 1 + 2)


def test_tagged_fields_written_only_when_not_default_and_in_tag_order():
    req = m.FetchRequest(max_wait_ms=1, topics=[])
    plain = req.encode(18)
    assert plain[-1:] == b"\x00"  # empty top-level tag section
    req.supported_storage_format_versions = [kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1]
    req.remote_log_segment_location_requested = True
    req.cluster_id = "c"
    tagged = req.encode(18)
    tail = tagged[len(plain) - 1:]
    # 3 tags: 0 cluster id (compact string "c"), 100 bool, 101 compact array of one string
    assert tail == (b"\x03" + b"\x00\x02\x02c" + b"\x64\x01\x01"
                    + b"\x65\x0f\x02\x0eApacheKafkaV1")
    back = m.FetchRequest.decode(tagged, 18)
    assert back.remote_log_segment_location_requested is True
    assert back.supported_storage_format_versions == ["ApacheKafkaV1"]


def test_kip1248_response_fields_round_trip_and_stay_out_of_repr():
    url = "https://bucket.s3.amazonaws.com/seg.log?X-Amz-Signature=deadbeef"
    part = m.FetchResponse.PartitionData(
        partition_index=0, high_watermark=10, records=None,
        remote_log_segment_id=b"\x07" * 16, remote_log_segment_custom_metadata=b"\x00",
        remote_log_segment_start_position=4096, remote_log_segment_end_position=8192,
        remote_log_segment_base_offset=100, remote_log_segment_end_offset=199,
        storage_format_version="ApacheKafkaV1", signed_remote_log_segment_location=url)
    resp = m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic_id=b"\x02" * 16, partitions=[part])])
    for v in (12, 17, 18):
        back = m.FetchResponse.decode(resp.encode(v), v)
        bp = back.responses[0].partitions[0]
        assert bp == part and kip1248.has_remote_location(bp)
        assert "deadbeef" not in repr(back) and "X-Amz" not in repr(back)
    # below v12 the tags cannot travel: the fields decode as defaults
    back = m.FetchResponse.decode(resp.encode(11), 11)
    assert not kip1248.has_remote_location(back.responses[0].partitions[0])
    assert back.responses[0].partitions[0].signed_remote_log_segment_location is None


def test_sasl_auth_bytes_never_in_repr():
    req = m.SaslAuthenticateRequest(auth_bytes=b"\x00user\x00hunter2")
    assert "hunter2" not in repr(req) and "***" in repr(req)


def test_truncated_frame_names_field_and_position():
    data = m.MetadataResponse(brokers=[m.MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=1)]).encode(12)
    with pytest.raises(ProtocolError) as ei:
        m.MetadataResponse.decode(data[:9], 12)
    assert "MetadataResponse.brokers" in str(ei.value) and "byte position" in str(ei.value)
    with pytest.raises(ProtocolError, match="trailing"):
        m.MetadataResponse.decode(data + b"\x00", 12)


def test_null_for_non_nullable_field_is_refused_naming_it():
    with pytest.raises(ProtocolError, match="host"):
        m.MetadataResponse(brokers=[m.MetadataResponse.MetadataResponseBroker(host=None)]).encode(12)
    with pytest.raises(ProtocolError, match="Topics|topics"):
        m.MetadataRequest(topics=None).encode(0)  # null topics only from v1


def test_unsupported_versions_raise_and_keep_the_header():
    with pytest.raises(codec.UnsupportedVersionError):
        m.FetchRequest().encode(3)
    frame = struct.pack(">hhih", 18, 9, 42, 1) + b"x" + b"\x00"
    with pytest.raises(codec.UnsupportedVersionError) as ei:
        codec.decode_request(frame)
    assert ei.value.header.correlation_id == 42 and ei.value.header.request_api_version == 9


def test_out_of_order_tags_are_rejected():
    with pytest.raises(ProtocolError, match="out of order"):
        P.read_tagged_fields(b"\x02\x05\x00\x01\x00", 0)


def test_uuid_helpers_match_kafka_string_form():
    from kafka_tiered_source.ids import uuid_from_str, uuid_to_str
    raw = uuid_from_str("AAAAAAAAAAAAAAAAAAAAAQ")
    assert raw == b"\x00" * 15 + b"\x01"
    msg = m.GetTelemetrySubscriptionsRequest(client_instance_id=raw)
    assert msg.encode(0) == raw + b"\x00"
    assert uuid_to_str(m.GetTelemetrySubscriptionsRequest.decode(msg.encode(0), 0).client_instance_id) == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_error_table():
    from kafka_tiered_source.protocol.errors import ERRORS, broker_error, lookup
    assert lookup(6).name == "NOT_LEADER_OR_FOLLOWER" and lookup(6).retriable and lookup(6).refresh_metadata
    assert lookup(3).retriable and lookup(3).refresh_metadata
    assert not lookup(1).retriable  # OFFSET_OUT_OF_RANGE
    assert not lookup(58).retriable and lookup(58).name == "SASL_AUTHENTICATION_FAILED"
    assert lookup(9999).name == "UNKNOWN_ERROR_CODE_9999" and not lookup(9999).retriable
    assert len({e.name for e in ERRORS.values()}) == len(ERRORS)
    err = broker_error(6, broker="b1:9092", api="Fetch", topic="t", partition=3)
    assert err.error_code == 6 and err.retriable and err.partition == 3
    assert "NOT_LEADER_OR_FOLLOWER" in str(err) and "b1:9092" in str(err) and "partition 3" in str(err)


def test_named_codes_are_kafkas_and_the_error_class_says_whether_metadata_is_stale():
    from kafka_tiered_source.errors import BrokerError, InvalidMetadataError
    from kafka_tiered_source.protocol import errors as e
    # each constant is the code of the Kafka error it is named after (Errors.java)
    for name in ("OFFSET_OUT_OF_RANGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE",
                 "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION", "UNSUPPORTED_VERSION",
                 "UNKNOWN_TOPIC_ID"):
        assert e.lookup(getattr(e, name)).name == name
    # Kafka's InvalidMetadataException family: NotLeaderOrFollower, UnknownTopicOrPartition,
    # LeaderNotAvailable and Network exceptions extend it; OffsetOutOfRange and RequestTimedOut do not
    for code in (e.NOT_LEADER_OR_FOLLOWER, e.UNKNOWN_TOPIC_OR_PARTITION, e.LEADER_NOT_AVAILABLE,
                 e.NETWORK_EXCEPTION, e.UNKNOWN_TOPIC_ID):
        err = e.broker_error(code)
        assert isinstance(err, InvalidMetadataError) and err.refresh_metadata and err.retriable, code
    for code in (e.OFFSET_OUT_OF_RANGE, e.REQUEST_TIMED_OUT, e.UNSUPPORTED_VERSION):
        err = e.broker_error(code)
        assert type(err) is BrokerError and not err.refresh_metadata, code


def test_copy_is_deep_for_structs_and_lists():
    resp = m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(
        partitions=[m.FetchResponse.PartitionData(partition_index=1, records=b"abc")])])
    back = m.FetchResponse.decode(resp.encode(13), 13)
    dup = back.copy()
    assert dup == back
    dup.responses[0].partitions[0].partition_index = 2
    assert back.responses[0].partitions[0].partition_index == 1


def test_unknown_constructor_field_is_refused():
    with pytest.raises(TypeError, match="no field"):
        m.FetchRequest(max_wait=1)


@pytest.mark.parametrize("cls", [m.FetchResponse, m.FetchRequest, m.MetadataResponse, m.ApiVersionsResponse,
                                 m.ListOffsetsResponse, m.ProduceRequest], ids=lambda c: c.NAME)
def test_truncated_or_corrupted_bytes_only_raise_protocol_error(cls):
    rng = random.Random(f"fuzz-{cls.NAME}")
    for version in (cls.VALID_VERSIONS.lo, cls.VALID_VERSIONS.hi):
        data = random_message(cls, version, rng).encode(version)
        for cut in range(len(data)):
            with pytest.raises(ProtocolError):
                cls.decode(data[:cut], version)
        for _ in range(200):
            bad = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                bad[rng.randrange(len(bad))] = rng.getrandbits(8)
            try:
                cls.decode(bytes(bad), version)
            except ProtocolError:
                pass


def test_request_trailing_bytes_ignored_like_kafka_unless_strict():
    # Captured from librdkafka 2.16 (confluent-kafka): a "brokers only" MetadataRequest v13 whose
    # empty topic list is written as a 4-byte int32 0.  Kafka reads uvarint 0 (null = all
    # topics), then the two bools and the tag section, and ignores the 3 bytes left over.
    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    hdr, req = codec.decode_request(frame)
    assert (hdr.request_api_key, hdr.request_api_version, hdr.client_id) == (3, 13, "rdkafka")
    assert req.topics is None and req.allow_auto_topic_creation is False
    with pytest.raises(ProtocolError, match="3 unexpected trailing"):
        codec.decode_request(frame, strict=True)


def test_snake_case_spells_attributes_as_the_two_rule_rewrite_does():
    """Attribute names: an underscore between a run of capitals and a capitalised word, and
    between a lower-case letter or digit and a capital (the rules written out plainly here)."""
    import random
    import re

    from kafka_tiered_source.protocol.schema import snake_case

    def plainly(name: str) -> str:
        s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
        return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()

    assert [snake_case(n) for n in ("TopicId", "HTTPServer", "V2Api", "ABcDEf", "isrNodes", "ErrorCode")] == \
        ["topic_id", "http_server", "v2_api", "a_bc_d_ef", "isr_nodes", "error_code"]
    rng = random.Random(36)
    for _ in range(3000):
        name = "".join(rng.choice("AbZz09_") for _ in range(rng.randint(1, 8)))
        assert snake_case(name) == plainly(name), name
