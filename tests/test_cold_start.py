"""A new process's fixed cost before its first plan (issue 36): what it builds at import and the
connections its first plan opens, counted in a new interpreter against the embedded broker."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from broker_fixtures import fixture_segments

from kafka_tiered_source.testing import EmbeddedCluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The child: import what a first plan imports and say what got built, then plan once per locator
# and count its connections (CPython's socket.connect audit events).
CHILD = r"""
import json, sys
connects = []
sys.addaudithook(lambda ev, args: connects.append(args[1][:2]) if ev == "socket.connect" else None)
import kafka_tiered_source
from kafka_tiered_source.options import ClientConfig, FetcherConfig, ReadOptions
from kafka_tiered_source.planning import checked, estimate, online
from kafka_tiered_source.protocol import client, connection, messages
out = {"built_at_import": sorted(n for n in vars(messages) if n.endswith(("Request", "Response"))),
       "dataclasses": [c.__name__ for c in (ReadOptions, FetcherConfig, ClientConfig) if "__dataclass_fields__" in dir(c)],
       "plans": {}}
opts = json.loads(sys.argv[1])
for locator in ("kip1248", "metadata-topic"):
    connects.clear()
    kafka_tiered_source.estimate(None, {**opts, "remote.segment.locator": locator})
    out["plans"][locator] = [list(c) for c in connects]
    out.setdefault("catalog_imported", "kafka_tiered_source.planning.metadata_topic" in sys.modules)
out["built"] = sorted(messages.CLASSES.built())
out["stdlib"] = sorted(m for m in ("dataclasses", "inspect", "logging", "encodings.idna") if m in sys.modules)
print(json.dumps(out))
"""


def test_a_first_plan_builds_only_what_it_uses_and_opens_one_connection_per_broker(tmp_path):
    """Importing planning builds no Kafka message class and no dataclass config (both are made
    on first use, or written out by the option codegen); a first plan then builds only the
    messages a plan speaks (never Produce, transactions, groups or SASL on a plain connection),
    and opens one connection to the cluster's one broker, the bootstrap connection adopted as
    that broker's, with either locator.  A KIP-1248 plan never imports the metadata-topic
    locator (nor the catalog under it); neither plan imports ``dataclasses``, ``inspect``,
    ``logging`` nor the idna codec."""
    remote = tmp_path / "remote"
    c = EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{remote}").start()
    try:
        c.import_log_dir("payments", 0, fixture_segments("payments", 0))
        assert c.tier()
        opts = {"kafka.bootstrap.servers": c.bootstrap_servers, "assign": json.dumps({"payments": [0]}),
                "remote.storage.uri": f"file://{remote}"}
        env = {k: v for k, v in os.environ.items() if k != "KAFKA_TIERED_CACHE_DIR"}
        env["KAFKA_TIERED_CACHE_DIR"] = str(tmp_path / "catalog")
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(opts)], capture_output=True, text=True,
                              cwd=ROOT, env=env, check=True)
        got = json.loads(done.stdout)
        port = c.port
    finally:
        c.stop()
    assert got["built_at_import"] == [] and got["dataclasses"] == []
    assert got["catalog_imported"] is False
    # what a plan never needs (and a new process would pay ~25 ms for): dataclasses (and the
    # inspect it imports) for classes made by kafka_tiered_source.dataclass, logging while
    # nothing is logged at WARNING (kafka_tiered_source.logs), the idna codec for a broker's
    # ASCII name
    assert got["stdlib"] == []
    for locator, connects in got["plans"].items():
        assert connects == [["127.0.0.1", port]], (locator, connects)
    unused = {"Produce", "InitProducerId", "AddPartitionsToTxn", "EndTxn", "FindCoordinator", "OffsetFetch",
              "OffsetCommit", "SaslHandshake", "SaslAuthenticate", "DescribeConfigs", "PushTelemetry"}
    assert not {n for n in got["built"] if n.removesuffix("Request").removesuffix("Response") in unused}, got["built"]
    assert {"FetchRequest", "MetadataRequest", "ListOffsetsRequest"} <= set(got["built"])


def test_the_cli_formatter_is_as_wide_as_shutils_and_building_a_parser_imports_no_shutil(monkeypatch):
    """The CLI's help formatter finds its width as ``shutil.get_terminal_size`` does ($COLUMNS,
    else the terminal, else 80), and making a command's parser imports neither ``shutil`` (argparse
    would, for every argument added) nor ``logging`` nor ``dataclasses``."""
    import shutil

    from kafka_tiered_source.cli import terminal_columns
    for columns, lines in [(None, None), ("120", None), ("50", "10"), ("abc", None), ("0", "5"), ("-3", "x")]:
        for name, value in (("COLUMNS", columns), ("LINES", lines)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        assert terminal_columns() == shutil.get_terminal_size().columns, (columns, lines)
    code = ("import sys; from kafka_tiered_source.cli import build_parser; build_parser('estimate'); "
            "print(sorted(m for m in ('shutil', 'logging', 'dataclasses') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"
