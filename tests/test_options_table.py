"""The option table: every option declared once, one validator for the Spark source's, the
storage layer's and the Kafka client's options, and README's reference generated from it."""
from __future__ import annotations

import os
import re

import pytest

from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.options import (KAFKA_OPTIONS, OPTIONS, ClientConfig, FetcherConfig, ReadOptions,
                                         markdown_table, register_fetcher)
from kafka_tiered_source.redact import is_secret_key
from kafka_tiered_source.storage import RemoteStorageFetcher

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}

# A misspelling of one real option per built-in backend, and that option.
MISSPELT = {
    "s3": ("remote.storage.s3.endpont", "remote.storage.s3.endpoint"),
    "gcs": ("remote.storage.gcs.projet", "remote.storage.gcs.project"),
    "azure": ("remote.storage.azure.containr", "remote.storage.azure.container"),
    "fsspec": ("remote.storage.fsspec.ur", "remote.storage.fsspec.url"),
    "presigned": ("remote.storage.presigned.expiry", None),   # presigned takes no options at all
}
URIS = {"s3": "s3://bucket/prefix", "gcs": "gs://bucket/prefix", "azure": "az://container/prefix",
        "fsspec": "memory://root"}


# presigned URLs come from the broker: no remote.storage.uri names that backend
CASES = [(b, how) for b in sorted(MISSPELT) for how in ("alone", "fetcher named", "uri")
         if how != "uri" or b in URIS]


@pytest.mark.parametrize("backend,how", CASES)
def test_a_misspelt_backend_option_is_refused_whatever_else_is_set(backend, how):
    wrong, right = MISSPELT[backend]
    opts = {**BASE, wrong: "http://minio:9000"}
    if how == "fetcher named":
        opts["remote.storage.fetcher"] = backend
    elif how == "uri":
        opts["remote.storage.uri"] = URIS[backend]
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse(opts)
    assert info.value.option == wrong
    assert wrong in str(info.value)
    if right:
        assert f"Did you mean '{right}'?" in str(info.value)
    # the storage layer alone says the same (create_fetcher from a plain dict)
    with pytest.raises(ConfigError) as info:
        FetcherConfig.from_options({k: v for k, v in opts.items() if k.startswith("remote.storage.")})
    assert info.value.option == wrong


class _DeclaringFetcher(RemoteStorageFetcher):
    """A third-party fetcher that declares its options."""
    backend = "vault"
    options = {"remote.storage.vaultfs.bucket": "the bucket", "remote.storage.vaultfs.api.key": "a key"}

    def fetch_ranges(self, segment, ranges):
        raise AssertionError("not used")

    def fetch_index(self, segment, index):
        raise AssertionError("not used")


def test_a_third_party_fetcher_passes_only_its_declared_options():
    register_fetcher("vaultfs", f"{__name__}:_DeclaringFetcher")
    opts = {**BASE, "remote.storage.fetcher": "vaultfs", "remote.storage.vaultfs.bucket": "b",
            "remote.storage.vaultfs.api.key": "k3y-s3cr3t"}
    o = ReadOptions.parse(opts)
    assert o.storage.option("remote.storage.vaultfs.bucket") == "b"
    assert o.storage.option("remote.storage.vaultfs.api.key") == "k3y-s3cr3t"
    assert "k3y-s3cr3t" not in repr(o)
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse({**opts, "remote.storage.vaultfs.bukket": "b"})
    assert info.value.option == "remote.storage.vaultfs.bukket"
    assert "Did you mean 'remote.storage.vaultfs.bucket'?" in str(info.value)


def test_unknown_kafka_client_settings_are_refused_at_load_with_a_suggestion():
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse({**BASE, "kafka.request.timout.ms": "100"})
    assert info.value.option == "kafka.request.timout.ms"
    assert "'request.timeout.ms'" in str(info.value)
    with pytest.raises(ConfigError):
        ClientConfig.from_properties({"bootstrap.servers": "b:1", "request.timout.ms": "100"})


def test_every_option_is_declared_once_with_a_doc_and_a_secret_flag_that_agrees_with_redaction():
    names = [o.key for o in OPTIONS] + [f"kafka.{o.key}" for o in KAFKA_OPTIONS]
    assert len(names) == len(set(names))
    for o in (*OPTIONS, *KAFKA_OPTIONS):
        assert o.doc, o.name
        assert o.secret == is_secret_key(o.name), o.name


def test_defaults_in_the_table_are_what_a_parse_gives():
    o = ReadOptions.parse(BASE)
    by_name = {opt.name: opt.default for opt in OPTIONS}
    assert o.partition_target_bytes == by_name["partition.target.bytes"]
    assert o.fail_on_data_loss is by_name["failOnDataLoss"]
    assert o.storage.part_size == by_name["fetch.remote.part.size.bytes"]
    assert o.storage.concurrency == by_name["fetch.remote.concurrency"]
    assert o.cost.preset == by_name["cost.preset"]
    assert o.poll_timeout_ms == by_name["kafkaConsumer.pollTimeoutMs"]
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1"})
    kafka = {opt.name: opt.default for opt in KAFKA_OPTIONS}
    assert cfg.request_timeout_ms == kafka["request.timeout.ms"]
    assert cfg.max_partition_fetch_bytes == kafka["max.partition.fetch.bytes"]


def test_readme_option_reference_is_the_generated_table():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    found = re.search(r"<!-- options:begin -->\n(.*?)<!-- options:end -->", readme, re.S)
    assert found, "README.md lacks the generated option reference"
    assert found.group(1).strip() == markdown_table().strip(), \
        "README's option table is stale: paste kafka_tiered_source.options.markdown_table() there"


@pytest.mark.parametrize("locator", ["kip1248", "metadata-topic"])
def test_locators_that_need_a_broker_are_refused_offline(locator):
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse({"subscribe": "t", "remote.storage.uri": "file:///tmp/x",
                           "remote.segment.locator": locator})
    assert info.value.option == "remote.segment.locator" and "kafka.bootstrap.servers" in str(info.value)
    assert ReadOptions.parse({"subscribe": "t", "remote.storage.uri": "file:///tmp/x",
                              "remote.segment.locator": "listing"}).segment_locator == "listing"
