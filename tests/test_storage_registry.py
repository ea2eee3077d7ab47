"""Fetcher registry and configuration: names, dotted class paths, entry points, install hints,
option parsing and secrets."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from kafka_tiered_source.errors import ConfigError, RemoteObjectNotFound
from kafka_tiered_source.redact import Secret
from kafka_tiered_source.storage import (CountingObserver, FetcherConfig, available_fetchers,
                                         create_fetcher, fetcher_class, register_fetcher)
from kafka_tiered_source.storage.segment import RemoteSegment

from storage_servers import DictFetcher

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEG = RemoteSegment("orders", "MWJ6FHTfRYy67jzwZdeqSQ", 0, "tqimKeZwStOEOwRzT3L5oQ", 0, 99)


def run_py(code: str, *extra_path: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, *extra_path]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def test_defaults_and_parsing_are_case_insensitive():
    c = FetcherConfig.from_options({"REMOTE.STORAGE.FETCHER": "S3", "remote.storage.s3.bucket": "b",
                                    "Fetch.Remote.Part.Size.Bytes": "1048576", "kafka.bootstrap.servers": "x"})
    assert c.fetcher == "s3" and c.option("remote.storage.s3.bucket") == "b"
    assert c.part_size == 1048576
    assert (c.connect_timeout_ms, c.read_timeout_ms, c.layout) == (1000, 5000, "aiven")


def test_unknown_remote_storage_key_is_named_with_choices():
    with pytest.raises(ConfigError) as ei:
        FetcherConfig.from_options({"remote.storage.s3.buckett": "b"})
    assert ei.value.option == "remote.storage.s3.buckett"
    assert "remote.storage.s3.bucket" in str(ei.value) and "remote.storage.fetcher.class" in str(ei.value)


@pytest.mark.parametrize("opts, option", [
    ({"fetch.remote.read.timeout.ms": "soon"}, "fetch.remote.read.timeout.ms"),
    ({"fetch.remote.concurrency": "0"}, "fetch.remote.concurrency"),
    ({"remote.storage.layout": "flat"}, "remote.storage.layout"),
    ({"remote.storage.layout": "template"}, "remote.storage.layout.template"),
    ({"remote.storage.layout.padded.offsets": "maybe"}, "remote.storage.layout.padded.offsets"),
])
def test_bad_values_name_the_option(opts, option):
    with pytest.raises(ConfigError) as ei:
        FetcherConfig.from_options(opts)
    assert ei.value.option == option and option in str(ei.value)


def test_padded_offsets_takes_the_same_booleans_as_the_kafka_client():
    for text, want in (("YES", True), ("1", True), (" false ", False), ("no", False)):
        assert FetcherConfig.from_options({"remote.storage.layout.padded.offsets": text}).padded_offsets is want
    with pytest.raises(ConfigError) as ei:
        FetcherConfig.from_options({"remote.storage.layout.padded.offsets": "on"})
    assert str(ei.value) == "option remote.storage.layout.padded.offsets must be true or false, got 'on'"


def test_secrets_are_wrapped_and_never_shown():
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
    c = FetcherConfig.from_options({"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "b",
                                    "remote.storage.s3.secret.access.key": secret,
                                    "remote.storage.azure.connection.string": f"AccountKey={secret}"})
    assert secret not in repr(c) and secret not in str(c)
    assert c.option("remote.storage.s3.secret.access.key") == secret
    assert isinstance(dict(c.backend_options)["remote.storage.s3.secret.access.key"], Secret)
    f = create_fetcher(c)
    assert secret not in repr(f)


def test_unknown_fetcher_lists_the_valid_ones():
    with pytest.raises(ConfigError) as ei:
        create_fetcher({"remote.storage.fetcher": "ftp"})
    assert "ftp" in str(ei.value) and "s3" in str(ei.value) and "presigned" in str(ei.value)
    with pytest.raises(ConfigError, match="no fetcher configured"):
        create_fetcher({})


def test_missing_required_backend_option_is_named():
    with pytest.raises(ConfigError) as ei:
        create_fetcher({"remote.storage.fetcher": "s3"})
    assert ei.value.option == "remote.storage.s3.bucket"


def test_missing_dependency_gives_the_install_hint():
    # boto3 blocked for real: importing it fails in that interpreter
    r = run_py("""
        import sys
        sys.modules["boto3"] = None
        from kafka_tiered_source.errors import ConfigError
        from kafka_tiered_source.storage import create_fetcher
        try:
            create_fetcher({"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "b"})
        except ConfigError as e:
            print("ERR", e.option, e)
    """)
    assert r.returncode == 0, r.stderr
    assert "ERR remote.storage.fetcher" in r.stdout
    assert "boto3" in r.stdout and "pip install kafka-tiered-source[s3]" in r.stdout


def test_importing_the_package_pulls_in_no_cloud_sdk():
    r = run_py("""
        import sys
        import kafka_tiered_source.storage
        from kafka_tiered_source.storage import create_fetcher
        f = create_fetcher({"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "b"})
        print(sorted(m for m in ("boto3", "botocore", "gcsfs", "adlfs", "azure.storage.blob") if m in sys.modules))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_user_class_by_dotted_path_works_and_pickles():
    DictFetcher.STORES["t1"] = {"k/orders/0.log": b"0123456789"}
    opts = {"remote.storage.fetcher.class": "storage_servers:DictFetcher", "remote.storage.custom.store": "t1",
            "remote.storage.layout": "template", "remote.storage.layout.template": "k/{topic}/{base_offset}.{suffix}"}
    obs = CountingObserver()
    f = create_fetcher(opts, observer=obs)
    assert isinstance(f, DictFetcher)
    assert bytes(f.fetch_log_segment(SEG, 2, 5)) == b"234"
    assert bytes(pickle.loads(pickle.dumps(f)).fetch_log_segment(SEG, 7)) == b"789"
    assert obs.requests == 1
    with pytest.raises(RemoteObjectNotFound):
        f.fetch_log_segment(RemoteSegment("nope", "MWJ6FHTfRYy67jzwZdeqSQ", 0, "tqimKeZwStOEOwRzT3L5oQ", 0, 1))
    # also with the dotted (no colon) spelling
    assert fetcher_class(class_path="storage_servers.DictFetcher") is DictFetcher


@pytest.mark.parametrize("path, needle", [
    ("storage_servers:Backend", "not a subclass"),
    ("no_such_module_kts:X", "cannot import module"),
    ("storage_servers:Nope", "has no 'Nope'"),
    ("justaname", "not a dotted path"),
])
def test_bad_class_paths_are_explained(path, needle):
    with pytest.raises(ConfigError) as ei:
        create_fetcher({"remote.storage.fetcher.class": path})
    assert needle in str(ei.value) and ei.value.option == "remote.storage.fetcher.class"


def test_register_fetcher_and_its_passthrough_options():
    register_fetcher("dictstore", "storage_servers:DictFetcher")
    assert "dictstore" in available_fetchers()
    DictFetcher.STORES["t2"] = {"x.log": b"abc"}
    f = create_fetcher({"remote.storage.fetcher": "dictstore", "remote.storage.custom.store": "t2",
                        "remote.storage.dictstore.flavour": "vanilla", "remote.storage.layout": "template",
                        "remote.storage.layout.template": "x.{suffix}"})
    assert f.config.option("remote.storage.dictstore.flavour") == "vanilla"
    assert bytes(f.fetch_log_segment(SEG)) == b"abc"
    with pytest.raises(ValueError, match="built-in"):
        register_fetcher("s3", "storage_servers:DictFetcher")


def test_third_party_entry_point_is_found(tmp_path):
    # A real installed-distribution layout: dist-info with entry_points.txt on sys.path.
    pkg = tmp_path / "ktsplugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from kafka_tiered_source.storage.fetcher import ObjectStoreFetcher
        class EchoFetcher(ObjectStoreFetcher):
            backend = "echo"
            def _get_object_range(self, key, start, end):
                data = key.encode()
                return data[start:] if end is None else data[start:end]
    """))
    dist = tmp_path / "ktsplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ktsplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kafka_tiered_source.fetchers]\necho = ktsplugin:EchoFetcher\n")
    r = run_py("""
        from kafka_tiered_source.storage import create_fetcher, available_fetchers
        from kafka_tiered_source.storage.segment import RemoteSegment
        f = create_fetcher({"remote.storage.fetcher": "echo", "remote.storage.echo.mode": "loud",
                            "remote.storage.layout": "template", "remote.storage.layout.template": "hello-{topic}"})
        print("echo" in available_fetchers(), type(f).__name__,
              bytes(f.fetch_log_segment(RemoteSegment("w", "MWJ6FHTfRYy67jzwZdeqSQ", 0, "tqimKeZwStOEOwRzT3L5oQ", 0, 1))))
    """, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "EchoFetcher", "b'hello-w'"]


def test_pyproject_declares_the_entry_point_group():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert '[project.entry-points."kafka_tiered_source.fetchers"]' in f.read()
