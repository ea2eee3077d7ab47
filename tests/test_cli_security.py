"""The command line on secured clusters: ``estimate`` and ``segments`` take the Kafka client's
security options (``-o kafka.*``, or ``--command-config client.properties`` as Kafka's tools
do), ``broker`` takes the listener's (``--config`` with Kafka's broker names).  One mutual-TLS
cluster and one OAUTHBEARER cluster (orders-1 of the fixtures, tiered) for the first two; the
broker command runs as a process of its own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from broker_fixtures import FIXTURE_META, import_and_tier
from tls_material import BROKER_PW, CA_PEM, CLIENT_KEY_PW, CLIENT_STORE_PW, TRUST_PW, broker_ssl, path

from kafka_tiered_source.cli import main
from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.protocol.oauth import forget_tokens
from kafka_tiered_source.testing import EmbeddedCluster
from kafka_tiered_source.testing.oauth_server import OAuthServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
SECRET = "cli-client-secret-Pw27"
ORDERS1 = FIXTURE_META[("orders", 1)]


@pytest.fixture(scope="module")
def idp():
    with OAuthServer({"reader": SECRET}) as s:
        yield s


def _cluster(base, **kwargs):
    c = EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", **kwargs).start()
    import_and_tier(c, [("orders", 1)])
    c.remote_uri = f"file://{base}/remote"
    return c


@pytest.fixture(scope="module")
def mtls(tmp_path_factory):
    c = _cluster(tmp_path_factory.mktemp("cli-mtls"), ssl=broker_ssl("required"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def oauth(tmp_path_factory, idp):
    c = _cluster(tmp_path_factory.mktemp("cli-oauth"), ssl=broker_ssl(), sasl={
        "mechanism": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": "kafka"})
    yield c
    c.stop()


def run(capsys, *argv) -> tuple[int, str, str]:
    forget_tokens()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


MTLS_PROPS = {"security.protocol": "SSL", "ssl.truststore.location": path("truststore.jks"),
              "ssl.truststore.password": TRUST_PW, "ssl.keystore.location": path("client.jks"),
              "ssl.keystore.password": CLIENT_STORE_PW, "ssl.key.password": CLIENT_KEY_PW}


def _check_orders1(report: dict) -> None:
    part = report["partitions"]["orders-1"]
    assert (part["start"], part["end"]) == (ORDERS1["logStartOffset"], ORDERS1["highWatermark"])
    assert part["segments"] > 0


def test_estimate_over_mtls_with_kafka_options(capsys, mtls):
    args = ["estimate", "--bootstrap-servers", mtls.bootstrap_servers, "--topic", "orders",
            "--remote-storage-uri", mtls.remote_uri, "--json"]
    code, out, err = run(capsys, *args, *[a for k, v in MTLS_PROPS.items() for a in ("-o", f"kafka.{k}={v}")])
    assert code == 0, err
    _check_orders1(json.loads(out))
    code, _, err = run(capsys, *args, "-o", "kafka.security.protocol=SSL", "-o", f"kafka.ssl.cafile={CA_PEM}")
    assert code == 2 and "requires a client certificate" in err and "ssl.keystore.location" in err


def test_segments_and_estimate_with_a_command_config_file(capsys, oauth, idp, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text(
        "# as for kafka-console-consumer --consumer.config\n"
        "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={CA_PEM}\n"
        f"sasl.login.callback.handler.class={HANDLER}\n"
        f"sasl.oauthbearer.token.endpoint.url={idp.token_endpoint_url}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\\n"
        f"    clientId=\"reader\" \\\n    clientSecret=\"{SECRET}\" ;\n")
    common = ["--bootstrap-servers", oauth.bootstrap_servers, "--topic", "orders",
              "--remote-storage-uri", oauth.remote_uri, "--command-config", str(props)]
    code, out, err = run(capsys, "segments", *common, "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["base_offset"] for r in rows if r["tiered"]] == \
        [s["baseOffset"] for s in ORDERS1["segments"][:len([r for r in rows if r["tiered"]])]]
    code, out, err = run(capsys, "estimate", *common, "--json")
    assert code == 0, err
    _check_orders1(json.loads(out))
    assert SECRET not in out + err
    # a wrong secret in the file: named, not shown
    props.write_text(props.read_text().replace(SECRET, "not-the-secret-Kx1"))
    code, out, err = run(capsys, "estimate", *common)
    assert code == 2 and "HTTP 401" in err and "not-the-secret-Kx1" not in out + err


def _broker_process(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from kafka_tiered_source.cli import main; sys.exit(main(sys.argv[1:]))",
         "broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--topic", "secured:1",
         "--log-level", "WARNING", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    line = proc.stdout.readline()
    if not line.startswith("bootstrap servers: 127.0.0.1:"):
        proc.kill()
        raise AssertionError((line, proc.communicate(timeout=30)))
    return proc, line.split(": ", 1)[1].strip()


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_broker_command_serves_mtls_and_oauthbearer_from_a_config_file(tmp_path, idp):
    config = tmp_path / "server.properties"
    config.write_text(
        f"ssl.keystore.location={path('broker.p12')}\nssl.keystore.password={BROKER_PW}\n"
        f"ssl.truststore.location={CA_PEM}\nssl.client.auth=required\n"
        "sasl.enabled.mechanisms=OAUTHBEARER\n"
        "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n"
        f"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url={idp.jwks_url}\n"
        "sasl.oauthbearer.expected.audience=kafka\n")
    proc, bootstrap = _broker_process(tmp_path, "--config", str(config))
    try:
        client_props = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                        **{k: v for k, v in MTLS_PROPS.items() if k != "security.protocol"},
                        "sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": HANDLER,
                        "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url,
                        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                            f'required clientId="reader" clientSecret="{SECRET}";'}
        forget_tokens()
        with BrokerClient(client_props) as client:
            assert sorted(client.topic("secured").partitions) == [0]
        no_cert = {k: v for k, v in client_props.items() if not k.startswith(("ssl.keystore", "ssl.key."))}
        with pytest.raises(BrokerError, match="requires a client certificate"), BrokerClient(no_cert) as client:
            client.topic("secured")
    finally:
        _stop(proc)


def test_broker_command_refuses_unknown_settings_by_name(tmp_path, capsys):
    config = tmp_path / "server.properties"
    config.write_text(f"ssl.keystore.location={path('broker.p12')}\nssl.keystore.password={BROKER_PW}\n"
                      "ssl.cipher.suitez=x\n")
    from kafka_tiered_source.errors import ConfigError
    with pytest.raises(ConfigError) as ei:
        main(["broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--config", str(config)])
    assert ei.value.option == "ssl.cipher.suitez" and BROKER_PW not in str(ei.value)
    config.write_text("sasl.enabled.mechanisms=OAUTHBEARER\n")
    with pytest.raises(ConfigError, match="sasl.oauthbearer.jwks.endpoint.url"):
        main(["broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--config", str(config)])
