"""Topics written with confluent-kafka's own serializers through its SchemaRegistryClient, across
three schema versions, and what its deserializers return for them mapped to columns.

The three versions of each format's ``Order``: v1 ``id, name, amount``; v2 adds ``currency`` (a
default: proto3's "", JSON Schema's ``default``, Avro's ``"EUR"``); v3 removes ``name``, promotes
``amount`` (Protobuf int32 -> int64, JSON integer -> number, Avro int -> long) and adds nested and
repeated fields.  Records are produced in that order, so a read spans every version; the reader
schema is the subject's latest (v3).

Expected values come from how the data was made: confluent-kafka's ProtobufDeserializer (with the
v3 message class), JSONDeserializer and AvroDeserializer (with the v3 schema) read each record's
bytes, and their results are mapped to the reader schema's columns here (a field a message does
not have is null where the field has presence, its default otherwise; a JSON property the object
lacks is null; Avro gives the resolved record).
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

from broker_fixtures import LIBRDKAFKA_QUIET

N_PER_VERSION = 40
TOPIC_PB = "orders_pb"
TOPIC_JSON = "orders_json"
TOPIC_BAD = "orders_bad"
TOPIC_AVRO = "orders_avro"


# -- Protobuf: descriptors built here, as protoc would (no protoc on the machine) -------------------
def _pb_files(version: int):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
    F = descriptor_pb2.FieldDescriptorProto
    customer = descriptor_pb2.FileDescriptorProto(name="shop/customer.proto", package="shop", syntax="proto3")
    tier = customer.enum_type.add(name="Tier")
    tier.value.add(name="BASIC", number=0)
    tier.value.add(name="GOLD", number=1)
    c = customer.message_type.add(name="Customer")
    c.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="name")
    c.field.add(name="tier", number=2, type=F.TYPE_ENUM, type_name=".shop.Tier", label=F.LABEL_OPTIONAL,
                json_name="tier")
    order = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    order.dependency.extend(["shop/customer.proto", "google/protobuf/timestamp.proto"])
    m = order.message_type.add(name="Order")

    def add(name, number, type_, **kw):
        m.field.add(name=name, number=number, type=type_, label=kw.pop("label", F.LABEL_OPTIONAL),
                    json_name=name, **kw)
    add("id", 1, F.TYPE_INT32)
    if version < 3:
        add("name", 2, F.TYPE_STRING)
    add("amount", 3, F.TYPE_INT32 if version < 3 else F.TYPE_INT64)
    if version >= 2:
        add("currency", 4, F.TYPE_STRING)
    if version >= 3:
        add("customer", 5, F.TYPE_MESSAGE, type_name=".shop.Customer")
        add("tags", 6, F.TYPE_STRING, label=F.LABEL_REPEATED)
        add("created", 7, F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
        entry = m.nested_type.add(name="CountsEntry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="key")
        entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, json_name="value")
        add("counts", 8, F.TYPE_MESSAGE, type_name=".shop.Order.CountsEntry", label=F.LABEL_REPEATED)
        add("note", 9, F.TYPE_STRING, proto3_optional=True, oneof_index=0)
        m.oneof_decl.add(name="_note")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(customer)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def pb_record(version: int, cls, i: int):
    msg = cls(id=i, amount=100 + i)
    if version < 3:
        msg.name = f"n{i}"
    if version >= 2 and i % 3:
        msg.currency = "USD"
    if version >= 3:
        msg.customer.name = f"c{i}"
        msg.customer.tier = i % 2
        msg.tags.extend([f"t{j}" for j in range(i % 3)])
        if i % 4:
            msg.created.FromDatetime(dt.datetime(2026, 11, 1, 12, 0, i % 60, 1000 * (i % 1000), tzinfo=dt.timezone.utc))
        msg.counts.update({f"k{j}": j * i for j in range(i % 3)})
        if i % 5 == 0:
            msg.note = f"note {i}"
    return msg


def pb_row(msg) -> dict:
    """A v3 message (ProtobufDeserializer's answer) as the value column's dict."""
    created = None
    if msg.HasField("created"):
        created = msg.created.ToDatetime(tzinfo=dt.timezone.utc)
    return {"id": msg.id, "amount": msg.amount, "currency": msg.currency,
            "customer": ({"name": msg.customer.name, "tier": ["BASIC", "GOLD"][msg.customer.tier]}
                         if msg.HasField("customer") else None),
            "tags": list(msg.tags), "created": created, "counts": sorted(msg.counts.items()),
            "note": msg.note if msg.HasField("note") else None}


# -- JSON Schema ------------------------------------------------------------------------------------
def json_schema(version: int) -> dict:
    props: dict = {"id": {"type": "integer"}}
    if version < 3:
        props["name"] = {"type": "string"}
    props["amount"] = {"type": "integer" if version < 3 else "number"}
    if version >= 2:
        props["currency"] = {"type": "string", "default": "EUR"}
    if version >= 3:
        props["customer"] = {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Customer"}]}
        props["tags"] = {"type": "array", "items": {"type": "string"}}
        props["ok"] = {"type": ["boolean", "null"]}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": props, "required": ["id"]}
    if version >= 3:
        schema["definitions"] = {"Customer": {"type": "object", "properties": {
            "name": {"type": "string"}, "tier": {"type": "string", "enum": ["BASIC", "GOLD"]}}}}
    return schema


KEY_SCHEMA = {"title": "OrderKey", "type": "object", "properties": {"id": {"type": "integer"}}}


def json_record(version: int, i: int) -> dict:
    rec: dict = {"id": i, "amount": 100 + i if version < 3 else 100.5 + i}
    if version < 3:
        rec["name"] = f"n{i}"
    if version >= 2 and i % 3:
        rec["currency"] = "USD"
    if version >= 3:
        rec["customer"] = None if i % 4 == 0 else {"name": f"c{i}", "tier": "GOLD" if i % 2 else "BASIC"}
        rec["tags"] = [f"t{j}" for j in range(i % 3)]
        if i % 2:
            rec["ok"] = bool(i % 3)
    return rec


def json_row(obj: dict) -> dict:
    """JSONDeserializer's dict as the v3 value column's dict (by name; number columns are floats)."""
    amount = obj.get("amount")
    customer = obj.get("customer")
    return {"id": obj.get("id"), "amount": None if amount is None else float(amount),
            "currency": obj.get("currency"),
            "customer": None if customer is None else {"name": customer.get("name"), "tier": customer.get("tier")},
            "tags": obj.get("tags"), "ok": obj.get("ok")}


# -- Avro ------------------------------------------------------------------------------------------
def avro_schema(version: int) -> dict:
    fields: list = [{"name": "id", "type": "int"}]
    if version < 3:
        fields.append({"name": "name", "type": "string"})
    fields.append({"name": "amount", "type": "int" if version < 3 else "long"})
    if version >= 2:
        fields.append({"name": "currency", "type": "string", "default": "EUR"})
    if version >= 3:
        fields += [
            # new fields have defaults: the registry holds the subject BACKWARD compatible
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
             "default": "\u0001"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 1000},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 3},
            {"name": "ref", "type": {"type": "string", "logicalType": "uuid"},
             "default": "00000000-0000-0000-0000-000000000000"},
            {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["BASIC", "GOLD"]},
             "default": "BASIC"},
            {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["none"]},
            {"name": "counts", "type": {"type": "map", "values": "long"}, "default": {"d": 1}},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "customer", "type": ["null", {"type": "record", "name": "Customer", "fields": [
                {"name": "name", "type": "string"}]}], "default": None}]
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


def avro_record(version: int, i: int) -> dict:
    import decimal
    import uuid
    rec: dict = {"id": i, "amount": 100 + i if version < 3 else (1 << 40) + i}
    if version < 3:
        rec["name"] = f"n{i}"
    if version >= 2:
        rec["currency"] = "USD" if i % 3 else "EUR"
    if version >= 3:
        rec.update(price=decimal.Decimal(f"{i}.{i % 100:02d}"),
                   at=dt.datetime(2026, 11, 1, 12, 0, i % 60, tzinfo=dt.timezone.utc),
                   day=dt.date(2026, 11, 1 + i % 28), ref=str(uuid.UUID(int=i)), tier="GOLD" if i % 2 else "BASIC",
                   tags=[f"t{j}" for j in range(i % 3)], counts={f"k{j}": j * i for j in range(i % 3)},
                   note=None if i % 2 else f"note {i}", customer=None if i % 4 == 0 else {"name": f"c{i}"})
    return rec


def avro_row(obj: dict) -> dict:
    """AvroDeserializer's record (resolved to v3) as the value column's dict."""
    import decimal
    row = dict(obj)
    row["ref"] = str(row["ref"])
    # fastavro hands a reader field's default back in its underlying type's JSON form, without its
    # logical type (a datum it decodes gets it): the columns hold the logical values either way
    if isinstance(row["price"], str):
        row["price"] = decimal.Decimal(int.from_bytes(row["price"].encode("latin-1"), "big", signed=True)).scaleb(-2)
    if isinstance(row["at"], int):
        row["at"] = dt.datetime.fromtimestamp(row["at"] / 1000, dt.timezone.utc)
    if isinstance(row["day"], int):
        row["day"] = dt.date(1970, 1, 1) + dt.timedelta(days=row["day"])
    row["counts"] = sorted(row["counts"].items())
    return row


@dataclass
class Produced:
    """What was produced to a topic: the raw (key, value) bytes in offset order, and the
    deserializers' answers mapped to rows."""
    raw: list = field(default_factory=list)
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    schema_ids: list = field(default_factory=list)


def _produce(bootstrap: str, topic: str, pairs: list) -> None:
    import confluent_kafka as ck
    errors: list = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 2048, **LIBRDKAFKA_QUIET})
    for k, v in pairs:
        p.produce(topic, key=k, value=v, partition=0, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0 and not errors, errors


def produce_typed(bootstrap: str, registry_url: str) -> dict[str, Produced]:
    """Both topics, written version by version with confluent-kafka's serializers; their
    expected rows from its deserializers."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    out = {TOPIC_PB: Produced(), TOPIC_JSON: Produced()}
    pb_pairs, json_pairs = [], []
    vctx = lambda t: SerializationContext(t, MessageField.VALUE)  # noqa: E731
    kctx = lambda t: SerializationContext(t, MessageField.KEY)    # noqa: E731
    key_ser = JSONSerializer(json.dumps(KEY_SCHEMA), client)
    for version in (1, 2, 3):
        cls = _pb_files(version)
        pb_ser = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        js_ser = JSONSerializer(json.dumps(json_schema(version)), client)
        for j in range(N_PER_VERSION):
            i = (version - 1) * N_PER_VERSION + j
            pb_pairs.append((f"k{i}".encode(), pb_ser(pb_record(version, cls, i), vctx(TOPIC_PB))))
            value = None if i == 7 else js_ser(json_record(version, i), vctx(TOPIC_JSON))   # one null value
            json_pairs.append((key_ser({"id": i}, kctx(TOPIC_JSON)), value))
    _produce(bootstrap, TOPIC_PB, pb_pairs)
    _produce(bootstrap, TOPIC_JSON, json_pairs)

    reader_cls = _pb_files(3)
    pb_de = ProtobufDeserializer(reader_cls, {"use.deprecated.format": False}, client)
    js_de = JSONDeserializer(json.dumps(json_schema(3)), schema_registry_client=client)
    key_de = JSONDeserializer(json.dumps(KEY_SCHEMA), schema_registry_client=client)
    for k, v in pb_pairs:
        out[TOPIC_PB].raw.append((k, v))
        out[TOPIC_PB].keys.append(k.decode())
        out[TOPIC_PB].values.append(pb_row(pb_de(v, vctx(TOPIC_PB))))
        out[TOPIC_PB].schema_ids.append(int.from_bytes(v[1:5], "big"))
    for k, v in json_pairs:
        out[TOPIC_JSON].raw.append((k, v))
        out[TOPIC_JSON].keys.append(key_de(k, kctx(TOPIC_JSON)))
        out[TOPIC_JSON].values.append(None if v is None else json_row(js_de(v, vctx(TOPIC_JSON))))
        out[TOPIC_JSON].schema_ids.append(None if v is None else int.from_bytes(v[1:5], "big"))
    return out


def produce_avro(bootstrap: str, registry_url: str) -> Produced:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    ctx = SerializationContext(TOPIC_AVRO, MessageField.VALUE)
    pairs = []
    for version in (1, 2, 3):
        ser = AvroSerializer(client, json.dumps(avro_schema(version)))
        for j in range(N_PER_VERSION):
            i = (version - 1) * N_PER_VERSION + j
            pairs.append((f"k{i}".encode(), ser(avro_record(version, i), ctx)))
    _produce(bootstrap, TOPIC_AVRO, pairs)
    de = AvroDeserializer(client, json.dumps(avro_schema(3)))
    out = Produced()
    for k, v in pairs:
        out.raw.append((k, v))
        out.keys.append(k.decode())
        out.values.append(avro_row(de(v, ctx)))
        out.schema_ids.append(int.from_bytes(v[1:5], "big"))
    return out


def produce_bad(bootstrap: str, good_value: bytes) -> list[tuple[bytes | None, str]]:
    """A topic of JSON values, some that cannot be decoded: (value, what is wrong) in offset order."""
    bad = [(good_value, ""), (b"\x01" + good_value[1:], "magic"), (b"\x00\x00", "short"),
           (b"\x00\x00\x00\x27\x0f{}", "unknown id"), (good_value[:5] + b"{not json", "malformed"),
           (good_value, "")]
    _produce(bootstrap, TOPIC_BAD, [(None, v) for v, _ in bad])
    return bad
