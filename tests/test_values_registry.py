"""The test Schema Registry (testing/schema_registry.py) as confluent-kafka's SchemaRegistryClient
sees it, and kafka-tiered's registry client against it: compatibility checks, basic auth, bearer
tokens, TLS with a client certificate, retries and named errors.  No broker: the registry alone."""
from __future__ import annotations

import json
import ssl

import pytest

import tls_material as tm

from kafka_tiered_source.errors import (ConfigError, SchemaNotFoundError, SchemaRegistryError,
                                        SchemaRegistryUnavailableError)
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.protocol import tls
from kafka_tiered_source.protocol.keystores import StoreOptions
from kafka_tiered_source.testing.schema_registry import SchemaRegistry
from kafka_tiered_source.values.registry import RegistryClient

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "value.format": "json"}
V1 = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
V2 = {"type": "object", "properties": {"id": {"type": "integer"}, "amount": {"type": "number"}}}
BREAKS = {"type": "object", "properties": {"id": {"type": "string"}}}


def client(url: str, **extra) -> RegistryClient:
    return RegistryClient(ReadOptions.parse({**BASE, "schema.registry.url": url,
                                             "schema.registry.retries.wait.ms": "1", **extra}).values)


def test_confluent_client_registers_checks_compatibility_and_reads_back():
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError as CkError
    with SchemaRegistry() as reg:
        ck = SchemaRegistryClient({"url": reg.url})
        first = ck.register_schema("t-value", Schema(json.dumps(V1), "JSON"))
        assert ck.register_schema("t-value", Schema(json.dumps(V1), "JSON")) == first    # the same id again
        assert ck.test_compatibility("t-value", Schema(json.dumps(V2), "JSON"))
        assert not ck.test_compatibility("t-value", Schema(json.dumps(BREAKS), "JSON"))
        with pytest.raises(CkError) as info:
            ck.register_schema("t-value", Schema(json.dumps(BREAKS), "JSON"))
        assert info.value.http_status_code == 409
        second = ck.register_schema("t-value", Schema(json.dumps(V2), "JSON"))
        assert ck.get_latest_version("t-value").schema_id == second != first
        assert ck.get_versions("t-value") == [1, 2]
        assert json.loads(ck.get_schema(first).schema_str) == V1
        assert ck.lookup_schema("t-value", Schema(json.dumps(V1), "JSON")).version == 1
        ck.set_compatibility("t-value", "NONE")
        assert ck.register_schema("t-value", Schema(json.dumps(BREAKS), "JSON")) not in (first, second)
        with pytest.raises(CkError) as missing:
            ck.get_schema(4242)
        assert (missing.value.http_status_code, missing.value.error_code) == (404, 40403)
        # and kafka-tiered's client reads the same
        ours = client(reg.url)
        assert json.loads(ours.schema(first).text) == V1 and ours.schema(first).kind == "json"
        assert ours.version("t-value", None).version == 3
        with pytest.raises(SchemaNotFoundError) as ours_missing:
            ours.schema(4242)
        assert ours_missing.value.error_code == 40403


def test_basic_auth_and_bearer_tokens():
    with SchemaRegistry(users={"reader": "pw-Q7"}, tokens={"tok-3"}) as reg:
        reg.store.register("t-value", {"schema": json.dumps(V1), "schemaType": "JSON"})
        assert client(reg.url, **{"basic.auth.user.info": "reader:pw-Q7"}).schema(1).kind == "json"
        with_url = reg.url.replace("://", "://reader:pw-Q7@")
        assert client(with_url, **{"basic.auth.credentials.source": "URL"}).schema(1).kind == "json"
        assert client(reg.url, **{"bearer.auth.credentials.source": "STATIC_TOKEN",
                                  "bearer.auth.token": "tok-3"}).schema(1).kind == "json"
        with pytest.raises(SchemaRegistryError) as info:
            client(with_url.replace("pw-Q7", "wrong-X1"), **{"basic.auth.credentials.source": "URL"}).schema(1)
        assert info.value.status == 401 and "basic.auth.user.info" in str(info.value)
        assert "wrong-X1" not in str(info.value) and "reader" not in str(info.value)
        assert reg.requests[("GET", "/schemas/ids/1")] == 4       # a 401 is not retried


def test_tls_with_a_client_certificate():
    key = StoreOptions(location=tm.path("broker.p12"), password=tm.BROKER_PW, names={
        "type": "t", "location": "l", "password": "p", "key.password": "k", "certificates": "c", "key": "k"})
    trust = StoreOptions(location=tm.CA_PEM, names={"type": "t", "location": "l", "password": "p",
                                                    "certificates": "c"})
    with SchemaRegistry(ssl_context=tls.server_context(key, trust, "required")) as reg:
        reg.store.register("t-value", {"schema": json.dumps(V1), "schemaType": "JSON"})
        url = reg.url.replace("127.0.0.1", "localhost")
        mtls = {"schema.registry.ssl.ca.location": tm.CA_PEM,
                "schema.registry.ssl.certificate.location": tm.path("client-chain.pem"),
                "schema.registry.ssl.key.location": tm.path("client-key.pem")}
        assert client(url, **mtls).schema(1).kind == "json"
        # no client certificate: the handshake fails, named as the registry being unreachable
        with pytest.raises(SchemaRegistryUnavailableError):
            client(url, **{"schema.registry.ssl.ca.location": tm.CA_PEM, "schema.registry.max.retries": "0"}).schema(1)
        with pytest.raises(ConfigError) as bad:
            client(url, **{**mtls, "schema.registry.ssl.ca.location": "/nonexistent/ca.pem"})
        assert bad.value.option == "schema.registry.ssl.ca.location"


def test_outages_are_retried_then_named():
    reg = SchemaRegistry().start()
    reg.store.register("t-value", {"schema": json.dumps(V1), "schemaType": "JSON"})
    ours = client(reg.url, **{"schema.registry.max.retries": "2"})
    reg.stop()
    with pytest.raises(SchemaRegistryUnavailableError) as info:
        ours.schema(1)
    assert "3 attempt(s)" in str(info.value) and ours.requests == 3
    reg.start()
    try:
        assert ours.schema(1).kind == "json"      # a failure is not kept: it is asked again
    finally:
        reg.stop()


def test_kafka_tiered_broker_serves_the_registry(tmp_path):
    """``kafka-tiered broker --schema-registry-port 0``: the registry answers beside the broker, and
    keeps its schemas in the data directory (a restarted broker serves them again)."""
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    from kafka_tiered_source.testing.schema_registry import SchemaStore
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from kafka_tiered_source.cli import main; sys.exit(main(sys.argv[1:]))",
         "broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--schema-registry-port", "0",
         "--log-level", "WARNING"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=root), cwd=root)
    try:
        assert proc.stdout.readline().startswith("bootstrap servers: 127.0.0.1:")
        line = proc.stdout.readline()
        assert line.startswith("schema registry: http://127.0.0.1:"), (line, proc.stderr.read())
        ours = client(line.split(": ", 1)[1].strip())
        body = json.dumps({"schema": json.dumps(V1), "schemaType": "JSON"}).encode()
        req = urllib.request.Request(f"{ours.urls[0]}/subjects/t-value/versions", body, method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(req, timeout=10) as answer:
            assert json.loads(answer.read()) == {"id": 1}
        assert json.loads(ours.version("t-value", None).text) == V1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    kept = SchemaStore()
    kept.load(str(tmp_path / "d" / "schema-registry.json"))
    assert json.loads(kept.by_id(1)["schema"]) == V1 and kept.version("t-value", "latest")["id"] == 1


def test_reader_schemas_of_several_topics_and_sasl_inherited_credentials():
    from kafka_tiered_source.values.readers import resolve_readers
    sasl = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                      'username="reader" password="pw-Q7";'}
    with SchemaRegistry(users={"reader": "pw-Q7"}) as reg:
        for subject, schema in (("a-value", V1), ("b-value", V1), ("c-value", V2)):
            reg.store.register(subject, {"schema": json.dumps(schema), "schemaType": "JSON"})
        base = {**BASE, **sasl, "schema.registry.url": reg.url, "basic.auth.credentials.source": "SASL_INHERIT"}
        same = resolve_readers(ReadOptions.parse({**base, "subscribe": "a,b"})).values.readers.value
        assert json.loads(same.text) == V1 and same.schema_id == 1
        with pytest.raises(ConfigError) as info:
            resolve_readers(ReadOptions.parse({**base, "subscribe": "a,c"}))
        assert "a-value (id 1)" in str(info.value) and "c-value (id 2)" in str(info.value)
        pinned = resolve_readers(ReadOptions.parse({**base, "subscribe": "a,c", "value.schema.subject": "c-value",
                                                    "value.schema.version": "1"})).values.readers.value
        assert (pinned.subject, pinned.version, pinned.schema_id) == ("c-value", 1, 2)
        with pytest.raises(SchemaNotFoundError):
            resolve_readers(ReadOptions.parse({**base, "subscribe": "a", "value.schema.version": "9"}))


def test_the_registry_host_name_is_checked_as_the_brokers_is(tmp_path):
    """A registry whose certificate names only localhost, reached as 127.0.0.1: https and LDAPS
    refuse it (the brokers' rule, protocol/tls.py), the empty algorithm connects."""
    cert, key = tm.self_signed("localhost")
    (tmp_path / "cert.pem").write_text(cert)
    (tmp_path / "key.pem").write_text(key)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    with SchemaRegistry(ssl_context=server) as reg:
        reg.store.register("t-value", {"schema": json.dumps(V1), "schemaType": "JSON"})
        assert "127.0.0.1" in reg.url
        trust = {"schema.registry.ssl.ca.location": str(tmp_path / "cert.pem"), "schema.registry.max.retries": "0"}
        for algorithm in ("https", "LDAPS"):
            with pytest.raises(SchemaRegistryUnavailableError) as wrong_host:
                client(reg.url, **trust, **{"schema.registry.ssl.endpoint.identification.algorithm": algorithm}
                       ).schema(1)
            assert "127.0.0.1" in str(wrong_host.value), str(wrong_host.value)
        assert client(reg.url, **trust, **{"schema.registry.ssl.endpoint.identification.algorithm": ""}
                      ).schema(1).kind == "json"
