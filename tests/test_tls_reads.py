"""Reads over TLS and mutual TLS, through every truststore and keystore form Kafka's Java client
takes, on the embedded broker: the rows must equal the Kafka 3.9.1 fixture's (orders-1: tiered
segments read from storage, the active segment through the broker, so both paths run).

Two module-scoped clusters hold the same data: one TLS listener, one that requires client
certificates (``ssl.client.auth=required``, as Kafka's SslFactory).  The broker's own record of
who authenticated shows which certificate each read presented.  A real third-party client
(confluent-kafka) reads through the mTLS listener with a PKCS12 keystore, and a Spark read
carries the options (inline PEM) to executors.  TLS material: tests/tls_material.py."""
from __future__ import annotations

import pytest

from broker_fixtures import LIBRDKAFKA_QUIET, consume_confluent, fixture_expected, import_and_tier
from spark_helpers import arrow_rows, collect_rows, expected_rows, first_difference, load, read_tasks
from tls_material import (CA_PEM, KEYSTORES, P12_PW, READER, TRUSTSTORES, broker_ssl, path, self_signed)

import kafka_tiered_source as kts
from kafka_tiered_source import planning
from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.testing import EmbeddedCluster

WANT = expected_rows("orders", 1, False, headers=False)


def _cluster(base, client_auth):
    c = EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", ssl=broker_ssl(client_auth))
    c.start()
    import_and_tier(c, [("orders", 1)])
    c.remote_uri = f"file://{base}/remote"
    return c


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    c = _cluster(tmp_path_factory.mktemp("tls"), "none")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def mtls_cluster(tmp_path_factory):
    c = _cluster(tmp_path_factory.mktemp("mtls"), "required")
    yield c
    c.stop()


def options(c, **props) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "assign": '{"orders":[1]}',
            "remote.storage.uri": c.remote_uri, "kafka.security.protocol": "SSL",
            **{f"kafka.{k}": v for k, v in props.items()}}


def read_exact(c, props: dict):
    opts = ReadOptions.parse(options(c, **props))
    batches, stats = read_tasks(opts, planning.plan(opts).tasks)
    got = arrow_rows(batches).get(("orders", 1), [])
    assert got == WANT, first_difference(got, WANT)
    assert stats.remote_bytes > 0 and stats.broker_fetches > 0     # storage and broker both read


@pytest.mark.parametrize("form", sorted(TRUSTSTORES))
def test_tls_read_through_every_truststore_form(tls_cluster, form):
    read_exact(tls_cluster, TRUSTSTORES[form])


@pytest.mark.parametrize("form", sorted(KEYSTORES))
def test_mtls_read_through_every_keystore_form(mtls_cluster, form):
    props, principal = KEYSTORES[form]
    before = mtls_cluster.security_stats()["authentications"].get(("SSL", principal), 0)
    read_exact(mtls_cluster, {**TRUSTSTORES["pem-inline"], **props})
    after = mtls_cluster.security_stats()["authentications"].get(("SSL", principal), 0)
    assert after > before, "the broker did not see the keystore's certificate"


def _refused(c, props) -> str:
    with pytest.raises(BrokerError) as ei:
        planning.plan(ReadOptions.parse(options(c, **props)))
    assert not ei.value.retriable
    return str(ei.value)


def test_mtls_without_a_client_certificate_says_which_options_give_one(mtls_cluster):
    msg = _refused(mtls_cluster, TRUSTSTORES["pem-file"])
    assert "requires a client certificate" in msg and "ssl.keystore.location" in msg, msg


def test_mtls_with_a_certificate_the_broker_does_not_trust(mtls_cluster):
    cert, key = self_signed("stranger")
    msg = _refused(mtls_cluster, {**TRUSTSTORES["pem-file"], "ssl.keystore.type": "PEM",
                                  "ssl.keystore.certificate.chain": cert, "ssl.keystore.key": key})
    assert "refused the client certificate" in msg and "truststore" in msg, msg


def test_a_broker_certificate_from_another_ca_names_the_truststore(tls_cluster):
    foreign_ca, _ = self_signed("another CA", ca=True)
    msg = _refused(tls_cluster, {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": foreign_ca})
    assert "not signed by a CA the client trusts" in msg and "ssl.truststore.location" in msg, msg


def test_host_name_check_and_kafkas_switch_for_it(tmp_path):
    """A certificate for 'localhost' only, reached as 127.0.0.1: refused unless
    ssl.endpoint.identification.algorithm is empty, as in Kafka."""
    cert, key = self_signed("localhost")
    (tmp_path / "cert.pem").write_text(cert)
    (tmp_path / "key.pem").write_text(key)
    with EmbeddedCluster(str(tmp_path / "d"), ssl={"certfile": str(tmp_path / "cert.pem"),
                                                   "keyfile": str(tmp_path / "key.pem")}) as c:
        c.create_topic("t")
        props = {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SSL",
                 "ssl.truststore.type": "PEM", "ssl.truststore.certificates": cert}
        with pytest.raises(BrokerError) as ei, BrokerClient(props) as client:
            client.topic("t")
        assert "does not name the host '127.0.0.1'" in str(ei.value)
        assert "ssl.endpoint.identification.algorithm" in str(ei.value)
        with BrokerClient({**props, "ssl.endpoint.identification.algorithm": ""}) as client:
            assert client.topic("t").partitions


def test_tls_client_against_a_plaintext_listener(tmp_path):
    with EmbeddedCluster(str(tmp_path / "d")) as c:
        c.create_topic("t")
        with pytest.raises(BrokerError) as ei, \
                BrokerClient({"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SSL",
                              "ssl.cafile": CA_PEM, "retries": "0"}) as client:
            client.topic("t")
        assert "is this a TLS listener" in str(ei.value) and "security.protocol" in str(ei.value)


def test_confluent_kafka_reads_through_the_mtls_listener_with_a_pkcs12_keystore(mtls_cluster):
    """The listener is TLS as a real client sees it: librdkafka with its own TLS stack."""
    rows = consume_confluent(mtls_cluster.bootstrap_servers, "orders", 1, **{
        "security.protocol": "SSL", "ssl.ca.location": CA_PEM,
        "ssl.keystore.location": path("client.p12"), "ssl.keystore.password": P12_PW, **LIBRDKAFKA_QUIET})
    assert rows == fixture_expected("orders", 1, False)
    assert mtls_cluster.security_stats()["authentications"][("SSL", READER)] > 0


@pytest.mark.spark
def test_spark_read_over_mtls_with_inline_pem(mtls_cluster, spark):
    """The options travel to the executors, which read the broker's part themselves (orders-1's
    last segment is not tiered); inline PEM needs nothing on the executors."""
    kts.register(spark)
    before = mtls_cluster.security_stats()["authentications"].get(("SSL", READER), 0)
    got = collect_rows(load(spark, options(mtls_cluster, **TRUSTSTORES["pem-inline"], **KEYSTORES["pem-inline"][0])))
    assert got == {("orders", 1): WANT}
    assert mtls_cluster.security_stats()["authentications"][("SSL", READER)] > before
