"""Typed values (issue 37): topics written with confluent-kafka's serializers through its
SchemaRegistryClient, against the test registry (testing/schema_registry.py) the embedded broker
starts, read back as columns by scan(), Spark and export, equal to what confluent-kafka's
deserializers return (tests/typed_data.py); bad framing, unknown ids, malformed payloads and a
registry that is down under FAILFAST and PERMISSIVE; the registry client's one fetch per id."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import typed_data as td

import kafka_tiered_source as kts
from kafka_tiered_source.errors import ConfigError, SchemaRegistryUnavailableError
from kafka_tiered_source.testing import EmbeddedCluster


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    base = tmp_path_factory.mktemp("typed")
    remote = base / "remote"
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{remote}", segment_bytes=4096,
                         schema_registry_port=0) as c:
        for topic in (td.TOPIC_PB, td.TOPIC_JSON, td.TOPIC_BAD, td.TOPIC_AVRO):
            c.create_topic(topic)
        produced = td.produce_typed(c.bootstrap_servers, c.schema_registry_url)
        produced[td.TOPIC_AVRO] = td.produce_avro(c.bootstrap_servers, c.schema_registry_url)
        bad = td.produce_bad(c.bootstrap_servers, produced[td.TOPIC_JSON].raw[0][1])
        c.tier()
        c.remote_dir = str(remote)
        c.produced = produced
        c.bad = bad
        yield c


def opts(c, topic: str, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": topic,
            "remote.storage.uri": f"file://{c.remote_dir}", "schema.registry.url": c.schema_registry_url,
            "schema.registry.retries.wait.ms": "10", **extra}


def _sorted_counts(rows):
    for r in rows:
        if r["value"] is not None and "counts" in r["value"]:
            r["value"]["counts"] = sorted(r["value"]["counts"])
    return rows


def test_scan_reads_protobuf_across_three_versions_as_the_deserializer_does(typed):
    c = typed
    table = kts.scan(opts(c, td.TOPIC_PB, **{"value.format": "protobuf", "key.format": "string"})).read_all()
    want = c.produced[td.TOPIC_PB]
    rows = _sorted_counts(table.to_pylist())
    assert [r["offset"] for r in rows] == list(range(len(want.values)))
    assert [r["key"] for r in rows] == want.keys
    assert [r["value"] for r in rows] == want.values
    assert [r["valueSchemaId"] for r in rows] == want.schema_ids
    assert len(set(want.schema_ids)) == 3          # three writer schemas in one read
    assert "keySchemaId" not in table.schema.names and "corruptValue" not in table.schema.names
    # the column's type is the reader schema's (v3): nested message, enum, repeated, map, Timestamp
    value = table.schema.field("value").type
    assert value.field("amount").type == pa.int64() and value.field("customer").type.field("tier").type == pa.string()
    assert value.field("created").type == pa.timestamp("us", tz="UTC")
    assert pa.types.is_map(value.field("counts").type)
    assert kts.last_read_stats().total().remote_requests > 0     # tiered segments were read


def test_scan_reads_avro_across_three_versions_as_the_deserializer_does(typed):
    c = typed
    table = kts.scan(opts(c, td.TOPIC_AVRO, **{"value.format": "avro", "key.format": "string"})).read_all()
    want = c.produced[td.TOPIC_AVRO]
    rows = _sorted_counts(table.to_pylist())
    assert [r["value"] for r in rows] == want.values
    assert [r["valueSchemaId"] for r in rows] == want.schema_ids and len(set(want.schema_ids)) == 3
    assert rows[0]["value"]["currency"] == "EUR"      # v1 records take v3's default
    value = table.schema.field("value").type
    assert value.field("price").type == pa.decimal128(9, 2) and value.field("day").type == pa.date32()


def test_scan_reads_json_keys_and_values_by_name(typed):
    c = typed
    table = kts.scan(opts(c, td.TOPIC_JSON, **{"value.format": "json", "key.format": "json"})).read_all()
    want = c.produced[td.TOPIC_JSON]
    rows = table.to_pylist()
    assert [r["value"] for r in rows] == want.values
    assert [r["key"] for r in rows] == want.keys
    assert [r["valueSchemaId"] for r in rows] == want.schema_ids
    assert len({r["keySchemaId"] for r in rows}) == 1
    assert table.schema.names[-2:] == ["keySchemaId", "valueSchemaId"]


def test_pushdown_on_kafka_columns_still_applies_to_typed_reads(typed):
    c = typed
    table = kts.scan(opts(c, td.TOPIC_JSON, **{"value.format": "json"}), where="offset >= 100").read_all()
    want = c.produced[td.TOPIC_JSON].values[100:]
    assert table.column("offset").to_pylist() == list(range(100, 120))
    assert table.column("value").to_pylist() == want


def test_bad_records_fail_the_read_naming_topic_partition_offset_and_schema_id(typed):
    c = typed
    from kafka_tiered_source.values.readers import resolve_readers
    from kafka_tiered_source.options import ReadOptions
    reader_opts = opts(c, td.TOPIC_BAD, **{"value.format": "json", "value.schema.subject": f"{td.TOPIC_JSON}-value"})
    assert resolve_readers(ReadOptions.parse(reader_opts)).values.readers.value.subject == f"{td.TOPIC_JSON}-value"
    for start, (_, what) in enumerate(c.bad):
        if not what:
            continue
        o = dict(reader_opts, startingOffsets=json.dumps({td.TOPIC_BAD: {"0": start}}))
        with pytest.raises(pa.ArrowInvalid) as info:
            kts.scan(o).read_all()
        text = str(info.value)
        assert "ValueDecodeError: " in text and f"{td.TOPIC_BAD}-0 offset {start}" in text, text
        if what == "unknown id":
            assert "schema id 9999" in text and "SchemaNotFoundError" in text
        if what == "malformed":
            assert f"schema id {int.from_bytes(c.bad[0][0][1:5], 'big')}: not JSON" in text


def test_permissive_keeps_bad_records_as_nulls_with_their_bytes(typed):
    c = typed
    o = opts(c, td.TOPIC_BAD, mode="PERMISSIVE", **{"value.format": "json",
                                                    "value.schema.subject": f"{td.TOPIC_JSON}-value"})
    rows = kts.scan(o).read_all().to_pylist()
    good = td.json_row(json.loads(c.bad[0][0][5:]))
    assert [r["value"] for r in rows] == [None if what else good for _, what in c.bad]
    assert [r["corruptValue"] for r in rows] == [v if what else None for v, what in c.bad]
    sid = int.from_bytes(c.bad[0][0][1:5], "big")
    assert [r["valueSchemaId"] for r in rows] == [sid, None, None, 9999, sid, sid]


def test_a_registry_that_is_down_is_a_named_error_and_permissive_keeps_the_bytes(typed):
    c = typed
    # the reader schema given outright (its own text: no writer schema of this process resolved
    # to it yet) and a client of its own (another retry setting): nothing cached helps them
    schema = dict(td.json_schema(3), description="outage, failfast")
    o = opts(c, td.TOPIC_JSON, **{"value.format": "json", "value.schema": json.dumps(schema),
                                  "schema.registry.max.retries": "1", "schema.registry.retries.wait.ms": "1"})
    c.schema_registry.stop()
    try:
        with pytest.raises(pa.ArrowInvalid) as info:
            kts.scan(o).read_all()
        assert "SchemaRegistryUnavailableError" in str(info.value) and "offset 0" in str(info.value)
        # a reader schema from the registry: the scan is refused before any task
        with pytest.raises(SchemaRegistryUnavailableError):
            kts.scan(opts(c, td.TOPIC_JSON, **{"value.format": "json", "schema.registry.max.retries": "0"}))
        schema["description"] = "outage, permissive"
        rows = kts.scan(dict(o, mode="PERMISSIVE", **{"value.schema": json.dumps(schema)})).read_all().to_pylist()
    finally:
        c.schema_registry.start()
    raw = c.produced[td.TOPIC_JSON].raw
    assert [r["value"] for r in rows] == [None] * len(raw)
    assert [r["corruptValue"] for r in rows] == [v for _, v in raw]


def test_each_schema_is_fetched_once_per_process(typed):
    c = typed
    # two more reads, several workers, another client configuration: still one fetch per id, ever
    o = opts(c, td.TOPIC_PB, **{"value.format": "protobuf", "schema.registry.request.timeout.ms": "29999"})
    for _ in range(2):
        kts.scan(o, **{"scan.workers": 3}).read_all()
    ids = set(c.produced[td.TOPIC_PB].schema_ids)
    assert {sid: c.schema_registry.fetches(sid, "kafka-tiered") for sid in ids} == {sid: 1 for sid in ids}


def test_options_are_checked_and_secrets_never_shown(typed):
    c = typed
    from kafka_tiered_source.options import ReadOptions
    base = {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": td.TOPIC_JSON}
    with pytest.raises(ConfigError, match="schema.registry.url"):
        ReadOptions.parse({**base, "value.format": "avro"})
    with pytest.raises(ConfigError, match="value.format"):
        ReadOptions.parse({**base, "value.format": "xml"})
    with pytest.raises(ConfigError, match="record.name"):
        ReadOptions.parse({**base, "value.format": "json", "schema.registry.url": c.schema_registry_url,
                           "value.subject.name.strategy": "RecordNameStrategy"})
    o = ReadOptions.parse({**base, "value.format": "json", "schema.registry.url": "https://u:hunter2@reg:8081",
                           "basic.auth.credentials.source": "URL", "mode": "permissive"})
    assert o.values.mode == "PERMISSIVE"
    o2 = ReadOptions.parse({**base, "value.format": "json", "schema.registry.url": c.schema_registry_url,
                            "basic.auth.user.info": "u:sekrit-9", "bearer.auth.logical.cluster": "lsrc-1"})
    for shown in (repr(o), str(o.values), repr(o2), repr(o2.values)):
        assert "hunter2" not in shown and "sekrit-9" not in shown


FORMATS = [(td.TOPIC_PB, "protobuf"), (td.TOPIC_AVRO, "avro"), (td.TOPIC_JSON, "json")]


def _utc(value):
    """Spark and Parquet readers' values made comparable: timestamps as aware UTC datetimes (Spark
    gives naive local ones), maps as sorted items."""
    import datetime as dt
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc)
    if isinstance(value, dict):
        return {k: sorted(v.items()) if k == "counts" and isinstance(v, dict) else
                sorted(v) if k == "counts" and isinstance(v, list) else _utc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utc(v) for v in value]
    return value


@pytest.mark.parametrize("topic,fmt", FORMATS, ids=[f for _, f in FORMATS])
def test_export_writes_the_typed_columns(typed, tmp_path, topic, fmt):
    c = typed
    from kafka_tiered_source.cli import main
    out = tmp_path / "out"
    o = opts(c, topic, **{"value.format": fmt})
    args = ["export", "--bootstrap-servers", c.bootstrap_servers, "--topic", topic,
            "--remote-storage-uri", o["remote.storage.uri"], "--to", str(out), "--no-progress", "--no-headers"]
    for k in ("value.format", "schema.registry.url"):
        args += ["-o", f"{k}={o[k]}"]
    assert main(args) == 0
    table = pq.read_table(out / f"topic={topic}")
    rows = sorted(table.to_pylist(), key=lambda r: r["offset"])
    assert [_utc(r["value"]) for r in rows] == [_utc(v) for v in c.produced[topic].values]
    assert [r["valueSchemaId"] for r in rows] == c.produced[topic].schema_ids
    assert table.schema.field("value").type == kts.scan(o).schema.field("value").type


@pytest.mark.spark
def test_spark_reads_the_same_typed_columns(typed, spark):
    c = typed
    for topic, fmt in FORMATS:
        o = opts(c, topic, **{"value.format": fmt})
        # the format for two, kafka_tiered_source.read() (Spark 3.4+, mapInArrow) for Avro
        df = kts.read(spark, o) if fmt == "avro" else spark.read.format("kafka-tiered").options(**o).load()
        assert df.columns[-1] == "valueSchemaId"
        want = c.produced[topic]
        keep = list(range(len(want.values)))
        if fmt == "json":
            # a filter on a value field: Spark applies it after decoding (Kafka columns' are pushed down)
            df = df.filter("value IS NULL OR value.customer.tier = 'GOLD'")
            keep = [i for i, v in enumerate(want.values) if v is None or (v["customer"] or {}).get("tier") == "GOLD"]
        rows = sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r["offset"])
        assert [r["offset"] for r in rows] == keep, fmt
        assert [r["valueSchemaId"] for r in rows] == [want.schema_ids[i] for i in keep], fmt
        assert [_utc(r["value"]) for r in rows] == [_utc(want.values[i]) for i in keep], fmt
