"""``ssl.endpoint.identification.algorithm`` as Kafka's Java client takes it, on every TLS
connection the library opens: brokers, the OAuth token endpoint, and any other client of
``tls.client_tls`` (a schema registry's, in the last test).

The peer's certificate names ``localhost`` only and the client reaches it as 127.0.0.1 (another
host): ``https`` in any case and ``LDAPS`` refuse the handshake, the empty value connects with one
warning, a misspelt value is refused by name when the options are parsed.  The fixture broker's
certificate also names 127.0.0.1, and LDAPS accepts it.  Java's LDAP rule itself (wildcards in the
leftmost label only, IP addresses against IP names only ...) is checked on certificate contents
in the table at the end, its expectations taken from RFC 2830 3.6 and HostnameChecker's rules."""
from __future__ import annotations

import logging
import ssl

import pytest

from tls_material import TRUSTSTORES, broker_ssl, self_signed

from kafka_tiered_source.errors import BrokerError, ConfigError, SaslError
from kafka_tiered_source.options import ClientConfig, ReadOptions
from kafka_tiered_source.options.tls import TlsSettings
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.protocol.hostnames import HostnameMismatch, check_ldap
from kafka_tiered_source.protocol.oauth import forget_tokens, token_source
from kafka_tiered_source.protocol.tls import client_tls
from kafka_tiered_source.testing import EmbeddedCluster
from kafka_tiered_source.testing.oauth_server import OAuthServer

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
ALGORITHM = "ssl.endpoint.identification.algorithm"
WARNING = "is empty: the host name of"


@pytest.fixture(scope="module")
def localhost_cert(tmp_path_factory):
    """A self-signed certificate naming only 'localhost', its files and its trust options."""
    d = tmp_path_factory.mktemp("localhost-cert")
    cert, key = self_signed("localhost")
    (d / "cert.pem").write_text(cert)
    (d / "key.pem").write_text(key)
    return {"cert": str(d / "cert.pem"), "key": str(d / "key.pem"),
            "trust": {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": cert}}


@pytest.fixture(scope="module")
def other_host_broker(tmp_path_factory, localhost_cert):
    with EmbeddedCluster(str(tmp_path_factory.mktemp("other-host")),
                         ssl={"certfile": localhost_cert["cert"], "keyfile": localhost_cert["key"]}) as c:
        c.create_topic("t")
        yield c


def _props(c, trust: dict, **more) -> dict:
    return {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SSL", "retries": "0", **trust, **more}


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and WARNING in r.getMessage()]


@pytest.mark.parametrize("value", ["https", "HTTPS", "LDAPS"])
def test_a_broker_certificate_for_another_host_is_refused(other_host_broker, localhost_cert, value):
    props = _props(other_host_broker, localhost_cert["trust"], **{ALGORITHM: value})
    with pytest.raises(BrokerError) as ei, BrokerClient(props) as client:
        client.topic("t")
    msg = str(ei.value)
    assert "does not name the host '127.0.0.1'" in msg and ALGORITHM in msg, msg
    assert not ei.value.retriable
    if value == "LDAPS":
        assert "LDAP rule" in msg and "IP address" in msg, msg


def test_the_empty_value_connects_with_one_warning(other_host_broker, localhost_cert, caplog):
    caplog.set_level(logging.WARNING, logger="kafka_tiered_source")
    props = _props(other_host_broker, localhost_cert["trust"], **{ALGORITHM: ""})
    for _ in range(2):                      # two clients, several connections: one warning
        with BrokerClient(props) as client:
            assert client.topic("t").partitions
    warned = _warnings(caplog)
    assert len(warned) == 1 and "the broker" in warned[0], warned


@pytest.mark.parametrize("value", ["htps", "none", "LDAPS2", "false"])
def test_a_misspelt_value_is_refused_by_name_when_options_are_parsed(other_host_broker, localhost_cert, value):
    with pytest.raises(ConfigError) as ei:
        ClientConfig.from_properties(_props(other_host_broker, localhost_cert["trust"], **{ALGORITHM: value}))
    assert ei.value.option == ALGORITHM and repr(value) in str(ei.value)
    with pytest.raises(ConfigError) as ei:
        ReadOptions.parse({"kafka.bootstrap.servers": other_host_broker.bootstrap_servers, "subscribe": "t",
                           f"kafka.{ALGORITHM}": value})
    assert ei.value.option == f"kafka.{ALGORITHM}"


@pytest.mark.parametrize("settings,refused", [
    ({"ssl.check.hostname": "false", ALGORITHM: "https"}, True),
    ({ALGORITHM: "", "ssl.check.hostname": "true"}, True),
    ({f"kafka.{ALGORITHM}": "LDAPS", ALGORITHM: "https"}, True),
    ({f"kafka.{ALGORITHM}": "", ALGORITHM: "HTTPS"}, True),
    ({"ssl.check.hostname": "true", ALGORITHM: "LDAPS"}, False),
    ({"ssl.check.hostname": "no", ALGORITHM: ""}, False),
    ({f"kafka.{ALGORITHM}": "ldap", ALGORITHM: "LDAPS"}, False),
])
def test_two_host_name_settings_must_agree(settings, refused):
    props = {"bootstrap.servers": "127.0.0.1:9", **settings}
    if not refused:
        cfg = ClientConfig.from_properties(props)
        # the Java name decides the rule; kafka-python's boolean only agrees with it
        assert cfg.ssl_endpoint_identification_algorithm == settings[ALGORITHM].lower()
        return
    with pytest.raises(ConfigError) as ei:
        ClientConfig.from_properties(props)
    msg = str(ei.value)
    assert "disagree" in msg and all(k in msg for k in settings), msg


def test_ldaps_accepts_a_certificate_that_names_the_address(tmp_path):
    """The fixture broker's certificate names 127.0.0.1 (an IP address name): LDAP and LDAPS
    connect, so the refusals above are about the name, not the rule."""
    with EmbeddedCluster(str(tmp_path / "d"), ssl=broker_ssl()) as c:
        c.create_topic("t")
        for value in ("LDAPS", "ldap"):
            with BrokerClient(_props(c, TRUSTSTORES["pem-file"], **{ALGORITHM: value})) as client:
                assert client.topic("t").partitions


# -- the token endpoint, and any other HTTPS client ------------------------------------------

@pytest.fixture(scope="module")
def other_host_idp(localhost_cert):
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(localhost_cert["cert"], localhost_cert["key"])
    with OAuthServer({"reader": "idp-secret-Hn47"}, ssl_context=server) as idp:
        yield idp


def _oauth(idp, cert_file: str, algorithm: str | None) -> dict:
    tls = f' ssl.truststore.type="PEM" ssl.truststore.location="{cert_file}"'
    if algorithm is not None:
        tls += f' {ALGORITHM}="{algorithm}"'
    return {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url,
            "sasl.jaas.config": f'{MODULE} required clientId="reader" clientSecret="idp-secret-Hn47"{tls};'}


@pytest.mark.parametrize("value", [None, "HTTPS", "LDAPS", "", "htps"])
def test_the_token_endpoint_follows_the_same_rule(other_host_idp, localhost_cert, caplog, value):
    """Its rule is the ssl.* of sasl.jaas.config (Kafka's JaasOptionsUtils): https by default."""
    forget_tokens()
    caplog.set_level(logging.WARNING, logger="kafka_tiered_source")
    props = _oauth(other_host_idp, localhost_cert["cert"], value)
    if value == "htps":
        with pytest.raises(ConfigError) as ei:
            ClientConfig.from_properties(props)
        assert ei.value.option == f"{ALGORITHM} (in sasl.jaas.config)", ei.value.option
        return
    source = token_source(ClientConfig.from_properties(props).oauth)
    issued = other_host_idp.issued.get("reader", 0)
    try:
        if value == "":
            assert source.token().principal == "reader"
            assert other_host_idp.issued["reader"] == issued + 1
            warned = _warnings(caplog)
            assert len(warned) == 1 and "(in sasl.jaas.config)" in warned[0] and "token endpoint" in warned[0]
            return
        with pytest.raises(SaslError) as ei:
            source.token()
        assert "does not name the host '127.0.0.1'" in str(ei.value), str(ei.value)
        assert other_host_idp.issued.get("reader", 0) == issued
    finally:
        forget_tokens()


def test_another_https_client_gets_the_same_rule_from_client_tls(other_host_idp, localhost_cert, caplog):
    """What a schema-registry client does: its own ssl.* options, named its way, parsed into
    TlsSettings, and one call for the context and the host-name rule."""
    caplog.set_level(logging.WARNING, logger="kafka_tiered_source")
    host, port = "127.0.0.1", int(other_host_idp.base_url.rsplit(":", 1)[1])
    base = {"ssl.truststore.type": "PEM", "ssl.truststore.location": localhost_cert["cert"]}

    def get(algorithm: str) -> int:
        settings = TlsSettings.parse({**base, ALGORITHM: algorithm}, names="schema.registry.{}",
                                     peer="the schema registry")
        conn = client_tls(settings).https_connection(host, port, timeout=10)
        try:
            conn.request("GET", "/jwks")
            return conn.getresponse().status
        finally:
            conn.close()

    for algorithm in ("https", "LDAPS"):
        with pytest.raises(ssl.SSLCertVerificationError):
            get(algorithm)
    assert get("") == 200
    warned = _warnings(caplog)
    assert len(warned) == 1 and f"schema.registry.{ALGORITHM}" in warned[0] and "schema registry" in warned[0]
    with pytest.raises(ConfigError) as ei:
        TlsSettings.parse({**base, ALGORITHM: "htps"}, names="schema.registry.{}")
    assert ei.value.option == f"schema.registry.{ALGORITHM}"


# -- Java's LDAP rule on certificate contents --------------------------------------------------

def _cert(*sans, cn=None):
    """getpeercert()'s dict: ``sans`` as ('DNS' | 'IP Address', value)."""
    out: dict = {"subject": ((("organizationName", "kafka-tiered"),),) + (((("commonName", cn),),) if cn else ())}
    if sans:
        out["subjectAltName"] = tuple(sans)
    return out


DNS, IP = "DNS", "IP Address"
# (host, certificate, public CA, matches): RFC 2830 3.6 and HostnameChecker's TYPE_LDAP rules
LDAP_CASES = {
    "exact name, any case": ("Broker-1.Kafka.Example", _cert((DNS, "broker-1.kafka.example")), False, True),
    "wildcard leftmost label": ("broker-1.kafka.example", _cert((DNS, "*.kafka.example")), False, True),
    "partial wildcard in the leftmost label (https refuses it)":
        ("broker-1.kafka.example", _cert((DNS, "b*-1.kafka.example")), False, True),
    "a wildcard may match nothing": ("b.kafka.example", _cert((DNS, "b*.kafka.example")), False, True),
    "wildcard in a later label (Java's https takes it)":
        ("a.b.kafka.example", _cert((DNS, "a.*.kafka.example")), False, False),
    "wildcard covers one label only": ("x.y.kafka.example", _cert((DNS, "*.kafka.example")), False, False),
    "wildcard needs a label": ("kafka.example", _cert((DNS, "*.kafka.example")), False, False),
    "a lone wildcard": ("broker.kafka.example", _cert((DNS, "*")), False, False),
    "no dot after the wildcard": ("broker.com", _cert((DNS, "*com")), False, False),
    "a wildcard over a top-level domain, private CA": ("kafka.example", _cert((DNS, "*.example")), False, True),
    "a wildcard over a top-level domain, public CA": ("kafka.example", _cert((DNS, "*.example")), True, False),
    "the common name when there is no DNS name": ("broker.kafka.example", _cert(cn="broker.kafka.example"), False, True),
    "the common name is ignored beside DNS names":
        ("broker.kafka.example", _cert((DNS, "other.kafka.example"), cn="broker.kafka.example"), False, False),
    "the most specific common name": ("b2.kafka.example", {"subject": ((("commonName", "b1.kafka.example"),),
                                                                        (("commonName", "b2.kafka.example"),))},
                                      False, True),
    "an address against IP names": ("192.0.2.7", _cert((DNS, "x.example"), (IP, "192.0.2.7")), False, True),
    "an address never against DNS names": ("192.0.2.7", _cert((DNS, "192.0.2.7")), False, False),
    "an address never against the common name": ("192.0.2.7", _cert(cn="192.0.2.7"), False, False),
    "IPv6, long form in the certificate": ("::1", _cert((IP, "0:0:0:0:0:0:0:1")), False, True),
    "IPv6 in brackets": ("[2001:db8::5]", _cert((IP, "2001:DB8:0:0:0:0:0:5")), False, True),
    "an underscore is not a domain name": ("broker_1.kafka.example", _cert((DNS, "broker_1.kafka.example")),
                                           False, False),
    "a trailing dot is not a domain name": ("broker.kafka.example.", _cert((DNS, "broker.kafka.example.")),
                                            False, False),
    "internationalised names compare after IDNA": ("bücher.example", _cert((DNS, "xn--bcher-kva.example")),
                                                    False, True),
}


@pytest.mark.parametrize("case", sorted(LDAP_CASES))
def test_javas_ldap_rule(case):
    host, cert, public_ca, matches = LDAP_CASES[case]
    if matches:
        check_ldap(host, cert, public_ca=public_ca)
    else:
        with pytest.raises(HostnameMismatch) as ei:
            check_ldap(host, cert, public_ca=public_ca)
        assert ei.value.verify_code == 62 and "LDAP rule" in str(ei.value)


def test_a_common_name_not_in_nfkc_form_is_refused():
    with pytest.raises(HostnameMismatch, match="NFKC"):
        check_ldap("broker.kafka.example", _cert(cn="broker.kafka.example\ufb01"), public_ca=False)

