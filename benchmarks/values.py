"""Typed values: Protobuf and JSON rows/s, kafka-tiered's batch decoding against the per-record way
in the same process, one thread (so per core).

    python -m benchmarks.values                 # 100,000 records of each
    python -m benchmarks.values --records 20000 --repeat 1

The records are tests/typed_data.py's v3 ``Order`` (nested message, enum, repeated, map,
Timestamp, optional; JSON: nested object, array, nullable boolean), framed as confluent-kafka's
serializers frame them, their schemas in a test registry started here.  Measured:

- ``kafka-tiered``: ``values.decoder.SideDecoder.decode`` on the column of a batch (framing read
  at once, rows grouped by id; Protobuf: the runtime parses each message and the columns are
  built from lists of fields; JSON: pyarrow's JSON reader over the batch's bytes);
- ``baseline``: per record, what a consumer does: Protobuf ``FromString`` +
  ``json_format.MessageToDict``, JSON ``json.loads``; then ``pyarrow.Table.from_pylist`` with the
  same schema;
- ``parse only`` (Protobuf): the runtime's ``FromString`` of every message, nothing else: the floor
  a decoder on this runtime cannot go under.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)

    import typed_data as td

    from kafka_tiered_source.testing.schema_registry import SchemaRegistry

    n = args.records
    with SchemaRegistry() as reg:
        import base64
        cls = td._pb_files(3)
        customer = cls.DESCRIPTOR.file.dependencies[0]
        reg.store.register("customer", {"schema": base64.b64encode(customer.serialized_pb).decode(),
                                        "schemaType": "PROTOBUF"})
        pb_id = reg.store.register("bench_pb-value", {
            "schema": base64.b64encode(cls.DESCRIPTOR.file.serialized_pb).decode(), "schemaType": "PROTOBUF",
            "references": [{"name": customer.name, "subject": "customer", "version": 1}]})["id"]
        js_id = reg.store.register("bench_json-value", {"schema": json.dumps(td.json_schema(3)),
                                                        "schemaType": "JSON"})["id"]
        pb_values = [b"\0" + pb_id.to_bytes(4, "big") + b"\0" + td.pb_record(3, cls, i).SerializeToString()
                     for i in range(n)]
        js_values = [b"\0" + js_id.to_bytes(4, "big") + json.dumps(td.json_record(3, i),
                                                                  separators=(",", ":")).encode() for i in range(n)]
        print(f"{n:,} records each; Protobuf {sum(map(len, pb_values)) / n:.0f} B, JSON "
              f"{sum(map(len, js_values)) / n:.0f} B per value; best of {args.repeat}; one thread")
        results = {fmt: measure(fmt, topic, values, reg.url, cls, args.repeat)
                   for fmt, topic, values in (("protobuf", "bench_pb", pb_values), ("json", "bench_json", js_values))}
        print(f"{'format':<10} {'kafka-tiered':>14} {'baseline':>14} {'ratio':>7} {'parse only':>12}")
        for fmt, (ours, base, floor) in results.items():
            print(f"{fmt:<10} {ours:>12,.0f}/s {base:>12,.0f}/s {ours / base:>6.2f}x "
                  f"{'' if floor is None else f'{floor:,.0f}/s':>12}")
    return 0


def measure(fmt: str, topic: str, values: list, url: str, cls, repeat: int) -> tuple:
    """(kafka-tiered rows/s, baseline rows/s, parse-only rows/s or None)."""
    from google.protobuf import json_format

    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.values.decoder import SideDecoder
    from kafka_tiered_source.values.readers import resolve_readers
    from kafka_tiered_source.values.registry import registry_client
    n = len(values)
    options = resolve_readers(ReadOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": topic,
                                                 "value.format": fmt, "schema.registry.url": url}))
    reader = options.values.readers.value
    column = pa.array(values, pa.binary())
    dec = SideDecoder(reader, fmt, registry_client(options.values))
    typed, _, bad = dec.decode(column)          # warm: the writer schema fetched and resolved
    assert not bad and len(typed) == n
    ours = best(lambda: dec.decode(column), repeat)
    schema = pa.schema([pa.field("value", reader.arrow_type)])
    floor = None
    if fmt == "protobuf":
        def baseline():
            rows = [{"value": _pb_dict(json_format.MessageToDict(cls.FromString(v[6:]), preserving_proto_field_name=True,
                                                                 always_print_fields_with_no_presence=True))}
                    for v in values]
            return pa.Table.from_pylist(rows, schema)
        floor = n / best(lambda: [cls.FromString(v[6:]) for v in values], repeat)
    else:
        def baseline():
            return pa.Table.from_pylist([{"value": json.loads(v[5:])} for v in values], schema)
    return n / ours, n / best(baseline, repeat), floor


def _pb_dict(d: dict) -> dict:
    """MessageToDict's JSON forms as Arrow takes them for the reader's types (int64 as int, map as
    items, the Timestamp as a datetime)."""
    import datetime as dt
    out = dict(d)
    out["amount"] = int(out.get("amount", 0))
    out["counts"] = [(k, int(v)) for k, v in out.get("counts", {}).items()]
    if "created" in out:
        out["created"] = dt.datetime.fromisoformat(out["created"].replace("Z", "+00:00"))
    return out


if __name__ == "__main__":
    sys.exit(main())
