"""Option parsing of the kafka-tiered source (kafka_tiered_source.options).

Expected behaviour follows Spark's KafkaSourceProvider for batch reads (names, defaults,
precedence, refusals); the differences are the documented ones of the options module.
"""
from __future__ import annotations

import dataclasses
import pickle

import pytest

from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.model import (Assign, EarliestOffsets, GlobalTimestamp, LatestOffsets,
                                       SpecificOffsets, SpecificTimestamps, Subscribe, SubscribePattern,
                                       TopicPartition)
from kafka_tiered_source.options import OptionMap, ReadOptions, include_headers

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
TP = TopicPartition


def parse(**extra):
    opts = dict(BASE)
    for key, value in extra.items():
        opts[key.replace("__", ".")] = value
    return ReadOptions.parse(opts)


def refused(opts, option, *fragments):
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse(opts)
    assert info.value.option == option
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return info.value


def with_base(**extra):
    opts = dict(BASE)
    opts.update({k.replace("__", "."): v for k, v in extra.items()})
    return opts


# --- defaults -----------------------------------------------------------------------------
def test_defaults_match_spark_batch_defaults():
    o = ReadOptions.parse(BASE)
    assert o.strategy == Subscribe(("t",))
    assert o.bootstrap_servers == ("127.0.0.1:9092",)
    assert o.starting_offsets == EarliestOffsets()
    assert o.ending_offsets == LatestOffsets()
    assert o.fail_on_data_loss is True
    assert o.include_headers is False
    assert o.min_partitions is None and o.max_records_per_partition is None
    assert o.isolation_level == "read_uncommitted" and not o.read_committed
    assert o.partition_target_bytes == 128 * 1024 * 1024
    assert o.fetch_remote_enabled is True
    assert o.client_id == "kafka-tiered"
    assert o.kafka == {"bootstrap.servers": "127.0.0.1:9092"}
    assert not o.offline and o.ignored == ()


def test_option_names_are_case_insensitive():
    o = ReadOptions.parse({"KAFKA.Bootstrap.Servers": "h:1", "SubscribePattern": "a.*",
                           "STARTINGOFFSETS": '{"ab":{"0":5}}', "includeheaders": "TRUE"})
    assert o.strategy == SubscribePattern("a.*")
    assert o.starting_offsets == SpecificOffsets(((TP("ab", 0), 5),))
    assert o.include_headers is True


def test_same_option_twice_in_different_case_is_refused():
    refused({**BASE, "minPartitions": "2", "MINPARTITIONS": "3"}, "MINPARTITIONS", "twice")


def test_config_is_frozen_and_pickles():
    o = ReadOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "assign": '{"t":[1,0]}',
         "startingOffsets": '{"t":{"0":1,"1":-2}}', "kafka.security.protocol": "SSL"})
    assert pickle.loads(pickle.dumps(o)) == o
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.include_headers = True
    with pytest.raises(AttributeError):
        o.kafka.x = 1
    assert hash(o.kafka) == hash(OptionMap({"bootstrap.servers": "h:1",
                                            "security.protocol": "SSL"}))


# --- what to read -------------------------------------------------------------------------
def test_subscribe_splits_trims_and_dedups():
    assert parse(subscribe=" a, b ,,a ").strategy == Subscribe(("a", "b"))


def test_subscribe_empty():
    refused(with_base(subscribe=" , "), "subscribe", "No topics to subscribe to")


def test_subscribe_pattern_matches_whole_names_like_java_matches():
    o = ReadOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribePattern": "orders-.*"})
    assert o.strategy.matches("orders-eu")
    assert not o.strategy.matches("old-orders-eu")
    assert not SubscribePattern("orders").matches("orders-eu")


@pytest.mark.parametrize("pattern", ["orders-(", "\\p{Alpha}+", "[a-"])
def test_subscribe_pattern_invalid_in_python_re(pattern):
    opts = {"kafka.bootstrap.servers": "h:1", "subscribePattern": pattern}
    refused(opts, "subscribePattern", "regular expression", "position")


def test_subscribe_pattern_is_python_re_not_java():
    # Java refuses "a{2" (unclosed counted repetition); Python reads it literally.  The
    # options module documents this difference.
    opts = {"kafka.bootstrap.servers": "h:1", "subscribePattern": "a{2"}
    assert ReadOptions.parse(opts).strategy.matches("a{2")


def test_subscribe_pattern_empty():
    refused({"kafka.bootstrap.servers": "h:1", "subscribePattern": "  "}, "subscribePattern",
            "Pattern to subscribe is empty")


def test_assign_sorted_and_deduplicated():
    o = ReadOptions.parse({"kafka.bootstrap.servers": "h:1",
                           "assign": '{"b":[2,0,2],"a":[1]}'})
    assert o.strategy == Assign((TP("a", 1), TP("b", 0), TP("b", 2)))
    assert o.strategy.topics == ("a", "b")


@pytest.mark.parametrize("value, fragments", [
    ("t:0", ["No topicpartitions to assign", "'t:0'"]),
    ('{"t":[0,1}', ["not valid JSON", "character 9", "line 1 column 10"]),
    ('{"t":0}', ["must map to a list"]),
    ('{"t":[0,"1"]}', ["must be a 64-bit integer", '"1"']),
    ('{"t":[true]}', ["must be a 64-bit integer"]),
    ('{"t":[-1]}', ["must be >= 0"]),
    ('{"t":[]}', ["names no partitions"]),
    ('{"":[0]}', ["non-empty strings"]),
    ('{"t":[0],"t":[1]}', ["names 't' twice"]),
])
def test_assign_errors(value, fragments):
    refused({"kafka.bootstrap.servers": "h:1", "assign": value}, "assign", *fragments)


def test_exactly_one_strategy():
    refused({"kafka.bootstrap.servers": "h:1"}, "subscribe",
            "One of the following options must be specified",
            "subscribe, subscribePattern, assign")
    e = refused({**BASE, "assign": '{"t":[0]}'}, "assign", "Only one of the following")
    assert "subscribe, assign" in str(e)


# --- where to read from -------------------------------------------------------------------
def test_bootstrap_servers_required_and_named():
    refused({"subscribe": "t"}, "kafka.bootstrap.servers",
            "'kafka.bootstrap.servers' must be specified")


def test_offline_mode_needs_an_explicit_layout():
    o = ReadOptions.parse({"subscribe": "t", "remote.storage.layout": "kafka-local-tiered",
                           "remote.storage.fetcher": "fsspec",
                           "remote.storage.fsspec.url": "file:///data/tiered"})
    assert o.offline and o.bootstrap_servers == ()
    assert o.storage.layout == "kafka-local-tiered"
    refused({"subscribe": "t", "remote.storage.fetcher": "fsspec"}, "kafka.bootstrap.servers",
            "'remote.storage.layout'")
    refused({"subscribe": "t", "remote.storage.layout": "aiven", "fetch.remote.enabled": "false"},
            "fetch.remote.enabled", "nothing to read from")


@pytest.mark.parametrize("value", ["localhost", "h:0", "h:99999", "h:port", " , "])
def test_bootstrap_servers_must_be_host_port(value):
    refused(with_base(kafka__bootstrap__servers=value), "kafka.bootstrap.servers")


def test_bootstrap_servers_list_and_ipv6():
    o = parse(kafka__bootstrap__servers="a:9092, [::1]:9093")
    assert o.bootstrap_servers == ("a:9092", "[::1]:9093")


# --- starting / ending offsets ------------------------------------------------------------
def test_explicit_offsets_json():
    o = parse(startingOffsets='{"t":{"0":23,"1":-2}}', endingOffsets='{"t":{"0":50,"1":-1}}')
    assert o.starting_offsets.as_dict() == {TP("t", 0): 23, TP("t", 1): -2}
    assert o.ending_offsets.as_dict() == {TP("t", 0): 50, TP("t", 1): -1}


def test_earliest_and_latest_words_any_case():
    o = parse(startingOffsets=" Earliest ", endingOffsets="LATEST")
    assert o.starting_offsets == EarliestOffsets() and o.ending_offsets == LatestOffsets()


@pytest.mark.parametrize("opts, option, fragment", [
    ({"startingOffsets": "latest"}, "startingOffsets",
     "starting offset can't be latest for batch queries"),
    ({"startingOffsets": '{"t":{"0":-1}}'}, "startingOffsets",
     "startingOffsets for t-0 can't be latest"),
    ({"endingOffsets": "earliest"}, "endingOffsets",
     "ending offset can't be earliest for batch queries"),
    ({"endingOffsets": '{"t":{"3":-2}}'}, "endingOffsets",
     "ending offset for t-3 can't be earliest"),
    ({"startingOffsets": "first"}, "startingOffsets", "'earliest', 'latest' or a JSON object"),
    ({"startingOffsets": '{"t":{"0":-3}}'}, "startingOffsets", "must be >= 0, -2"),
    ({"startingOffsets": '{"t":{"0":1.5}}'}, "startingOffsets", "64-bit integer"),
    ({"startingOffsets": '{"t":{"x":1}}'}, "startingOffsets", "'x' of topic 't' is not a"),
    ({"startingOffsets": '{"t":{"0":1, "0":2}}'}, "startingOffsets", "names '0' twice"),
    ({"startingOffsets": '{"t":{"0":1'}, "startingOffsets", "not valid JSON"),
    ({"startingOffsets": '{"t":{}}'}, "startingOffsets", "non-empty object"),
    ({"startingOffsets": '{"t":{"0":9223372036854775808}}'}, "startingOffsets", "64-bit"),
])
def test_offset_errors(opts, option, fragment):
    refused(with_base(**opts), option, fragment)


def test_start_greater_than_end_for_the_same_partition():
    refused(with_base(startingOffsets='{"t":{"0":10}}', endingOffsets='{"t":{"0":5}}'),
            "startingOffsets", "t-0", "(10", "(5")
    # Markers are not compared (Spark does the same).
    o = parse(startingOffsets='{"t":{"0":-2}}', endingOffsets='{"t":{"0":5}}')
    assert o.ending_offsets.as_dict()[TP("t", 0)] == 5
    o = parse(startingOffsets='{"t":{"0":10}}', endingOffsets='{"t":{"0":-1}}')
    assert o.ending_offsets.as_dict()[TP("t", 0)] == -1
    # Equal start and end is an empty range, allowed.
    assert parse(startingOffsets='{"t":{"0":7}}', endingOffsets='{"t":{"0":7}}')


def test_start_and_end_must_name_the_same_partitions():
    refused(with_base(startingOffsets='{"t":{"0":1,"1":1}}', endingOffsets='{"t":{"0":5}}'),
            "endingOffsets", "only in startingOffsets: t-1")


def test_explicit_offsets_must_match_assign():
    opts = {"kafka.bootstrap.servers": "h:1", "assign": '{"t":[0,1]}'}
    refused({**opts, "startingOffsets": '{"t":{"0":1}}'}, "startingOffsets", "missing: t-1")
    refused({**opts, "endingOffsets": '{"t":{"0":1,"1":2,"2":3}}'}, "endingOffsets",
            "not assigned: t-2")
    assert ReadOptions.parse({**opts, "startingOffsets": '{"t":{"0":1,"1":-2}}'})


def test_explicit_offsets_must_cover_subscribed_topics():
    refused(with_base(subscribe="t,u", startingOffsets='{"t":{"0":1}}'), "startingOffsets",
            "missing: u")
    refused(with_base(startingOffsets='{"t":{"0":1},"v":{"0":1}}'), "startingOffsets",
            "not subscribed: v")
    refused({"kafka.bootstrap.servers": "h:1", "subscribePattern": "t.*",
             "startingOffsets": '{"t1":{"0":1},"x":{"0":1}}'}, "startingOffsets",
            "do not match subscribePattern", "x")


def test_timestamp_precedence_over_offsets():
    o = parse(startingTimestamp="1000", startingOffsetsByTimestamp='{"t":{"0":5}}',
              startingOffsets='{"t":{"0":1}}')
    assert o.starting_offsets == GlobalTimestamp(1000, "error")
    o = parse(startingOffsetsByTimestamp='{"t":{"0":5}}', startingOffsets='{"t":{"0":1}}')
    assert o.starting_offsets == SpecificTimestamps(((TP("t", 0), 5),), "error")
    o = parse(endingTimestamp="2000", endingOffsetsByTimestamp='{"t":{"0":5}}',
              endingOffsets="latest")
    assert o.ending_offsets == GlobalTimestamp(2000, "error")
    o = parse(endingOffsetsByTimestamp='{"t":{"0":5}}', endingOffsets="latest")
    assert o.ending_offsets == SpecificTimestamps(((TP("t", 0), 5),), "error")


def test_timestamp_strategy():
    o = parse(startingTimestamp="5", startingOffsetsByTimestampStrategy="Latest")
    assert o.starting_offsets == GlobalTimestamp(5, "latest")
    refused(with_base(startingOffsetsByTimestampStrategy="closest"),
            "startingOffsetsByTimestampStrategy", "error, latest")


@pytest.mark.parametrize("opts, option, fragment", [
    ({"startingTimestamp": "yesterday"}, "startingTimestamp", "expected a single long value"),
    ({"startingTimestamp": "-5"}, "startingTimestamp", ">= 0"),
    ({"endingOffsetsByTimestamp": '{"t":{"0":-1}}'}, "endingOffsetsByTimestamp", ">= 0"),
    ({"startingTimestamp": "20", "endingTimestamp": "10"}, "startingTimestamp", "greater"),
    ({"startingOffsetsByTimestamp": '{"t":{"0":20}}',
      "endingOffsetsByTimestamp": '{"t":{"0":10}}'}, "startingOffsetsByTimestamp", "greater"),
    ({"startingOffsetsByTimestamp": '{"t":{"0":20}}',
      "endingOffsetsByTimestamp": '{"t":{"1":30}}'}, "endingOffsetsByTimestamp",
     "must name the same partitions"),
])
def test_timestamp_errors(opts, option, fragment):
    refused(with_base(**opts), option, fragment)


# --- scalar options -----------------------------------------------------------------------
def test_booleans_and_ints():
    o = parse(failOnDataLoss="False", includeHeaders="true", minPartitions="8",
              maxRecordsPerPartition="1000000", partition__target__bytes="1048576")
    assert o.fail_on_data_loss is False and o.include_headers is True
    assert o.min_partitions == 8 and o.max_records_per_partition == 1_000_000
    assert o.partition_target_bytes == 1 << 20


@pytest.mark.parametrize("option, value, fragment", [
    ("failOnDataLoss", "yes", "'true' or 'false'"),
    ("includeHeaders", "1", "'true' or 'false'"),
    ("minPartitions", "0", "must be positive"),
    ("minPartitions", "-3", "must be positive"),
    ("minPartitions", "two", "must be an integer"),
    ("minPartitions", "1_000", "must be an integer"),
    ("minPartitions", "3000000000", "<= 2147483647"),
    ("maxRecordsPerPartition", "0", "must be positive"),
    ("partition.target.bytes", "1.5", "must be an integer"),
    ("fetch.remote.connect.timeout.ms", "-1", ">= 1"),
    ("fetch.remote.read.timeout.ms", "x", "must be an integer"),
    ("fetch.remote.enabled", "maybe", "'true' or 'false'"),
    ("fetchOffset.numRetries", "0", "must be positive"),   # Spark fails every read with 0 attempts
    ("kafkaConsumer.pollTimeoutMs", "0", "must be positive"),
])
def test_invalid_scalar_values_name_the_option(option, value, fragment):
    refused({**BASE, option: value}, option, fragment)


def test_isolation_level():
    o = parse(kafka__isolation__level="READ_COMMITTED")
    assert o.read_committed and o.kafka["isolation.level"] == "read_committed"
    refused(with_base(kafka__isolation__level="serializable"), "kafka.isolation.level",
            "read_uncommitted, read_committed")


# --- kafka.* pass-through and refusals ----------------------------------------------------
def test_kafka_options_pass_through_without_prefix():
    o = parse(kafka__security__protocol="SASL_SSL", kafka__sasl__mechanism="PLAIN",
              kafka__group__id="my-group")     # Spark accepts group.id since 3.0
    assert o.kafka["security.protocol"] == "SASL_SSL"
    assert o.kafka["sasl.mechanism"] == "PLAIN"
    assert o.kafka["group.id"] == "my-group"


@pytest.mark.parametrize("setting, fragment", [
    ("auto.offset.reset", "set the source option 'startingOffsets'"),
    ("key.deserializer", "Use DataFrame operations to explicitly deserialize the keys"),
    ("value.deserializer", "deserialize the values"),
    ("key.serializer", "only reads"),
    ("value.serializer", "only reads"),
    ("enable.auto.commit", "not supported"),
    ("interceptor.classes", "not supported"),
])
def test_refused_kafka_options(setting, fragment):
    e = refused({**BASE, f"kafka.{setting}": "x"}, f"kafka.{setting}", fragment)
    assert f"Kafka option '{setting}' is not supported" in str(e)


def test_client_id():
    assert parse(client__id="backfill").client_id == "backfill"
    assert parse(kafka__client__id="k").client_id == "k"
    assert parse(client__id="a", kafka__client__id="a").client_id == "a"
    refused(with_base(client__id="a", kafka__client__id="b"), "client.id", "differ")


# --- unknown, ignored ---------------------------------------------------------------------
def test_unknown_option_with_suggestion_and_choices():
    e = refused({**BASE, "startingOfsets": "earliest"}, "startingofsets",
                "Unknown option 'startingofsets'", "Did you mean 'startingOffsets'?",
                "Valid options:", "maxRecordsPerPartition")
    assert "kafka.<Kafka client setting>" in str(e)
    e = refused({**BASE, "zzzz": "1"}, "zzzz", "Unknown option")
    assert "Did you mean" not in str(e)


def test_misplaced_sink_and_path_options_explained():
    refused({**BASE, "topic": "t"}, "topic", "sink", "only reads")
    refused({**BASE, "path": "/tmp/x"}, "path", "takes no path")


def test_streaming_only_options_are_ignored_like_spark(caplog):
    o = parse(maxOffsetsPerTrigger="10", groupIdPrefix="g")
    assert o.ignored == ("maxOffsetsPerTrigger", "groupIdPrefix")
    assert "maxOffsetsPerTrigger" in caplog.text and "streaming" in caplog.text
    refused(with_base(minOffsetsPerTrigger="20", maxOffsetsPerTrigger="10"),
            "minOffsetsPerTrigger", "higher than maxOffsetsPerTrigger")


# --- remote storage (parsed by the storage layer, checked at load time) --------------------
def test_remote_storage_options_reach_the_storage_layer():
    o = parse(remote__storage__fetcher="S3", remote__storage__layout="aiven",
              remote__storage__s3__bucket="tiered", remote__storage__prefix="p/",
              remote__storage__s3__region="eu-west-1", fetch__remote__concurrency="16",
              fetch__remote__coalesce__gap__bytes="0")
    st = o.storage
    assert (st.fetcher, st.layout, st.prefix) == ("s3", "aiven", "p/")
    assert st.option("remote.storage.s3.bucket") == "tiered"
    assert st.option("remote.storage.s3.region") == "eu-west-1"
    assert st.concurrency == 16 and st.coalesce_gap == 0
    assert o.fetch_remote_enabled is True


def test_remote_storage_defaults():
    st = ReadOptions.parse(BASE).storage
    assert (st.connect_timeout_ms, st.read_timeout_ms) == (1000, 5000)
    assert (st.part_size, st.concurrency) == (16 * 1024 * 1024, 4)


def test_fetch_remote_enabled():
    assert parse(fetch__remote__enabled="FALSE").fetch_remote_enabled is False


def test_storage_errors_surface_with_the_option_named():
    refused(with_base(remote__storage__layout="flat"), "remote.storage.layout", "aiven")
    refused(with_base(remote__storage__s3__buckt="b"), "remote.storage.s3.buckt", "unknown")
    refused(with_base(fetch__remote__concurrency="0"), "fetch.remote.concurrency")


def test_unknown_fetch_remote_option_is_refused_with_suggestion():
    refused(with_base(fetch__remote__read__timeout="5"), "fetch.remote.read.timeout",
            "Did you mean 'fetch.remote.read.timeout.ms'?")


def test_third_party_fetcher_options_pass():
    o = parse(remote__storage__fetcher="acme", remote__storage__acme__vault="v1")
    assert o.storage.fetcher == "acme"
    assert o.storage.option("remote.storage.acme.vault") == "v1"


# --- secrets ------------------------------------------------------------------------------
SECRETS = {
    "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                              'required username="u" password="hunter2-jaas";',
    "kafka.ssl.key.password": "hunter2-keypw",
    "kafka.ssl.keystore.password": "hunter2-kspw",
    "remote.storage.azure.sas.token": "sv=2022&sig=hunter2-sas",
    "remote.storage.azure.account.key": "hunter2-azkey",
    "remote.storage.azure.connection.string": "AccountKey=hunter2-cs",
    "remote.storage.s3.secret.access.key": "hunter2-s3",
    "remote.storage.s3.session.token": "hunter2-token",
}


def test_secrets_never_in_repr_or_str():
    o = ReadOptions.parse({**BASE, **SECRETS})
    # The values are there for the client and the fetcher...
    assert o.kafka["ssl.key.password"] == "hunter2-keypw"
    assert o.storage.option("remote.storage.azure.sas.token") == "sv=2022&sig=hunter2-sas"
    # ... and never shown.
    for text in (repr(o), str(o), repr(o.kafka), str(o.kafka), repr(o.storage)):
        assert "hunter2" not in text, text


def test_secrets_never_in_error_messages():
    for bad in ({"startingOfsets": "x"}, {"minPartitions": "0"}, {"assign": "{"}):
        with pytest.raises(ConfigError) as info:
            ReadOptions.parse({**BASE, **SECRETS, **bad})
        assert "hunter2" not in str(info.value)


def test_include_headers_alone():
    assert include_headers({"INCLUDEHEADERS": "True"}) is True
    assert include_headers({}) is False
    with pytest.raises(ConfigError) as info:
        include_headers({"includeHeaders": "on"})
    assert info.value.option == "includeHeaders"


def test_push_filters_says_it_outright_and_is_checked_at_load():
    from kafka_tiered_source.spark.datasource import KafkaTieredDataSource
    from kafka_tiered_source.spark.pushdown import pushdown_enabled, setting
    base = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}
    assert setting({**base, "PUSHFILTERS": " True "}) == "true"
    assert pushdown_enabled({**base, "pushFilters": "true"}) is True
    assert pushdown_enabled({**base, "pushFilters": "false"}) is False
    # auto, called outside a Spark planner process: Spark's setting cannot be seen, so no pushdown
    assert setting(base) == "auto" and pushdown_enabled(base) is False
    with pytest.raises(ConfigError) as ei:
        KafkaTieredDataSource({**base, "pushFilters": "sometimes"})
    assert ei.value.option == "pushFilters"
    assert "auto, true, false" in str(ei.value) and "'sometimes'" in str(ei.value)


def test_the_registered_source_ships_its_session_context_by_value():
    """register(spark) registers the data source with its session's context; Spark creates the
    source in another process, so the class travels by value (cloudpickle), context included,
    while the class Spark finds by itself travels by reference."""
    import subprocess
    import sys
    from pyspark import cloudpickle
    from kafka_tiered_source.spark.datasource import KafkaTieredDataSource, for_session
    from kafka_tiered_source.spark.metrics import SessionContext
    cls = for_session(SessionContext(app_name="nightly-backfill", app_id="app-17"))
    assert issubclass(cls, KafkaTieredDataSource) and cls.__qualname__.startswith("for_session.<locals>.")
    assert pickle.loads(cloudpickle.dumps(KafkaTieredDataSource)) is KafkaTieredDataSource
    code = ("import pickle, sys; cls = pickle.loads(sys.stdin.buffer.read()); "
            "ds = cls({'kafka.bootstrap.servers': 'b:9092', 'subscribe': 't'}); "
            "print(ds.read_options.client_id, cls.context.app_id, cls.name())")
    done = subprocess.run([sys.executable, "-c", code], input=cloudpickle.dumps(cls), capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["nightly-backfill", "app-17", "kafka-tiered"]
