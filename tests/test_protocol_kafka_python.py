"""Cross-check the codec against kafka-python 3.x (an independent implementation generated from
Kafka's JSON schemas): for every message and version both know, random values give identical
bytes both ways, and each side decodes the other's bytes to equal values."""
import random
import uuid

import pytest

from kafka.protocol.consumer.fetch import FetchRequest as KFetchRequest, FetchResponse as KFetchResponse
from kafka.protocol.consumer.group import (
    OffsetCommitRequest as KOffsetCommitRequest, OffsetCommitResponse as KOffsetCommitResponse,
    OffsetFetchRequest as KOffsetFetchRequest, OffsetFetchResponse as KOffsetFetchResponse)
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest as KListOffsetsRequest, ListOffsetsResponse as KListOffsetsResponse)
from kafka.protocol.metadata.api_versions import (
    ApiVersionsRequest as KApiVersionsRequest, ApiVersionsResponse as KApiVersionsResponse)
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest as KFindCoordinatorRequest, FindCoordinatorResponse as KFindCoordinatorResponse)
from kafka.protocol.metadata.metadata import MetadataRequest as KMetadataRequest, MetadataResponse as KMetadataResponse
from kafka.protocol.producer.produce import ProduceRequest as KProduceRequest, ProduceResponse as KProduceResponse
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest as KAddPartitionsToTxnRequest, AddPartitionsToTxnResponse as KAddPartitionsToTxnResponse,
    EndTxnRequest as KEndTxnRequest, EndTxnResponse as KEndTxnResponse,
    InitProducerIdRequest as KInitProducerIdRequest, InitProducerIdResponse as KInitProducerIdResponse)
from kafka.protocol.sasl import (  # noqa: F401  (module exists in 3.x; classes below)
    SaslAuthenticateRequest as KSaslAuthenticateRequest, SaslAuthenticateResponse as KSaslAuthenticateResponse,
    SaslHandshakeRequest as KSaslHandshakeRequest, SaslHandshakeResponse as KSaslHandshakeResponse)

from kafka_tiered_source.protocol import codec, kip1248, messages as m
from kafka_tiered_source.protocol.random_values import random_message

PAIRS = [
    (m.ApiVersionsRequest, KApiVersionsRequest), (m.ApiVersionsResponse, KApiVersionsResponse),
    (m.MetadataRequest, KMetadataRequest), (m.MetadataResponse, KMetadataResponse),
    (m.ListOffsetsRequest, KListOffsetsRequest), (m.ListOffsetsResponse, KListOffsetsResponse),
    (m.FetchRequest, KFetchRequest), (m.FetchResponse, KFetchResponse),
    (m.ProduceRequest, KProduceRequest), (m.ProduceResponse, KProduceResponse),
    (m.SaslHandshakeRequest, KSaslHandshakeRequest), (m.SaslHandshakeResponse, KSaslHandshakeResponse),
    (m.SaslAuthenticateRequest, KSaslAuthenticateRequest), (m.SaslAuthenticateResponse, KSaslAuthenticateResponse),
    (m.FindCoordinatorRequest, KFindCoordinatorRequest), (m.FindCoordinatorResponse, KFindCoordinatorResponse),
    (m.InitProducerIdRequest, KInitProducerIdRequest), (m.InitProducerIdResponse, KInitProducerIdResponse),
    (m.AddPartitionsToTxnRequest, KAddPartitionsToTxnRequest), (m.AddPartitionsToTxnResponse, KAddPartitionsToTxnResponse),
    (m.EndTxnRequest, KEndTxnRequest), (m.EndTxnResponse, KEndTxnResponse),
    (m.OffsetFetchRequest, KOffsetFetchRequest), (m.OffsetFetchResponse, KOffsetFetchResponse),
    (m.OffsetCommitRequest, KOffsetCommitRequest), (m.OffsetCommitResponse, KOffsetCommitResponse),
]
CASES = [(ours, theirs, v) for ours, theirs in PAIRS
         for v in range(ours.VALID_VERSIONS.lo, min(ours.VALID_VERSIONS.hi, theirs.max_version) + 1)]
ZERO = bytes(16)
# kafka-python patches a few JSON names; map ours -> theirs.
KP_NAMES = {"topic_authorized_operations": "authorized_operations",
            "cluster_authorized_operations": "authorized_operations"}


def _kp_name(attr):
    return KP_NAMES.get(attr, attr)


def _bits_to_set(value):
    # kafka-python reads the authorized-operations int32 as a set of bit numbers ({31} -> None)
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def _set_to_bits(bits):
    value = sum(1 << i for i in ({31} if bits is None else bits))
    return value - (1 << 32) if value >= 1 << 31 else value


def _kp_value(f, kp_field, value, v, flex):
    if value is None:
        return None
    t = f.elem_type
    if t == "uuid":
        conv = (lambda x: None if x == ZERO else uuid.UUID(bytes=x))
    elif f.attr in KP_NAMES:
        conv = _bits_to_set
    elif f.struct_class is not None:
        conv = (lambda x: _to_kp(kp_field.data_class, x, v, flex))
    else:
        conv = (lambda x: x)
    return [conv(x) for x in value] if f.is_array else conv(value)


def _to_kp(kp_cls, obj, v, flex, top=False):
    kw = {}
    for f in obj.FIELDS:
        if not f.in_version(v):
            continue
        val = getattr(obj, f.attr)
        if f.is_tagged(v) and (not flex or f.is_default(val)):
            continue
        kw[_kp_name(f.attr)] = _kp_value(f, kp_cls.fields[_kp_name(f.attr)], val, v, flex)
    return kp_cls[v](**kw) if top else kp_cls(**kw)


def _from_kp(cls, kp_obj, v):
    kw = {}
    for f in cls.FIELDS:
        if not f.in_version(v) or _kp_name(f.attr) not in type(kp_obj).fields:
            continue  # e.g. the KIP-1248 tags, which kafka-python does not know
        val = getattr(kp_obj, _kp_name(f.attr))
        if val is None and f.attr in KP_NAMES:
            val = -(1 << 31)
        elif val is None and not f.is_nullable(v):
            # kafka-python leaves absent tagged structs as None and reads the zero uuid as None
            val = f.default()
        elif val is not None:
            if f.elem_type == "uuid":
                conv = (lambda x: ZERO if x is None else x.bytes)
            elif f.struct_class is not None:
                conv = (lambda x, c=f.struct_class: _from_kp(c, x, v))
            elif f.attr in KP_NAMES:
                conv = _set_to_bits
            elif f.elem_type in ("bytes", "records"):
                conv = bytes
            else:
                conv = (lambda x: x)
            val = [conv(x) for x in val] if f.is_array else conv(val)
        kw[f.attr] = val
    return cls(**kw)


def _random(ours, v, rng):
    msg = random_message(ours, v, rng)
    if ours is m.ApiVersionsResponse:
        # kafka-python reads any ApiVersions response with an error as v0 (the broker's
        # UNSUPPORTED_VERSION fallback); keep the error code 0 so both read the declared version.
        msg.error_code = 0
    # kafka-python does not know the KIP-1248 tags (tested separately below): keep them default
    for obj in _walk(msg):
        for f in obj.FIELDS:
            if f.tag is not None and f.tag >= 100:
                setattr(obj, f.attr, f.default())
    return msg


def _walk(obj):
    yield obj
    for f in obj.FIELDS:
        if f.struct_class is not None:
            val = getattr(obj, f.attr)
            for x in (val or []) if f.is_array else ([val] if val is not None else []):
                yield from _walk(x)


@pytest.mark.parametrize("ours,theirs,version", CASES, ids=[f"{o.NAME}-v{v}" for o, _, v in CASES])
def test_same_bytes_both_ways(ours, theirs, version):
    rng = random.Random(f"kp-{ours.NAME}-{version}")
    flex = ours.is_flexible(version)
    for _ in range(6):
        msg = _random(ours, version, rng)
        data = msg.encode(version)
        kp_msg = _to_kp(theirs, msg, version, flex, top=True)
        kp_data = bytes(kp_msg.encode(version=version))
        assert kp_data == data
        # each side decodes the other's bytes to equal values
        assert ours.decode(kp_data, version) == msg
        theirs_back = theirs.decode(data, version=version)
        assert _from_kp(ours, theirs_back, version) == msg


def test_kafka_python_sees_kip1248_request_tags_as_unknown_and_reads_the_rest():
    # What a real broker does with our tags: skips them and reads an ordinary fetch.
    req = m.FetchRequest(max_wait_ms=500, min_bytes=1, isolation_level=1, topics=[m.FetchRequest.FetchTopic(
        topic_id=b"\x05" * 16, partitions=[m.FetchRequest.FetchPartition(partition=2, fetch_offset=77, partition_max_bytes=1 << 20)])],
        remote_log_segment_location_requested=True,
        supported_storage_format_versions=[kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1])
    for v in (12, 17, 18):
        kp = KFetchRequest.decode(req.encode(v), version=v)
        assert kp.isolation_level == 1 and kp.topics[0].partitions[0].fetch_offset == 77
        assert set(kp.unknown_tags) == {"_100", "_101"}
        plain = req.copy()
        plain.remote_log_segment_location_requested = False
        plain.supported_storage_format_versions = []
        assert _from_kp(m.FetchRequest, kp, v) == m.FetchRequest.decode(plain.encode(v), v)


def test_kafka_python_response_without_kip1248_fields_reads_as_no_location():
    kp = KFetchResponse[17](responses=[KFetchResponse.FetchableTopicResponse(
        topic_id=uuid.UUID(bytes=b"\x01" * 16), partitions=[KFetchResponse.FetchableTopicResponse.PartitionData(
            partition_index=0, high_watermark=5, records=b"xyz")])])
    frame = bytes(kp.encode(version=17))
    ours = m.FetchResponse.decode(frame, 17)
    part = ours.responses[0].partitions[0]
    assert not kip1248.has_remote_location(part) and bytes(part.records) == b"xyz"


def test_framed_request_with_header_matches_kafka_python():
    msg = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="orders")], allow_auto_topic_creation=False)
    for v in (1, 8, 9, 12):
        kp = _to_kp(KMetadataRequest, msg, v, m.MetadataRequest.is_flexible(v), top=True)
        kp.with_header(correlation_id=11, client_id="kt")
        assert bytes(kp.encode(header=True, framed=True)) == codec.encode_request(msg, v, 11, "kt")


def test_framed_response_with_header_matches_kafka_python():
    resp = m.ApiVersionsResponse(api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=1, min_version=4, max_version=18)])
    for v in (0, 3, 4):
        kp = _to_kp(KApiVersionsResponse, resp, v, m.ApiVersionsResponse.is_flexible(v), top=True)
        kp.with_header(correlation_id=99)
        assert bytes(kp.encode(header=True, framed=True)) == codec.encode_response(resp, v, 99)
