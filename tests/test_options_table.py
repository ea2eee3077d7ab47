"""The option table: every option declared once, one validator for the Spark source's, the
storage layer's and the Kafka client's options, and docs/options.md's reference generated from it."""
from __future__ import annotations

import ast
import os
import re
import typing

import pytest

import kafka_tiered_source
from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.options import (KAFKA_OPTIONS, OPTIONS, ClientConfig, FetcherConfig, ReadOptions,
                                         markdown_table, register_fetcher)
from kafka_tiered_source.options import codegen, fields, read_fields
from kafka_tiered_source.options.table import KAFKA_BY_KEY
from kafka_tiered_source.redact import Secret, is_secret_key
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


def _config(o: ReadOptions, config: str):
    return {"ReadOptions": o, "FetcherConfig": o.storage, "QuotaConfig": o.quota, "ValuesConfig": o.values}[config]


def _other_value(opt) -> str:
    """A valid value of ``opt`` other than its default."""
    if opt.parse.choices:
        return next(c for c in opt.parse.choices if c != opt.default)
    return {"bool": "false" if opt.default else "true", "int": "7", "float": "2.5",
            "str": "other-value", "Secret": "other-secret"}[opt.parse.type]


def test_defaults_in_the_table_are_what_a_parse_gives():
    o = ReadOptions.parse(BASE, streaming=True)
    for opt in OPTIONS:
        if opt.field is not None:
            assert getattr(_config(o, opt.config), opt.field) == opt.default, opt.name
    assert o.cost.preset == {opt.name: opt.default for opt in OPTIONS}["cost.preset"]
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1"})
    for opt in KAFKA_OPTIONS:
        if opt.field is not None:
            assert getattr(cfg, opt.field) == opt.default, opt.name


# What a Kafka property needs beside it to make a valid ClientConfig.
_COMPANIONS = {"ssl.keyfile": {"ssl.certfile": "client.pem"}}


@pytest.mark.parametrize("opt", [o for o in KAFKA_OPTIONS if o.field is not None], ids=lambda o: o.name)
def test_each_kafka_property_with_a_field_fills_it_and_nothing_else(opt):
    raw = _other_value(opt)
    props = {"bootstrap.servers": "b:1", **_COMPANIONS.get(opt.name, {}), opt.name: raw}
    cfg = ClientConfig.from_properties(props)
    assert getattr(cfg, opt.field) == opt.value(raw) != opt.default
    companions = {KAFKA_BY_KEY[k].field for k in _COMPANIONS.get(opt.name, {})}
    for other in KAFKA_OPTIONS:
        if other.field is not None and other is not opt and other.field not in companions:
            assert getattr(cfg, other.field) == other.default, (opt.name, other.name)
    # with the kafka. prefix, as the Spark source passes them, the same
    assert ClientConfig.from_properties({f"kafka.{k}": v for k, v in props.items()}) == cfg


def test_a_secret_property_is_a_secret_in_the_config():
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1", "ssl.password": "pw-1",
                                        "ssl.keystore.password": "pw-2"})
    assert cfg.ssl_key_password == Secret("pw-1") and cfg.ssl_keystore_password == Secret("pw-2")
    assert "pw-1" not in repr(cfg) and "pw-2" not in repr(cfg)


# The typed-values rows that need others beside them to make a valid read, and values of theirs.
_REGISTRY = {"schema.registry.url": "http://registry:8081"}
_VALUES_CONTEXT = {
    "key.format": _REGISTRY, "value.format": _REGISTRY, "schema.registry.url": {"value.format": "json"},
    "basic.auth.credentials.source": {"value.format": "json", "schema.registry.url": "http://u:p@registry:8081"},
    "bearer.auth.credentials.source": {"bearer.auth.token": "t"},
    "bearer.auth.token": {"bearer.auth.credentials.source": "STATIC_TOKEN"},
    "schema.registry.ssl.key.location": {"schema.registry.ssl.certificate.location": "c.pem"},
    "key.subject.name.strategy": {"key.schema.record.name": "r"},
    "value.subject.name.strategy": {"value.schema.record.name": "r"}}
_VALUES_RAW = {"schema.registry.url": "http://other:8081", "basic.auth.user.info": "user:pw"}


def _context(opt) -> dict:
    if opt.config != "ValuesConfig":
        return {}
    side = opt.name.split(".", 1)[0]
    base = {f"{side}.format": "avro", **_REGISTRY} if side in ("key", "value") else {"value.format": "avro",
                                                                                      **_REGISTRY}
    return {**base, **_VALUES_CONTEXT.get(opt.name, {})}


@pytest.mark.parametrize("opt", [o for o in OPTIONS if o.field is not None], ids=lambda o: o.name)
def test_each_option_with_a_field_fills_it_and_nothing_else(opt):
    raw = _VALUES_RAW.get(opt.name) or _other_value(opt)
    context = {k: v for k, v in _context(opt).items() if k != opt.name}
    o = ReadOptions.parse({**BASE, **context, opt.name: raw}, streaming=True)
    assert getattr(_config(o, opt.config), opt.field) == opt.value(raw) != opt.default
    # every other field keeps its default
    for other in OPTIONS:
        if other.field is not None and other is not opt and other.name not in context:
            assert getattr(_config(o, other.config), other.field) == other.default, (opt.name, other.name)


def test_the_typed_fields_are_generated_from_the_table():
    for path, text in codegen.sources().items():
        with open(path, encoding="utf-8") as f:
            assert f.read() == text, \
                f"options/{os.path.basename(path)} is stale: run python -m kafka_tiered_source.options.codegen"
    # enumerations are Literal types of their choices
    hints = typing.get_type_hints(read_fields.ReadOptionsFields, vars(read_fields))
    assert typing.get_args(hints["fetch_remote_fallback"]) == ("auto", "never", "always")
    assert typing.get_args(typing.get_type_hints(fields.FetcherConfigFields)["layout"]) == \
        ("aiven", "kafka-local-tiered", "template")
    assert hints["min_partitions"] == typing.Optional[int] and hints["include_headers"] is bool
    # and every field of those bases is a row of the table
    names = {o.field for o in OPTIONS if o.field is not None}
    for base in (read_fields.ReadOptionsFields, fields.FetcherConfigFields, fields.QuotaConfigFields,
                 fields.ValuesConfigFields):
        assert set(base.OPTION_FIELDS) <= names
        assert base.FIELDS[:len(base.OPTION_FIELDS)] == base.OPTION_FIELDS
    kafka_names = {o.field for o in KAFKA_OPTIONS if o.field is not None}
    assert set(fields.ClientConfigFields.OPTION_FIELDS) == kafka_names
    client_hints = typing.get_type_hints(fields.ClientConfigFields, {**vars(fields), "Secret": Secret})
    assert client_hints["sasl_password"] == typing.Optional[Secret] and client_hints["retries"] is int


def _package_uses():
    """Attribute names read, string constants and f-string shapes (``f"{side}Offsets"`` as a
    pattern), in the package outside the table itself."""
    root = os.path.dirname(kafka_tiered_source.__file__)
    skip = {os.path.join(root, "options", n) for n in ("table.py", "fields.py", "read_fields.py", "codegen.py")}
    attrs, strings, shapes = set(), set(), set()
    for d, _, files in os.walk(root):
        for n in files:
            path = os.path.join(d, n)
            if not n.endswith(".py") or path in skip:
                continue
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    attrs.add(node.attr)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    strings.add(node.value.lower())
                elif isinstance(node, ast.JoinedStr):
                    shapes.add("".join(re.escape(part.value.lower()) if isinstance(part, ast.Constant)
                                       else r"[\w.]*" for part in node.values))
    return attrs, strings, shapes


def test_every_option_is_read_somewhere():
    """A row whose field nothing reads, or whose name nothing asks for, is an option that is
    validated and documented but does nothing: refuse it, or make it work."""
    attrs, strings, shapes = _package_uses()

    def asked_for(key):
        return key in strings or any(re.fullmatch(shape, key) for shape in shapes if shape != r"[\w.]*")

    unused = [o.name for o in (*OPTIONS, *KAFKA_OPTIONS)
              if (o.field not in attrs if o.field is not None else not asked_for(o.key))]
    assert unused == []


def test_docs_option_reference_is_the_generated_table():
    page = open(os.path.join(ROOT, "docs", "options.md"), encoding="utf-8").read()
    found = re.search(r"<!-- options:begin -->\n(.*?)<!-- options:end -->", page, re.S)
    assert found, "docs/options.md lacks the generated option reference"
    assert found.group(1).strip() == markdown_table().strip(), \
        "docs/options.md's option table is stale: run python -m kafka_tiered_source.options.codegen"
    assert codegen.reference(page) == page


@pytest.mark.parametrize("locator", ["kip1248", "metadata-topic"])
def test_locators_that_need_a_broker_are_refused_offline(locator):
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse({"subscribe": "t", "remote.storage.uri": "file:///tmp/x",
                           "remote.segment.locator": locator})
    assert info.value.option == "remote.segment.locator" and "kafka.bootstrap.servers" in str(info.value)
    assert ReadOptions.parse({"subscribe": "t", "remote.storage.uri": "file:///tmp/x",
                              "remote.segment.locator": "listing"}).segment_locator == "listing"
