"""The pieces of typed values without a broker or registry: the wire format read a batch at a time,
Protobuf message indexes, JSON Schema and Protobuf types as Arrow and Spark types, JSON read by
name (both paths), Protobuf resolution by field number."""
from __future__ import annotations

import base64
import json

import numpy as np
import pyarrow as pa
import pytest

import typed_data as td

from kafka_tiered_source.errors import SchemaError
from kafka_tiered_source.values import framing, json_schema, protobuf
from kafka_tiered_source.values.columns import spark_type


def test_framing_of_a_batch():
    values = pa.array([b"\x00\x00\x00\x01\x00{}", None, b"\x00\x00", b"\x01\x00\x00\x00\x01x",
                       b"\x00\x7f\xff\xff\xff", b"\x00\xff\xff\xff\xfe"], pa.binary()).slice(0)
    f = framing.split(values)
    assert f.status.tolist() == [framing.OK, framing.NULL, framing.SHORT, framing.BAD_MAGIC, framing.OK, framing.OK]
    assert f.schema_id[[0, 4, 5]].tolist() == [256, 2**31 - 1, -2]
    # a slice starting mid-array reads the same rows
    assert framing.split(values.slice(3)).status.tolist() == [framing.BAD_MAGIC, framing.OK, framing.OK]


def test_protobuf_message_indexes():
    head = b"\x00\x00\x00\x00\x05"
    values = pa.array([head + b"\x00\x08\x01",          # [0], the shorthand
                       head + b"\x02\x02\x08\x01",      # count 1, index 1
                       head + b"\x04\x02\x04\x08",      # count 2: [1, 2]
                       head + b"\x04\x02",              # count 2, one index: cut short
                       head])                           # no byte at all
    skips, indexes, errors = framing.message_indexes(values, np.arange(5, dtype=np.int32))
    assert indexes[:3] == [(0,), (1,), (1, 2)] and skips[:3].tolist() == [6, 7, 8]
    assert errors[:3] == [None] * 3 and errors[3] is not None and errors[4] is not None


def test_json_schema_types():
    schema = {"type": "object", "definitions": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}},
              "properties": {
                  "i": {"type": "integer"}, "n": {"type": ["null", "number"]}, "p": {"$ref": "#/definitions/P"},
                  "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                  "u": {"oneOf": [{"type": "string"}, {"type": "integer"}]}, "e": {"enum": ["a", "b"]},
                  "any": {}, "l": {"type": "array", "items": {"type": "boolean"}}}}
    t = json_schema.arrow_type(schema)
    assert t == pa.struct([("i", pa.int64()), ("n", pa.float64()), ("p", pa.struct([("x", pa.float64())])),
                           ("m", pa.map_(pa.string(), pa.int64())),
                           ("u", pa.struct([("member0", pa.string()), ("member1", pa.int64())])),
                           ("e", pa.string()), ("any", pa.string()), ("l", pa.list_(pa.bool_()))])
    assert not json_schema.fast(t) and json_schema.fast(pa.struct([("i", pa.int64())]))
    assert spark_type(t).startswith("STRUCT<`i`: BIGINT, `n`: DOUBLE, `p`: STRUCT<`x`: DOUBLE>, "
                                    "`m`: MAP<STRING, BIGINT>, `u`: STRUCT<`member0`: STRING, `member1`: BIGINT>")
    row = json_schema.read_one(b'{"i": 1, "n": 2, "m": {"a": 1}, "u": 5, "any": {"z": [1]}, "extra": 1}', t)
    assert row == {"i": 1, "n": 2.0, "p": None, "m": [("a", 1)], "u": {"member1": 5}, "e": None,
                   "any": '{"z":[1]}', "l": None}
    for bad, why in ((b'{"i": "1"}', "i: expected an integer"), (b'{"l": [1]}', "expected a boolean"),
                     (b"[1]", "expected an object"), (b"{", "not JSON"), (b'{"u": true}', "fits no member")):
        with pytest.raises(ValueError, match=why):
            json_schema.read_one(bad, t)
    with pytest.raises(SchemaError, match="recursive"):
        json_schema.arrow_type({"definitions": {"N": {"type": "object", "properties": {
            "next": {"$ref": "#/definitions/N"}}}}, "$ref": "#/definitions/N"})


def test_json_read_many_agrees_with_one_at_a_time_and_gives_up_on_what_it_cannot_read():
    t = json_schema.arrow_type(td.json_schema(3))
    texts = [json.dumps(td.json_record(3, i)).encode() for i in range(50)]
    framed = pa.array([b"\x00\x00\x00\x00\x01" + x for x in texts])
    fast = json_schema.read_many(framed, t)
    assert fast is not None and fast.to_pylist() == [json_schema.read_one(x, t) for x in texts]
    assert json_schema.read_many(pa.array([b"\x00\x00\x00\x00\x01" + b'{"id": "x"}']), t) is None
    # pretty-printed texts (newlines between tokens): read right, or left to the one-at-a-time path
    pretty = [json.dumps(td.json_record(3, i), indent=2).encode() for i in range(3)]
    got = json_schema.read_many(pa.array([b"\x00\x00\x00\x00\x01" + x for x in pretty]), t)
    assert got is None or got.to_pylist() == [json_schema.read_one(x, t) for x in pretty]


def _pb_file(fields: list[tuple[str, int, int]], name: str = "m.proto") -> str:
    from google.protobuf import descriptor_pb2
    fd = descriptor_pb2.FileDescriptorProto(name=name, package="p", syntax="proto3")
    m = fd.message_type.add(name="M")
    for field_name, number, kind in fields:
        m.field.add(name=field_name, number=number, type=kind, label=1)
    fd.message_type.add(name="Other").field.add(name="z", number=1, type=9, label=1)
    return base64.b64encode(fd.SerializeToString()).decode()


def test_protobuf_resolution_by_field_number():
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F
    reader = protobuf.load_file(_pb_file([("a", 1, F.TYPE_INT64), ("b", 2, F.TYPE_STRING)]), {})
    ok = protobuf.load_file(_pb_file([("a", 1, F.TYPE_INT32), ("c", 3, F.TYPE_DOUBLE)]), {})
    broken = protobuf.load_file(_pb_file([("a", 1, F.TYPE_STRING)]), {})
    r = protobuf.message(reader)
    assert protobuf.arrow_type(r) == pa.struct([("a", pa.int64()), ("b", pa.string())])
    protobuf.check_compatible(protobuf.message(ok), r)
    with pytest.raises(SchemaError, match="field a .number 1. is string in the writer schema and int64"):
        protobuf.check_compatible(protobuf.message(broken), r)
    assert protobuf.message(reader, indexes=(1,)).full_name == "p.Other"
    assert protobuf.message(reader, "Other").full_name == "p.Other"
    with pytest.raises(SchemaError, match="out of range"):
        protobuf.message(reader, indexes=(5,))
    with pytest.raises(SchemaError, match="base64 of a FileDescriptorProto"):
        protobuf.load_file("syntax = 'proto3'; message M {}", {})
    # a writer message read by field number into the reader's
    writer_cls = protobuf.message_class(protobuf.message(ok))
    payload = writer_cls(a=7, c=1.5).SerializeToString()
    msg = protobuf.message_class(r).FromString(payload)
    assert protobuf.converter(r)([msg]).to_pylist() == [{"a": 7, "b": ""}]


def test_the_subject_of_each_strategy():
    from kafka_tiered_source.errors import ConfigError
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.values.readers import subjects
    base = {"kafka.bootstrap.servers": "b:1", "subscribe": "a,b", "schema.registry.url": "http://r:1"}

    def side(**kw):
        return ReadOptions.parse({**base, "key.format": "avro", **kw}).values.side("key")
    assert subjects(side(), ("a", "b")) == ["a-key", "b-key"]
    record = {"key.schema.record.name": "shop.Key"}
    assert subjects(side(**{"key.subject.name.strategy": "RecordNameStrategy"}, **record), ("a", "b")) == ["shop.Key"]
    java = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
    assert subjects(side(**{"key.subject.name.strategy": java}, **record), ("a",)) == ["a-shop.Key"]
    assert subjects(side(**{"key.schema.subject": "keys"}), None) == ["keys"]
    with pytest.raises(ConfigError, match="subscribePattern"):
        subjects(side(), None)


def _kafka_batch(values: list) -> pa.RecordBatch:
    from kafka_tiered_source.records.schema import kafka_schema
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [pa.nulls(n, pa.binary()), pa.array(values, pa.binary()), pa.array(["t"] * n), pa.array([0] * n, pa.int32()),
         pa.array(range(n), pa.int64()), pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32())],
        schema=kafka_schema(False))


def test_a_protobuf_writer_whose_field_cannot_be_read_is_a_bad_record():
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    from kafka_tiered_source.errors import ValueDecodeError
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.testing import SchemaRegistry
    from kafka_tiered_source.values.decoder import BatchDecoder
    from kafka_tiered_source.values.readers import resolve_readers
    reader_text = _pb_file([("a", 1, F.TYPE_INT64), ("b", 2, F.TYPE_STRING)])
    with SchemaRegistry() as reg:
        good = reg.store.register("t-value", {"schema": _pb_file([("a", 1, F.TYPE_INT32)]),
                                              "schemaType": "PROTOBUF"})["id"]
        reg.store.config["t-value"] = "NONE"
        broken = reg.store.register("t-value", {"schema": _pb_file([("a", 1, F.TYPE_STRING)]),
                                                "schemaType": "PROTOBUF"})["id"]
        writer = protobuf.message_class(protobuf.message(protobuf.load_file(_pb_file([("a", 1, F.TYPE_INT32)]), {})))
        payload = writer(a=5).SerializeToString()
        values = [b"\0" + good.to_bytes(4, "big") + b"\0" + payload,
                  b"\0" + broken.to_bytes(4, "big") + b"\0" + payload,
                  b"\0" + good.to_bytes(4, "big") + b"\x02\x02" + payload]    # message [1]: p.Other
        base = {"kafka.bootstrap.servers": "b:1", "subscribe": "t", "value.format": "protobuf",
                "schema.registry.url": reg.url, "value.schema": reader_text}
        with pytest.raises(ValueDecodeError) as info:
            BatchDecoder(resolve_readers(ReadOptions.parse(base)).values, False)(_kafka_batch(values))
        assert info.value.offset == 1 and info.value.schema_id == broken
        assert "field a (number 1) is string in the writer schema" in str(info.value)
        config = resolve_readers(ReadOptions.parse({**base, "mode": "PERMISSIVE"})).values
        out = BatchDecoder(config, False)(_kafka_batch(values))
        assert out.column("value").to_pylist() == [{"a": 5, "b": ""}, None, None]
        assert out.column("corruptValue").to_pylist() == [None, values[1], values[2]]
