"""SASL/OAUTHBEARER end to end (KIP-768 client credentials): a local OAuth provider on 127.0.0.1
(``testing.oauth_server``: token endpoint + JWKS) and the embedded broker validating JWTs against
that JWKS (issuer, audience, expiry, signature) as Kafka's OAuthBearerValidatorCallbackHandler.

One module-scoped provider and SASL_SSL cluster (orders-1 of the Kafka 3.9.1 fixtures, tiered):
exact reads with client credentials and with a static token file; a token that expires in the
middle of a read (the client refreshes it and re-authenticates its connection, KIP-368, and the
broker never has to close it); a stream's long-lived client across token lifetimes; refused
tokens and token-endpoint failures named; key rotation; an https token endpoint; librdkafka's
own OIDC client against the broker; a Spark read whose executors get their own tokens."""
from __future__ import annotations

import json
import logging
import time

import pytest

from broker_fixtures import LIBRDKAFKA_QUIET, consume_confluent, fixture_expected, import_and_tier
from spark_helpers import arrow_rows, collect_rows, expected_rows, first_difference, load, read_tasks
from test_bad_input import make_batch
from tls_material import CA_PEM, TRUSTSTORES, broker_ssl, path, BROKER_PW

import kafka_tiered_source as kts
from kafka_tiered_source import planning
from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.options import ReadOptions, client_properties
from kafka_tiered_source.planning.stream import StreamPlanner, range_options
from kafka_tiered_source.protocol import tls
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.protocol.keystores import StoreOptions
from kafka_tiered_source.protocol.oauth import forget_tokens
from kafka_tiered_source.testing import EmbeddedCluster
from kafka_tiered_source.testing.oauth_server import OAuthServer
from kafka_tiered_source.testing.oauth_validator import unb64url

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECRET = "oauth-client-secret-Vx93"
SHORT_S = 1.5            # lifetime of the "short" client's tokens
WANT = expected_rows("orders", 1, False, headers=False)


def jaas(client="reader", secret=SECRET, **extra) -> str:
    more = "".join(f' {k}="{v}"' for k, v in extra.items())
    return f'{MODULE} required clientId="{client}" clientSecret="{secret}" scope="kafka"{more};'


@pytest.fixture(scope="module")
def idp():
    with OAuthServer({"reader": SECRET, "short": SECRET}, audience="kafka", lifetimes={"short": SHORT_S}) as s:
        yield s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, idp):
    base = tmp_path_factory.mktemp("oauth")
    sasl = {"mechanism": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
            "sasl.oauthbearer.expected.issuer": idp.issuer, "sasl.oauthbearer.expected.audience": "kafka"}
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", ssl=broker_ssl(),
                         sasl=sasl) as c:
        import_and_tier(c, [("orders", 1)])
        c.create_topic("live")
        c.remote_uri = f"file://{base}/remote"
        yield c


@pytest.fixture(autouse=True)
def fresh_logins():
    forget_tokens()      # each test starts without a cached token, as a new executor would
    yield
    forget_tokens()


def options(c, idp, **kafka) -> dict:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", **TRUSTSTORES["pem-inline"],
             "sasl.login.callback.handler.class": HANDLER,
             "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url, "sasl.jaas.config": jaas(), **kafka}
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "assign": '{"orders":[1]}',
            "remote.storage.uri": c.remote_uri, **{f"kafka.{k}": v for k, v in props.items() if v is not None}}


def read_exact(c, opts: dict):
    o = ReadOptions.parse(opts)
    batches, stats = read_tasks(o, planning.plan(o).tasks)
    got = arrow_rows(batches).get(("orders", 1), [])
    assert got == WANT, first_difference(got, WANT)
    return stats


def test_client_credentials_read_is_exact_with_one_token(cluster, idp):
    before = idp.issued.get("reader", 0)
    stats = read_exact(cluster, options(cluster, idp))
    assert stats.broker_fetches > 0 and stats.remote_bytes > 0
    # planner and reader share the process's login, as Kafka's LoginManager shares one per JAAS config
    assert idp.issued["reader"] == before + 1
    assert cluster.security_stats()["authentications"][("OAUTHBEARER", "reader")] > 0


def test_token_refreshed_and_connection_reauthenticated_in_the_middle_of_a_read(cluster, idp):
    """Everything through the broker in small fetches; the read stops past the token's expiry
    between two fetches.  The next fetch re-authenticates the same connection with a fresh token
    (KIP-368) instead of being closed by the broker for an ended session."""
    opts = ReadOptions.parse({**options(cluster, idp, **{"sasl.jaas.config": jaas("short"),
                                                         "max.partition.fetch.bytes": "40000"}),
                              "fetch.remote.fallback": "always"})
    stats0 = cluster.security_stats()
    issued0 = idp.issued.get("short", 0)
    reader = TaskReader(opts)
    got = []
    try:
        for task in planning.plan(opts).tasks:
            for i, batch in enumerate(reader.read(task)):
                got.append(batch)
                if i == 1:
                    time.sleep(SHORT_S + 0.3)         # the session and the token both end here
    finally:
        reader.close()
    rows = arrow_rows(got)[("orders", 1)]
    assert rows == WANT, first_difference(rows, WANT)
    stats = cluster.security_stats()
    assert reader.metrics.snapshot().total().broker_fetches > 3
    assert idp.issued["short"] >= issued0 + 2, "the token was not refreshed"
    assert stats["reauthentications"] > stats0["reauthentications"], "the connection did not re-authenticate"
    assert stats["expired_sessions_closed"] == stats0["expired_sessions_closed"]


def test_a_streams_client_outlives_its_tokens(cluster, idp):
    """A stream keeps one client for its life: micro-batches planned after the first token
    expired go through the same, re-authenticated connection and read the new data exactly."""
    opts = ReadOptions.parse({**options(cluster, idp, **{"sasl.jaas.config": jaas("short")}),
                              "assign": '{"live":[0]}', "startingOffsets": "earliest"}, streaming=True)
    client = BrokerClient(client_properties(opts))
    planner = StreamPlanner(opts, client)
    try:
        start = planner.initial()
        high = cluster.offsets("live", 0).high_watermark
        cluster.append("live", 0, make_batch([b"first-%d" % i for i in range(5)], high))
        end1 = planner.next_end(start, limited=False)
        time.sleep(SHORT_S + 0.3)
        cluster.append("live", 0, make_batch([b"second-%d" % i for i in range(7)], high + 5))
        stats0 = cluster.security_stats()
        end2 = planner.next_end(end1, limited=False)
        assert end2[("live", 0)] == end1[("live", 0)] + 7 == high + 12
        assert cluster.security_stats()["reauthentications"] > stats0["reauthentications"]
        batch_opts = range_options(opts, end1, end2)
        batches, _ = read_tasks(batch_opts, planning.plan(batch_opts).tasks)
        values = [v for b in batches for v in b.column(b.schema.get_field_index("value")).to_pylist()]
        assert values == [b"second-%d" % i for i in range(7)]
    finally:
        client.close()
    assert cluster.security_stats()["expired_sessions_closed"] == stats0["expired_sessions_closed"]


def test_a_static_token_file_reads_without_the_endpoint(cluster, idp, tmp_path):
    token = tmp_path / "token.jwt"
    token.write_text(idp.mint("reader", scope="kafka") + "\n")
    requests = idp.token_requests
    read_exact(cluster, options(cluster, idp, **{"sasl.oauthbearer.token.endpoint.url": f"file://{token}",
                                                 "sasl.jaas.config": f"{MODULE} required ;"}))
    assert idp.token_requests == requests


def _other_provider_token():
    with OAuthServer({"x": "y"}, issuer="https://idp.kafka-tiered.test", audience="kafka") as other:
        return other.mint("reader")


REFUSED = {
    "wrong issuer": (lambda idp: idp.mint("reader", iss="https://evil.example"), "issuer"),
    "wrong audience": (lambda idp: idp.mint("reader", aud="billing"), "audience"),
    "no audience": (lambda idp: idp.mint("reader", aud=None), "holds none of the expected"),
    "unknown signing key": (lambda idp: _other_provider_token(), "no key with kid"),
    "tampered claims": (lambda idp: _swap_payload(idp.mint("reader"), idp.mint("someone-else")), "signature"),
    "no issued-at": (lambda idp: idp.mint("reader", iat=None), "no iat"),
}


def _swap_payload(a: str, b: str) -> str:
    ha, _, sa = a.split(".")
    return f"{ha}.{b.split('.')[1]}.{sa}"


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_tokens_fail_authentication_with_the_reason_in_the_brokers_log(cluster, idp, tmp_path, caplog,
                                                                               case):
    make, reason = REFUSED[case]
    value = make(idp)
    token = tmp_path / "token.jwt"
    token.write_text(value)
    caplog.set_level(logging.WARNING, logger="kafka_tiered_source.testing.apis.sasl")
    with pytest.raises(BrokerError) as ei:
        planning.plan(ReadOptions.parse(options(cluster, idp, **{
            "sasl.oauthbearer.token.endpoint.url": f"file://{token}", "sasl.jaas.config": f"{MODULE} required ;"})))
    assert ei.value.error_name == "SASL_AUTHENTICATION_FAILED" and "invalid_token" in str(ei.value)
    assert value not in str(ei.value)
    assert any(reason in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert not any(value in r.getMessage() for r in caplog.records)


def test_the_broker_refuses_expired_tokens_past_its_clock_skew(idp):
    """exp is checked with sasl.oauthbearer.clock.skew.seconds (Kafka's default 30 s) of slack."""
    from kafka_tiered_source.errors import SaslError
    from kafka_tiered_source.testing.oauth_validator import JwtValidator, OAuthValidatorConfig
    v = JwtValidator(OAuthValidatorConfig(idp.jwks_url, expected_issuer=idp.issuer, expected_audience=("kafka",)))
    now = time.time()
    token = idp.mint("reader", issued_at=now, lifetime_s=60)
    assert v.validate(token, now=now + 60 + 29).principal == "reader"
    with pytest.raises(SaslError, match="expired"):
        v.validate(token, now=now + 60 + 31)


def test_an_expired_token_is_refused_by_the_client_before_it_connects(cluster, idp, tmp_path):
    token = tmp_path / "token.jwt"
    token.write_text(idp.mint("reader", issued_at=time.time() - 120, lifetime_s=60))
    with pytest.raises(BrokerError, match="has already expired"):
        planning.plan(ReadOptions.parse(options(cluster, idp, **{
            "sasl.oauthbearer.token.endpoint.url": f"file://{token}", "sasl.jaas.config": f"{MODULE} required ;"})))


def test_wrong_client_secret_names_the_jaas_options_without_the_secret(cluster, idp):
    with pytest.raises(BrokerError) as ei:
        planning.plan(ReadOptions.parse(options(cluster, idp, **{"sasl.jaas.config": jaas(secret="wrong-Qq7")})))
    msg = str(ei.value)
    assert "HTTP 401" in msg and "invalid_client" in msg and "clientSecret" in msg, msg
    assert "wrong-Qq7" not in msg and SECRET not in msg


def test_token_endpoint_hiccups_are_retried_as_kafka_does(cluster, idp):
    requests = idp.token_requests
    idp.fail_next(2, 503)
    assert planning.plan(ReadOptions.parse(options(cluster, idp, **{"sasl.login.retry.backoff.ms": "50"}))).tasks
    assert idp.token_requests == requests + 3


def test_signing_key_rotation_is_picked_up_from_the_jwks(cluster, idp):
    jwks = idp.jwks_requests
    kid = idp.rotate_key()
    assert planning.plan(ReadOptions.parse(options(cluster, idp))).tasks
    assert json.loads(unb64url(idp.minted[-1].split(".")[0]))["kid"] == kid     # signed with the new key
    assert idp.jwks_requests > jwks      # the broker met a new kid and fetched the key set again


def test_https_token_endpoint_trusted_through_the_jaas_ssl_options(cluster, idp):
    """Kafka reads the token endpoint's TLS settings from sasl.jaas.config (JaasOptionsUtils)."""
    keystore = StoreOptions(location=path("broker.p12"), password=BROKER_PW, names=tls.CLIENT_KEY_NAMES)
    with idp.twin(ssl_context=tls.server_context(keystore, None)) as https_idp:
        url = https_idp.token_endpoint_url
        assert url.startswith("https://")
        assert planning.plan(ReadOptions.parse(options(cluster, idp, **{
            "sasl.oauthbearer.token.endpoint.url": url,
            "sasl.jaas.config": jaas(**{"ssl.truststore.location": CA_PEM})}))).tasks
        assert https_idp.issued["reader"] == 1
        forget_tokens()
        with pytest.raises(BrokerError) as ei:
            planning.plan(ReadOptions.parse(options(cluster, idp, **{"sasl.oauthbearer.token.endpoint.url": url})))
        assert "TLS to the token endpoint" in str(ei.value) and "ssl.truststore.location" in str(ei.value)


def test_librdkafkas_oidc_client_reads_through_the_broker(cluster, idp):
    """The broker's OAUTHBEARER is Kafka's as a third-party client sees it: librdkafka gets its
    token from the same endpoint (its own client-credentials code) and the broker accepts it."""
    before = idp.issued.get("reader", 0)
    rows = consume_confluent(cluster.bootstrap_servers, "orders", 1, **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": CA_PEM, "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "reader",
        "sasl.oauthbearer.client.secret": SECRET, "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url, **LIBRDKAFKA_QUIET})
    assert rows == fixture_expected("orders", 1, False)
    assert idp.issued["reader"] > before


@pytest.mark.spark
def test_spark_read_with_client_credentials(cluster, idp, spark):
    """The options travel to the executors, which fetch their own tokens for the broker's part
    (orders-1's last segment is not tiered: without a token no executor could read it)."""
    kts.register(spark)
    before = idp.issued.get("reader", 0)
    got = collect_rows(load(spark, options(cluster, idp)))
    assert got == {("orders", 1): WANT}
    assert idp.issued["reader"] > before


def test_sessions_of_connections_max_reauth_ms_are_renewed_by_clients_and_enforced(tmp_path):
    """KIP-368 with SCRAM: the broker grants sessions of connections.max.reauth.ms; this client
    and kafka-python (which implements KIP-368 too) re-authenticate on their sockets before
    the session ends, and the broker closes a connection that sends a request after its end."""
    import kafka

    from kafka_tiered_source.protocol import messages as m
    from kafka_tiered_source.protocol.connection import BrokerConnection, ConnectionLost
    from kafka_tiered_source.options.client import ClientConfig
    users = {"alice": "alice-pw-8Hf2"}
    with EmbeddedCluster(str(tmp_path / "d"), sasl={"mechanism": "SCRAM-SHA-256", "users": users,
                                                    "connections.max.reauth.ms": 1200}) as c:
        c.create_topic("t")
        c.append("t", 0, make_batch([b"v%d" % i for i in range(3)], 0))
        props = {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": users["alice"]}
        ours = BrokerClient(props)
        theirs = kafka.KafkaConsumer(bootstrap_servers=c.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                     sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                                     sasl_plain_password=users["alice"], group_id=None, enable_auto_commit=False)
        # a connection whose re-authentication we turn off: the broker must end it
        lapsed = BrokerConnection(c.host, c.port, ClientConfig.from_properties(props))
        try:
            assert ours.list_offsets("t", {0: -1})[0].offset == 3 and "t" in theirs.topics()
            lapsed.ensure_connected()
            lapsed._reauth_at = None
            time.sleep(1.5)
            assert ours.list_offsets("t", {0: -1})[0].offset == 3
            assert "t" in theirs.topics()
            with pytest.raises(ConnectionLost):     # the broker closed it: "expired session"
                lapsed.request(m.MetadataRequest(topics=None), 12)
            stats = c.security_stats()
            assert stats["reauthentications"] >= 2 and stats["expired_sessions_closed"] == 1
        finally:
            ours.close()
            theirs.close()
            lapsed.close()
