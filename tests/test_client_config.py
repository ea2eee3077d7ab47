"""ClientConfig: Kafka key names in, a frozen typed config out; secrets never shown."""
import dataclasses

import pytest

from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.protocol.client import IGNORED_KEYS, READ_COMMITTED, BrokerClient, ClientConfig
from kafka_tiered_source.redact import Secret

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="svc-reader" password="Pa55\\"word";')


def test_full_properties_parse_to_typed_values():
    cfg = ClientConfig.from_properties({
        "bootstrap.servers": "b1:9092, b2:9093", "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS, "ssl.cafile": "/ca.pem",
        "ssl.check.hostname": "false", "client.id": "spark-1", "request.timeout.ms": "1500",
        "kafka.isolation.level": "read_committed", "connections.max.idle.ms": "1000",
        "group.id": "ignored-group",
    })
    assert cfg.bootstrap_servers == (("b1", 9092), ("b2", 9093))
    assert cfg.security_protocol == "SASL_SSL" and cfg.uses_sasl and cfg.uses_ssl
    assert cfg.sasl_mechanism == "SCRAM-SHA-512"
    assert cfg.sasl_username == "svc-reader" and cfg.sasl_password == Secret('Pa55"word')
    assert cfg.ssl_cafile == "/ca.pem" and cfg.ssl_check_hostname is False
    assert cfg.request_timeout_ms == 1500 and cfg.isolation_level == READ_COMMITTED
    assert cfg.connections_max_idle_ms == 1000
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.client_id = "x"


def test_secrets_never_in_repr():
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1", "security.protocol": "SASL_PLAINTEXT",
                                        "sasl.jaas.config": JAAS, "ssl.key.password": "keypw123"})
    text = repr(cfg) + str(cfg) + repr(BrokerClient(cfg))
    assert "Pa55" not in text and "keypw123" not in text and "***" in text


@pytest.mark.parametrize("props,option", [
    ({"bootstrap.servers": "b:1", "fetch.speed": "fast"}, "fetch.speed"),
    ({"bootstrap.servers": "b:1", "security.protocol": "TLS"}, "security.protocol"),
    ({"bootstrap.servers": "b:1", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
    ({"bootstrap.servers": "nohostport"}, "bootstrap.servers"),
    ({"client.id": "x"}, "bootstrap.servers"),
    ({"bootstrap.servers": "b:1", "request.timeout.ms": "soon"}, "request.timeout.ms"),
    ({"bootstrap.servers": "b:1", "ssl.check.hostname": "maybe"}, "ssl.check.hostname"),
    ({"bootstrap.servers": "b:1", "isolation.level": "dirty"}, "isolation.level"),
    ({"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL"}, "sasl.jaas.config"),
    ({"bootstrap.servers": "b:1", "ssl.cafile": "/ca.pem", "ssl.truststore.location": "/x.jks"}, "ssl.cafile"),
])
def test_bad_options_are_named(props, option):
    with pytest.raises(ConfigError) as ei:
        ClientConfig.from_properties(props)
    assert ei.value.option == option and option in str(ei.value)


def test_bad_jaas_does_not_echo_the_text():
    with pytest.raises(ConfigError) as ei:
        ClientConfig.from_properties({"bootstrap.servers": "b:1", "security.protocol": "SASL_PLAINTEXT",
                                      "sasl.jaas.config": "PlainLoginModule required user=\"u\" pw=\"TOPSECRET\";"})
    assert "TOPSECRET" not in str(ei.value) and ei.value.option == "sasl.jaas.config"


def test_ignored_consumer_keys_are_documented_and_accepted():
    assert {"group.id", "enable.auto.commit", "key.deserializer"} <= IGNORED_KEYS
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1", **{k: "x" for k in IGNORED_KEYS}})
    assert cfg.bootstrap_servers == (("b", 1),)


def test_endpoint_identification_algorithm_maps_to_hostname_check():
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1", "ssl.endpoint.identification.algorithm": ""})
    assert cfg.ssl_check_hostname is False
    assert ClientConfig.from_properties({"bootstrap.servers": "b:1"}).ssl_check_hostname is True


@pytest.mark.parametrize("text,want", [("true", True), (" TRUE ", True), ("1", True), ("Yes", True),
                                       ("false", False), ("0", False), ("no", False), ("on", None)])
def test_ssl_check_hostname_takes_kafka_booleans(text, want):
    props = {"bootstrap.servers": "b:1", "ssl.check.hostname": text}
    if want is None:
        with pytest.raises(ConfigError, match=r"^ssl\.check\.hostname must be true or false, got 'on'$"):
            ClientConfig.from_properties(props)
    else:
        assert ClientConfig.from_properties(props).ssl_check_hostname is want
