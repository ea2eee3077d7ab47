"""Truststores and keystores as Kafka's ssl.* options give them, and the security options' rules,
without a broker (the reads through each store are in test_tls_reads.py).

The stores are the committed files of tests/fixtures/tls, made by its make.sh with the JDK's
keytool (JKS, PKCS12) and openssl (PEM); nothing here runs either tool.  The JKS reader is
checked against what keytool wrote: the trusted certificate equals the one keytool exported,
and the private key it decrypts is the key keytool converted into the PKCS12 file (read by
``cryptography``, not by our code) and openssl wrote out as PEM."""
from __future__ import annotations

import random
import shutil
import ssl

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12

from tls_material import (CA_PEM, CLIENT_KEY_PW, CLIENT_STORE_PW, KEYSTORES, P12_PW, PASSWORDS, TRUST_PW,
                          TRUSTSTORES, path, self_signed, text)

from kafka_tiered_source import planning
from kafka_tiered_source.cli.properties import parse_properties
from kafka_tiered_source.errors import ConfigError, SaslError
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.options.client import ClientConfig, parse_jaas
from kafka_tiered_source.protocol import tls
from kafka_tiered_source.protocol.keystores import StoreOptions, read_keystore, read_truststore
from kafka_tiered_source.protocol.oauth import BearerToken, parse_token, refresh_at_ms

KEY_NAMES = tls.CLIENT_KEY_NAMES
TRUST_NAMES = tls.CLIENT_TRUST_NAMES
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'clientId="reader" clientSecret="cs-Zq81" scope="kafka";')


def _der(pem: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem)


def _first_cert(pem_text: str) -> bytes:
    return _der(pem_text[:pem_text.index("-----END CERTIFICATE-----") + 25])


def _numbers(key):
    return key.private_numbers()


# ------------------------------------------------------------------------------ JKS vs keytool

def test_jks_truststore_holds_the_certificate_keytool_exported():
    for password in (TRUST_PW, None):     # without a password Java skips the integrity check; so do we
        certs = read_truststore(StoreOptions(location=path("truststore.jks"), password=password, names=TRUST_NAMES))
        assert [c.der for c in certs] == [_der(text("ca.pem"))]
        assert certs[0].subject == "CN=kafka-tiered test CA,O=kafka-tiered"


def test_jks_private_key_is_the_one_keytool_put_in_pkcs12_and_openssl_wrote_as_pem():
    entry = read_keystore(StoreOptions(location=path("client.jks"), password=CLIENT_STORE_PW,
                                       key_password=CLIENT_KEY_PW, names=KEY_NAMES))
    ours = load_pem_private_key(entry.key_pem.encode(), None)
    p12 = pkcs12.load_pkcs12(open(path("client.p12"), "rb").read(), P12_PW.encode())
    openssl_pem = load_pem_private_key(text("client-key.pem").encode(), None)
    assert _numbers(ours) == _numbers(p12.key) == _numbers(openssl_pem)
    assert entry.alias == "client"
    assert [c.der for c in entry.chain] == [_first_cert(text("client-chain.pem")), _der(text("ca.pem"))]
    assert [c.subject for c in entry.chain] == ["CN=reader,OU=analytics,O=kafka-tiered",
                                                "CN=kafka-tiered test CA,O=kafka-tiered"]


def test_jks_ec_key_matches_its_certificate():
    from cryptography import x509
    entry = read_keystore(StoreOptions(location=path("client-ec.jks"), password=CLIENT_STORE_PW, names=KEY_NAMES))
    key = load_pem_private_key(entry.key_pem.encode(), None)
    cert = x509.load_der_x509_certificate(entry.chain[0].der)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    assert entry.chain[0].subject == "CN=reader-ec,O=kafka-tiered"


@pytest.mark.parametrize("form", sorted(KEYSTORES))
def test_every_keystore_form_gives_the_same_client_identity(form):
    """Each form, through the client's own path, yields a context; the RSA forms hold one key."""
    props, _ = KEYSTORES[form]
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1", "security.protocol": "SSL",
                                        **TRUSTSTORES["pem-file"], **props})
    assert isinstance(tls.client_context(cfg), ssl.SSLContext)
    if form not in ("jks-ec", "certfile"):
        trust, keys = tls.client_stores(cfg)
        entry = read_keystore(keys)
        assert _numbers(load_pem_private_key(entry.key_pem.encode(),
                                             entry.key_password.encode() if entry.key_password else None)) \
            == _numbers(load_pem_private_key(text("client-key.pem").encode(), None))


@pytest.mark.parametrize("form", sorted(TRUSTSTORES))
def test_every_truststore_form_trusts_the_ca(form):
    cfg = ClientConfig.from_properties({"bootstrap.servers": "b:1", "security.protocol": "SSL",
                                        **TRUSTSTORES[form]})
    ctx = tls.client_context(cfg)
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("organizationName", "kafka-tiered"),),
                                                          (("commonName", "kafka-tiered test CA"),))]


def test_pem_text_around_blocks_is_ignored_as_kafka_does():
    bag = "Bag Attributes\n    friendlyName: ca\nsubject=/CN=x\n" + text("ca.pem") + "trailing words\n"
    certs = read_truststore(StoreOptions(type="PEM", inline_certificates=bag, names=TRUST_NAMES))
    assert [c.der for c in certs] == [_der(text("ca.pem"))]


# ------------------------------------------------------------------------------ wrong input, by name

def _ssl(**props):
    return {"bootstrap.servers": "b:1", "security.protocol": "SSL", **props}


JKS_KEY = {"ssl.keystore.location": path("client.jks"), "ssl.keystore.password": CLIENT_STORE_PW,
           "ssl.key.password": CLIENT_KEY_PW}
BAD = {
    "jks store password": (_ssl(**{**JKS_KEY, "ssl.keystore.password": "nope-1"}), "ssl.keystore.password",
                           "integrity"),
    "jks key password": (_ssl(**{**JKS_KEY, "ssl.key.password": "nope-2"}), "ssl.key.password", "'client'"),
    "jks key password unset": (_ssl(**{k: v for k, v in JKS_KEY.items() if k != "ssl.key.password"}),
                               "ssl.keystore.password", "ssl.key.password is not set"),
    "pkcs12 password": (_ssl(**{"ssl.keystore.location": path("client.p12"), "ssl.keystore.password": "nope-3"}),
                        "ssl.keystore.password", "client.p12"),
    "pem key password": (_ssl(**{**KEYSTORES["pem-inline-encrypted"][0], "ssl.key.password": "nope-4"}),
                         "ssl.key.password", "ssl.keystore.key"),
    "pem key password missing": (_ssl(**{k: v for k, v in KEYSTORES["pem-inline-encrypted"][0].items()
                                         if k != "ssl.key.password"}), "ssl.key.password", "encrypted"),
    "pem file key password": (_ssl(**{**KEYSTORES["pem-file"][0], "ssl.key.password": "nope-5"}),
                              "ssl.key.password", "client-keystore.pem"),
    "jks truststore password": (_ssl(**{**TRUSTSTORES["jks"], "ssl.truststore.password": "nope-6"}),
                                "ssl.truststore.password", "integrity"),
    "pkcs12 truststore password": (_ssl(**{**TRUSTSTORES["pkcs12"], "ssl.truststore.password": "nope-7"}),
                                   "ssl.truststore.password", "truststore.p12"),
    "pkcs12 truststore without password": (_ssl(**{k: v for k, v in TRUSTSTORES["pkcs12"].items()
                                                   if k != "ssl.truststore.password"}),
                                           "ssl.truststore.password", "without a password"),
    "expired client certificate": (_ssl(**{"ssl.keystore.location": path("expired-client.p12"),
                                           "ssl.keystore.password": P12_PW}), "ssl.keystore.location",
                                   "CN=expired-reader,O=kafka-tiered) expired on"),
    "expired truststore": (_ssl(**{"ssl.truststore.location": path("expired-ca.pem")}),
                           "ssl.truststore.location", "expired"),
    "no private key entry": (_ssl(**{"ssl.keystore.location": path("truststore.jks"),
                                     "ssl.keystore.password": TRUST_PW}), "ssl.keystore.location",
                             "no private key entry"),
    "two private keys": (_ssl(**{"ssl.keystore.location": path("two-keys.jks"),
                                 "ssl.keystore.password": CLIENT_STORE_PW}), "ssl.keystore.location",
                         "aliases second, first"),
    "jceks file": (_ssl(**{"ssl.truststore.location": path("ca.jceks"), "ssl.truststore.password": TRUST_PW}),
                   "ssl.truststore.location", "keytool -importkeystore"),
    "jceks type": (_ssl(**{"ssl.keystore.type": "JCEKS", **JKS_KEY}), "ssl.keystore.type", "keytool"),
    "pem type, jks file": (_ssl(**{**JKS_KEY, "ssl.keystore.type": "PEM"}), "ssl.keystore.type",
                           "is a JKS store"),
    "jks type, pem file": (_ssl(**{"ssl.truststore.type": "JKS", "ssl.truststore.location": CA_PEM}),
                           "ssl.truststore.type", "holds PEM text"),
    "missing file": (_ssl(**{"ssl.truststore.location": "/nonexistent/ts.jks"}), "ssl.truststore.location",
                     "every machine"),
    "keystore without password": (_ssl(**{"ssl.keystore.location": path("client.p12")}),
                                  "ssl.keystore.password", "needs its password"),
    "keystore password with pem": (_ssl(**{**KEYSTORES["pem-file"][0], "ssl.keystore.password": "x"}),
                                   "ssl.keystore.password", "PEM"),
    "truststore password with pem": (_ssl(**{**TRUSTSTORES["pem-inline"], "ssl.truststore.password": "x"}),
                                     "ssl.truststore.password", "PEM"),
    "password without store": (_ssl(**{"ssl.truststore.password": "x"}), "ssl.truststore.password",
                               "ssl.truststore.location is not"),
    "key without chain": (_ssl(**{"ssl.keystore.type": "PEM", "ssl.keystore.key": text("client-key.pem")}),
                          "ssl.keystore.certificate.chain", "is not"),
    "chain without key": (_ssl(**{"ssl.keystore.type": "PEM",
                                  "ssl.keystore.certificate.chain": text("client-chain.pem")}),
                          "ssl.keystore.key", "is not"),
    "inline certificates, jks type": (_ssl(**{"ssl.truststore.certificates": text("ca.pem")}),
                                      "ssl.truststore.type", "must be PEM"),
    "location and inline": (_ssl(**{**TRUSTSTORES["pem-inline"], "ssl.truststore.location": CA_PEM}),
                            "ssl.truststore.certificates", "not both"),
    "no certificate in pem": (_ssl(**{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "hello"}),
                              "ssl.truststore.certificates", "no PEM CERTIFICATE"),
    "two pem keys": (_ssl(**{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": text("client-chain.pem"),
                             "ssl.keystore.key": text("client-key.pem") * 2}), "ssl.keystore.key", "found 2"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_wrong_store_input_names_the_option(case):
    props, option, words = BAD[case]
    with pytest.raises(ConfigError) as ei:
        tls.client_context(ClientConfig.from_properties(props))
    msg = str(ei.value)
    assert ei.value.option == option and option in msg, msg
    assert words in msg, msg
    for what, secret in {**PASSWORDS, **{f"given {k}": v for k, v in props.items() if "password" in k}}.items():
        assert secret not in msg, f"the {what} is in the message"
    assert "PRIVATE KEY" not in msg


def test_a_key_that_does_not_belong_to_the_chain_is_named():
    cert, _ = self_signed("someone-else")
    props = _ssl(**{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert,
                    "ssl.keystore.key": text("client-key.pem")})
    with pytest.raises(ConfigError) as ei:
        tls.client_context(ClientConfig.from_properties(props))
    assert ei.value.option == "ssl.keystore.certificate.chain"
    assert "does not belong to the first certificate" in str(ei.value)


@pytest.mark.parametrize("props,option", [
    ({"ssl.cafile": CA_PEM, **TRUSTSTORES["jks"]}, "ssl.cafile"),
    ({"ssl.certfile": path("client-chain.pem"), **KEYSTORES["pkcs12"][0]}, "ssl.certfile"),
    ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
    ({"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}, "ssl.cipher.suites"),
    ({"ssl.keymanager.algorithm": "IbmX509"}, "ssl.keymanager.algorithm"),
    ({"ssl.engine.factory.class": "com.example.Factory"}, "ssl.engine.factory.class"),
])
def test_conflicting_or_unsafe_tls_options_are_refused(props, option):
    with pytest.raises(ConfigError) as ei:
        ClientConfig.from_properties(_ssl(**props))
    assert ei.value.option == option


def test_jvm_defaults_copied_from_a_java_config_are_accepted():
    cfg = ClientConfig.from_properties(_ssl(**{"ssl.keymanager.algorithm": "SunX509",
                                               "ssl.trustmanager.algorithm": "PKIX",
                                               "ssl.secure.random.implementation": "SHA1PRNG", **TRUSTSTORES["jks"]}))
    assert tls.client_context(cfg).verify_mode == ssl.CERT_REQUIRED


def test_tls_versions_follow_kafka_options():
    one = tls.client_context(ClientConfig.from_properties(_ssl(**{"ssl.enabled.protocols": "TLSv1.3"})))
    assert one.minimum_version == one.maximum_version == ssl.TLSVersion.TLSv1_3
    two = tls.client_context(ClientConfig.from_properties(_ssl(**{"ssl.protocol": "TLSv1.2"})))
    assert two.maximum_version == ssl.TLSVersion.TLSv1_2
    both = ClientConfig.from_properties(_ssl(**{"ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}))
    assert both.ssl_enabled_protocols == ("TLSv1.2", "TLSv1.3")


def test_a_store_file_is_read_again_when_it_changes(tmp_path):
    """As Kafka's SslFactory notices a modified keystore, a changed file is not served from cache."""
    store = tmp_path / "ts.pem"
    shutil.copy(CA_PEM, store)
    cfg = ClientConfig.from_properties(_ssl(**{"ssl.truststore.location": str(store)}))
    assert tls.client_context(cfg) is tls.client_context(cfg)
    store.write_text(text("expired-ca.pem") + "\n")
    with pytest.raises(ConfigError, match="expired"):
        tls.client_context(cfg)


# ------------------------------------------------------------------------------ SASL options

def _oauth(**props):
    base = {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": HANDLER,
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token", "sasl.jaas.config": OAUTH_JAAS}
    base.update(props)
    return {k: v for k, v in base.items() if v is not None}


def test_oauthbearer_options_parse_as_kip_768_configures_them():
    jaas = OAUTH_JAAS.replace('scope="kafka";', 'scope="kafka" extension_logicalCluster="lkc-1";')
    cfg = ClientConfig.from_properties(_oauth(**{
        "sasl.jaas.config": jaas, "sasl.login.refresh.window.factor": "0.9",
        "sasl.login.refresh.buffer.seconds": "10", "sasl.oauthbearer.sub.claim.name": "client_id"}))
    o = cfg.oauth
    assert (o.token_endpoint_url, o.client_id, o.client_secret.get(), o.scope) == \
        ("https://idp.example/token", "reader", "cs-Zq81", "kafka")
    assert o.extensions == (("logicalCluster", "lkc-1"),)
    assert (o.refresh_window_factor, o.refresh_buffer_s, o.sub_claim) == (0.9, 10, "client_id")
    assert "cs-Zq81" not in repr(cfg)
    # the 3.1-3.3 package of the handler and Kafka 4.1's client id / secret properties
    old = ClientConfig.from_properties(_oauth(**{
        "sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.secured."
                                             "OAuthBearerLoginCallbackHandler",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        "sasl.oauthbearer.client.credentials.client.id": "r2",
        "sasl.oauthbearer.client.credentials.client.secret": "s2"}))
    assert (old.oauth.client_id, old.oauth.client_secret.get(), old.oauth.scope) == ("r2", "s2", None)
    token_file = ClientConfig.from_properties(_oauth(**{
        "sasl.oauthbearer.token.endpoint.url": "file:///etc/kafka/token.jwt",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"}))
    assert token_file.oauth.from_file and token_file.oauth.file_path == "/etc/kafka/token.jwt"


@pytest.mark.parametrize("props,option,words", [
    ({"sasl.login.callback.handler.class": None}, "sasl.login.callback.handler.class", "unsecured"),
    ({"sasl.login.callback.handler.class": "com.example.MyHandler"}, "sasl.login.callback.handler.class",
     "com.example.MyHandler"),
    ({"sasl.oauthbearer.token.endpoint.url": None}, "sasl.oauthbearer.token.endpoint.url", "needs"),
    ({"sasl.oauthbearer.token.endpoint.url": "ftp://idp/token"}, "sasl.oauthbearer.token.endpoint.url", "ftp"),
    ({"sasl.jaas.config": OAUTH_JAAS.replace('clientSecret="cs-Zq81" ', "")}, "sasl.jaas.config", "clientSecret"),
    ({"sasl.jaas.config": OAUTH_JAAS.replace('clientId="reader" ', "")}, "sasl.jaas.config", "clientId"),
    ({"sasl.jaas.config": OAUTH_JAAS.replace("scope=", "extension_bad1=")}, "sasl.jaas.config", "extension"),
    ({"sasl.jaas.config": OAUTH_JAAS.replace("scope=", "unsecuredLoginStringClaim_sub=")}, "sasl.jaas.config",
     "unsecured"),
    ({"sasl.jaas.config": OAUTH_JAAS.replace("scope=", 'ssl.endpoint.identification.algorthm="" scope=')},
     "sasl.jaas.config", "ssl.endpoint.identification.algorthm"),
    ({"sasl.jaas.config": OAUTH_JAAS.replace("scope=", 'ssl.cipher.suites="TLS_AES_128_GCM_SHA256" scope=')},
     "sasl.jaas.config", "ssl.cipher.suites"),
    ({"sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                          'password="p";'}, "sasl.jaas.config", "must go together"),
    ({"sasl.login.refresh.window.factor": "0.3"}, "sasl.login.refresh.window.factor", "between"),
    ({"sasl.login.refresh.window.jitter": "0.5"}, "sasl.login.refresh.window.jitter", "between"),
    ({"sasl.jaas.config": "OAuthBearerLoginModule required clientId=x"}, "sasl.jaas.config", "';'"),
    ({"sasl.jaas.config": "A required a=b; B required c=d;"}, "sasl.jaas.config", "more than one"),
])
def test_wrong_oauthbearer_options_are_named(props, option, words):
    with pytest.raises(ConfigError) as ei:
        ClientConfig.from_properties(_oauth(**props))
    assert ei.value.option == option and words in str(ei.value), str(ei.value)
    assert "cs-Zq81" not in str(ei.value)


@pytest.mark.parametrize("kafka_opts,option", [
    ({"kafka.sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
    ({"kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
    ({"kafka.sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
                                'keyTab="/etc/k.keytab" principal="svc@EXAMPLE.COM";'}, "sasl.jaas.config"),
])
def test_gssapi_is_refused_by_name_with_what_to_use_instead(kafka_opts, option):
    """Refused when the read is planned (the client is built), before any connection."""
    opts = ReadOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                              "kafka.security.protocol": "SASL_SSL", **kafka_opts})
    with pytest.raises(ConfigError) as ei:
        planning.plan(opts)
    msg = str(ei.value)
    assert ei.value.option == option and "GSSAPI (Kerberos) is not supported" in msg
    assert "SCRAM-SHA-512" in msg and "OAUTHBEARER" in msg and "ssl.keystore" in msg


def test_jaas_lines_parse_as_kafka_reads_them():
    module, flag, opts = parse_jaas('org.x.ScramLoginModule REQUIRED username="a \\"b\\"" password=bare\n'
                                    '  serviceName="kafka" ;')
    assert (module, flag, opts) == ("org.x.ScramLoginModule", "required",
                                    {"username": 'a "b"', "password": "bare", "serviceName": "kafka"})


# ------------------------------------------------------------------------------ OAuth tokens

def _token(exp_s, iat_s=None, received_s=0.0):
    return BearerToken("x", "reader", int(exp_s * 1000), None if iat_s is None else int(iat_s * 1000), (),
                       int(received_s * 1000))


class _Zero(random.Random):
    def random(self):
        return 0.0


class _One(random.Random):
    def random(self):
        return 1.0


def test_refresh_time_follows_kafkas_rule():
    """ExpiringCredentialRefreshingLogin: factor (0.8) + jitter (0.05 x random) of the lifetime,
    no later than buffer (300 s) before expiry, no sooner than min period (60 s) after the login,
    and for lifetimes shorter than both buffers, simply factor + jitter of what is left."""
    cfg = ClientConfig.from_properties(_oauth()).oauth
    assert refresh_at_ms(_token(3600, 0), cfg, rng=_Zero()) == 2_880_000          # 0.8 x 3600 s
    assert refresh_at_ms(_token(3600, 0), cfg, rng=_One()) == 3_060_000           # 0.85 x 3600 s
    assert refresh_at_ms(_token(1500, 0), cfg, rng=_Zero()) == 1_200_000          # 0.8 x 1500 s
    late = ClientConfig.from_properties(_oauth(**{"sasl.login.refresh.window.factor": "0.95"})).oauth
    assert refresh_at_ms(_token(3600, 0), late, rng=_Zero()) == 3_300_000         # capped: 300 s before
    assert refresh_at_ms(_token(3, 0), cfg, rng=_Zero()) == 2_400                 # short-lived
    # a token issued long ago: the min period keeps the refresh 60 s after receiving it
    assert refresh_at_ms(_token(10_000, 0, received_s=9_000), cfg, rng=_Zero()) == 9_060_000


@pytest.mark.parametrize("value,words", [
    ("abc", "three sections"),
    ("a.!!!.c", "base64url"),
    ("e30.eyJzdWIiOiJ4In0.c", "'exp'"),               # {"sub":"x"}
    ("e30.eyJleHAiOjF9.c", "'sub'"),                  # {"exp":1}
])
def test_malformed_tokens_are_refused_without_echoing_them(value, words):
    cfg = ClientConfig.from_properties(_oauth()).oauth
    with pytest.raises(SaslError) as ei:
        parse_token(value, cfg)
    assert words in str(ei.value) and value not in str(ei.value)


# ------------------------------------------------------------------------------ properties files

def test_properties_files_read_as_java_reads_them():
    text_ = ("# client.properties\n! another comment\nsecurity.protocol=SASL_SSL\n"
             "sasl.mechanism : OAUTHBEARER\nssl.truststore.location /etc/kafka/ts.jks\n"
             "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\\n"
             "    clientId=\"reader\" \\\n    clientSecret=\"a\\\\b\";\n"
             "key\\=with\\:colon = v\\u00e9\\tx\n")
    assert parse_properties(text_) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "ssl.truststore.location": "/etc/kafka/ts.jks",
        "sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                            'clientId="reader" clientSecret="a\\b";',
        "key=with:colon": "v\u00e9\tx"}
