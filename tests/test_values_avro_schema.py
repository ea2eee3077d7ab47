"""values.avro's schemas: parsing (names, namespaces, references, what is refused), the Parsing
Canonical Form (fastavro's), the Arrow mapping (the interface's table, written out here), and
resolution errors that name the field path and both types.  Nothing here decodes data."""
from __future__ import annotations

import json
import pickle

import fastavro
import pyarrow as pa
import pytest

from kafka_tiered_source.values.avro import AvroError, AvroResolutionError, parse_schema, resolve
from test_values_avro import ALL_TYPES, LOGICALS, V1, V2, _names, arrow_of, schema


def test_canonical_form_is_fastavros():
    for s in (ALL_TYPES, LOGICALS, V1, V2, "int", ["null", {"type": "string", "logicalType": "uuid"}],
              {"type": "record", "name": "a.full.Name", "namespace": "ignored", "doc": "d",
               "fields": [{"name": "e", "type": {"type": "enum", "name": "U", "symbols": ["d"]}, "doc": "x"}]}):
        assert parse_schema(json.dumps(s)).canonical == fastavro.schema.to_parsing_canonical_form(s)


def test_names_namespaces_references_and_equality():
    addr = parse_schema(json.dumps({"type": "record", "name": "Address", "namespace": "com.x", "fields": [
        {"name": "zip", "type": {"type": "fixed", "name": "Zip", "size": 5}}]}))
    order = parse_schema(json.dumps({"type": "record", "name": "Order", "namespace": "com.x", "fields": [
        {"name": "ship", "type": "Address"}, {"name": "bill", "type": "com.x.Address"},
        {"name": "zip", "type": "Zip"}]}), named={"com.x.Address": addr})
    assert order.fullname == "com.x.Order" and addr.fullname == "com.x.Address"
    assert order.arrow_type.field("zip").type == pa.binary()
    assert '"name":"com.x.Address"' in order.canonical
    same = parse_schema(json.dumps({"type": "record", "name": "com.x.Order", "doc": "docs differ", "fields": [
        {"name": "ship", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "zip", "type": {"type": "fixed", "name": "Zip", "size": 5}}]}},
        {"name": "bill", "type": "Address"}, {"name": "zip", "type": "com.x.Zip"}]}))
    assert same == order and hash(same) == hash(order) and same.canonical == order.canonical
    assert pickle.loads(pickle.dumps(order)) == order
    res = pickle.loads(pickle.dumps(resolve(order, same)))
    assert res.reader == same and res.writer == order
    again = parse_schema(json.dumps({"type": "record", "name": "com.x.Address", "fields": [
        {"name": "zip", "type": {"type": "fixed", "name": "Zip", "size": 5}}]}))
    wrapper = parse_schema('{"type": "array", "items": "com.x.Order"}', named={"com.x.Address": again, "com.x.Order": order})
    assert wrapper.arrow_type == pa.list_(order.arrow_type)     # Address parsed twice, the same
    other = parse_schema('{"type": "record", "name": "com.x.Address", "fields": []}')
    with pytest.raises(AvroError, match="defined differently"):
        parse_schema('"com.x.Order"', named={"com.x.Address": other, "com.x.Order": order})
    assert parse_schema('"string"').fullname is None and parse_schema('"string"').type == "string"
    assert parse_schema(json.dumps({"type": "long", "logicalType": "timestamp-millis"})) != parse_schema('"long"')


@pytest.mark.parametrize("text,match", [
    ("{", "not valid JSON"), ('"Nope"', "unknown type 'Nope'"), ("[[\"int\"]]", "immediately contain"),
    ('["int", "int"]', "two branches of type int"),
    ('{"type": "record", "name": "1x", "fields": []}', "invalid record name"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}',
     "two fields named 'a'"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "enum", "name": "R", "symbols": []}}]}',
     "defined twice"),
    ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}', "not one of its symbols"),
    ('{"type": "fixed", "name": "F", "size": -1}', "non-negative"),
    ('{"type": "record", "name": "int", "fields": []}', "primitive type name"),
    ('{"type": {"type": "int"}}', "without a string 'type'"),
    ("[" * 5000 + "]" * 5000, "nests too deeply|deeper than"),
    (json.dumps(json.loads('{"type": "array", "items": X}'.replace("X", '{"type": "array", "items": X}' * 1)
                           .replace("X", '"int"'))), None),
])
def test_bad_schemas_are_refused_by_name(text, match):
    if match is None:
        parse_schema(text)
        return
    with pytest.raises(AvroError, match=match):
        parse_schema(text)


def test_depth_is_bounded_and_recursive_readers_have_no_column_type():
    deep = '"int"'
    for _ in range(150):
        deep = '{"type": "array", "items": %s}' % deep
    with pytest.raises(AvroError, match="deeper than 100"):
        parse_schema(deep)
    node = parse_schema(json.dumps({"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}))
    assert "Node" in node.canonical
    with pytest.raises(AvroError, match="refers to itself"):
        _ = node.arrow_type
    with pytest.raises(AvroError, match="refers to itself"):
        resolve(node, node)




def test_the_arrow_mapping_is_spark_avros():
    got = schema(ALL_TYPES).arrow_type
    assert got == arrow_of(ALL_TYPES, _names(ALL_TYPES))
    assert got.field("multi").type == pa.struct([("member0", pa.int32()), ("member1", pa.string()),
                                                  ("member2", got.field("nested").type)])
    assert all(f.nullable for f in got)
    assert schema(["null"]).arrow_type == pa.null()
    assert schema({"type": "bytes", "logicalType": "decimal", "precision": 39}).arrow_type == pa.binary()
    assert schema({"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 5}).arrow_type == pa.binary()
    assert schema({"type": "fixed", "name": "F", "size": 2, "logicalType": "decimal",
                   "precision": 5}).arrow_type == pa.binary()     # 2 bytes hold 4 digits
    assert schema({"type": "fixed", "name": "U", "size": 15, "logicalType": "uuid"}).arrow_type == pa.binary()



@pytest.mark.parametrize("w,r,match", [
    (V1, {**V2, "fields": V2["fields"] + [{"name": "must", "type": "int"}]},
     r"shop.Customer.must: the reader's field \(int\) is missing from the writer's record shop.User and has no default"),
    ({"type": "record", "name": "A", "fields": [{"name": "x", "type": "long"}]},
     {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
     r"A.x: writer long cannot be read as reader int"),
    ({"type": "record", "name": "A", "fields": []}, {"type": "record", "name": "B", "fields": []},
     r"writer record A cannot be read as reader record B"),
    ({"type": "fixed", "name": "F", "size": 2}, {"type": "fixed", "name": "F", "size": 3}, "fixed F"),
    ("string", ["null", "int"], "no branch of the reader's union matches"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
     {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 3}, "do not match"),
    ({"type": "record", "name": "A", "fields": []},
     {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int", "default": "one"}]},
     r"A.x: the reader's default 'one' is not a valid int"),
])
def test_resolution_errors_name_the_field_and_both_types(w, r, match):
    with pytest.raises(AvroResolutionError, match=match):
        resolve(schema(w), schema(r))
