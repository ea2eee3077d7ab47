"""The synchronous client against small scripted brokers (threads on 127.0.0.1, port 0) that
speak the real wire protocol through our codec."""
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest

from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.protocol import codec, messages as m
from kafka_tiered_source.model import EARLIEST, LATEST, LATEST_TIERED
from kafka_tiered_source.protocol.client import READ_COMMITTED, BrokerClient
from kafka_tiered_source.protocol.sasl import ScramCredential, ScramServer, SaslError, parse_plain

TOPIC = "orders"
TOPIC_ID = bytes(range(1, 17))
CLOSE = object()


def full_versions():
    return {k: (c.VALID_VERSIONS.lo, c.VALID_VERSIONS.hi) for k, c in m.REQUESTS.items()}


class ScriptedBroker:
    """A one-node Kafka look-alike.  ``handlers[api_key](broker, header, request, version)``
    returns a response message, ``CLOSE`` (drop the connection), or ``(delay_s, response)``."""

    def __init__(self, node_id=0, versions=None, cluster=None, ssl_context=None):
        self.node_id = node_id
        self.ssl_context = ssl_context
        self.versions = versions or full_versions()
        self.cluster = cluster
        self.handlers = {}
        self.seen = []            # (api name, version, request)
        self.connections = 0
        self.sasl = None          # ("PLAIN", {user: pw}) or (mech, {user: ScramCredential})
        self.wrong_cid_once = False
        self._lsock = socket.socket()
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(16)
        self.port = self._lsock.getsockname()[1]
        self._stop = False
        self._conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def close(self):
        self._stop = True
        self._lsock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass

    def _accept(self):
        while not self._stop:
            try:
                conn, _ = self._lsock.accept()
            except OSError:
                return
            self.connections += 1
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _recv(self, conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _serve(self, conn):
        state = {}
        try:
            if self.ssl_context is not None:
                try:
                    conn = self.ssl_context.wrap_socket(conn, server_side=True)
                except (ssl.SSLError, OSError):
                    conn.close()
                    return
            while True:
                size = struct.unpack(">i", self._recv(conn, 4))[0]
                data = self._recv(conn, size)
                try:
                    hdr, req = codec.decode_request(data)
                except codec.UnsupportedVersionError as exc:
                    h = exc.header
                    if h.request_api_key == 18:  # ApiVersions fallback: v0 body, error 35
                        resp = self._api_versions_response(error=35)
                        conn.sendall(codec.encode_response(resp, 0, h.correlation_id))
                        continue
                    raise
                api = m.api_name(hdr.request_api_key)
                version = hdr.request_api_version
                lo, hi = self.versions.get(hdr.request_api_key, (0, -1))
                if not lo <= version <= hi:
                    if hdr.request_api_key == 18:
                        conn.sendall(codec.encode_response(self._api_versions_response(error=35), 0,
                                                           hdr.correlation_id))
                        continue
                    raise AssertionError(f"client sent {api} v{version}, broker offers {lo}-{hi}")
                self.seen.append((api, version, req))
                if hdr.request_api_key == 18:
                    resp = self._api_versions_response()
                elif hdr.request_api_key in (17, 36):
                    resp = self._sasl(req, state)
                    if resp is CLOSE:
                        return
                elif hdr.request_api_key == 3:
                    resp = self.handlers.get(3, self.cluster.metadata if self.cluster else None)(self, hdr, req, version)
                else:
                    resp = self.handlers[hdr.request_api_key](self, hdr, req, version)
                if resp is CLOSE:
                    conn.close()
                    return
                if isinstance(resp, tuple):
                    time.sleep(resp[0])
                    resp = resp[1]
                cid = hdr.correlation_id
                if self.wrong_cid_once:
                    self.wrong_cid_once = False
                    cid += 1
                conn.sendall(codec.encode_response(resp, version, cid))
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    def _api_versions_response(self, error=0):
        R = m.ApiVersionsResponse
        return R(error_code=error, api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                             for k, (lo, hi) in sorted(self.versions.items())])

    def _sasl(self, req, state):
        mech, users = self.sasl
        if isinstance(req, m.SaslHandshakeRequest):
            ok = req.mechanism == mech
            return m.SaslHandshakeResponse(error_code=0 if ok else 33, mechanisms=[mech])
        try:
            if mech == "PLAIN":
                _, user, pw = parse_plain(req.auth_bytes)
                if users.get(user) != pw:
                    raise SaslError(f"authentication failed for user {user!r}")
                return m.SaslAuthenticateResponse(auth_bytes=b"")
            if "scram" not in state:
                state["scram"] = ScramServer(mech, users.get)
                return m.SaslAuthenticateResponse(auth_bytes=state["scram"].first(req.auth_bytes))
            return m.SaslAuthenticateResponse(auth_bytes=state["scram"].final(req.auth_bytes))
        except SaslError as exc:
            return m.SaslAuthenticateResponse(error_code=58, error_message=str(exc))


class Cluster:
    """Shared metadata for one or more scripted brokers; ``leader`` can be changed."""

    def __init__(self, n=1, partitions=2, versions=None, ssl_context=None):
        self.brokers = [ScriptedBroker(i, versions=versions, cluster=self, ssl_context=ssl_context)
                        for i in range(n)]
        self.leader = 0
        self.partitions = partitions

    def metadata(self, broker, hdr, req, version):
        R = m.MetadataResponse
        return R(brokers=[R.MetadataResponseBroker(node_id=b.node_id, host="127.0.0.1", port=b.port)
                          for b in self.brokers],
                 cluster_id="c1", controller_id=0,
                 topics=[R.MetadataResponseTopic(name=TOPIC, topic_id=TOPIC_ID, partitions=[
                     R.MetadataResponsePartition(partition_index=p, leader_id=self.leader, leader_epoch=3,
                                                 replica_nodes=[self.leader], isr_nodes=[self.leader])
                     for p in range(self.partitions)])])

    def close(self):
        for b in self.brokers:
            b.close()

    def config(self, **extra):
        props = {"bootstrap.servers": self.brokers[0].address, "request.timeout.ms": "2000",
                 "retry.backoff.ms": "5", "retry.backoff.max.ms": "20"}
        props.update(extra)
        return props


def fetch_response(req, version, *, error=0, records=b"RECORDS", **kip):
    R = m.FetchResponse
    t = req.topics[0]
    part = R.PartitionData(partition_index=t.partitions[0].partition, error_code=error, high_watermark=100,
                           last_stable_offset=90, log_start_offset=0, records=records,
                           aborted_transactions=[R.AbortedTransaction(producer_id=7, first_offset=5)], **kip)
    return R(responses=[R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[part])])


def plain_fetch(broker, hdr, req, version):
    return fetch_response(req, version)


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.close()


def test_bootstrap_metadata_and_version_negotiation(cluster):
    b = cluster.brokers[0]
    b.versions[3] = (0, 12)   # Metadata up to 12 only
    with BrokerClient(cluster.config()) as client:
        info = client.topic(TOPIC)
        assert info.topic_id == TOPIC_ID and sorted(info.partitions) == [0, 1]
        assert info.partitions[1].leader == 0 and info.partitions[1].leader_epoch == 3
        assert client.topic(TOPIC_ID).name == TOPIC
        assert client.leader(TOPIC_ID, 1).node_id == 0   # routing by topic id
        assert client.supported_versions()["Metadata"] == 12
        assert client.cluster_id == "c1"
    assert ("ApiVersions", 4) in [(a, v) for a, v, _ in b.seen]
    assert ("Metadata", 12) in [(a, v) for a, v, _ in b.seen]


def test_fetch_v18_with_kip1248_tags_and_location_in_response(cluster):
    url = "https://bucket.example/seg.log?X-Amz-Signature=supersecret"

    def handler(broker, hdr, req, version):
        assert req.remote_log_segment_location_requested
        return fetch_response(req, version, records=None, remote_log_segment_id=b"\x09" * 16,
                              remote_log_segment_start_position=0, remote_log_segment_end_position=4096,
                              remote_log_segment_base_offset=0, remote_log_segment_end_offset=99,
                              storage_format_version="ApacheKafkaV1", signed_remote_log_segment_location=url)

    cluster.brokers[0].handlers[1] = handler
    with BrokerClient(cluster.config()) as client:
        res = client.fetch(TOPIC, 1, 42, request_remote_location=True, isolation_level=READ_COMMITTED)
        assert res.version == 18 and res.kip1248_requested and res.has_remote_location
        assert res.partition.remote_log_segment_end_position == 4096
        assert res.partition.signed_remote_log_segment_location == url
        assert "supersecret" not in repr(res)
        assert res.partition.aborted_transactions[0].producer_id == 7
    _, version, req = [s for s in cluster.brokers[0].seen if s[0] == "Fetch"][0]
    assert req.topics[0].topic_id == TOPIC_ID and req.topics[0].partitions[0].fetch_offset == 42
    assert req.session_id == 0 and req.session_epoch == -1 and req.isolation_level == 1
    assert req.supported_storage_format_versions == ["ApacheKafkaV1"]


def test_broker_without_fetch_v18_gets_v17_with_tags(cluster):
    cluster.brokers[0].versions[1] = (4, 17)
    cluster.brokers[0].handlers[1] = plain_fetch
    with BrokerClient(cluster.config()) as client:
        res = client.fetch(TOPIC, 0, 0, request_remote_location=True)
        assert res.version == 17 and res.kip1248_requested and not res.has_remote_location
        assert bytes(res.records) == b"RECORDS"
        assert client.supports_kip1248(TOPIC, 0)
    _, version, req = [s for s in cluster.brokers[0].seen if s[0] == "Fetch"][0]
    assert version == 17 and req.remote_log_segment_location_requested


def test_broker_with_fetch_below_12_means_no_kip1248(cluster):
    cluster.brokers[0].versions[1] = (4, 11)
    cluster.brokers[0].handlers[1] = plain_fetch
    with BrokerClient(cluster.config()) as client:
        assert not client.supports_kip1248(TOPIC, 0)
        res = client.fetch(TOPIC, 0, 0, request_remote_location=True)
        assert res.version == 11 and not res.kip1248_requested
    _, version, req = [s for s in cluster.brokers[0].seen if s[0] == "Fetch"][0]
    assert req.topics[0].topic == TOPIC and not req.remote_log_segment_location_requested


def test_broker_closing_the_connection_is_retried_on_a_new_one(cluster):
    calls = []

    def handler(broker, hdr, req, version):
        calls.append(1)
        return CLOSE if len(calls) == 1 else fetch_response(req, version)

    cluster.brokers[0].handlers[1] = handler
    with BrokerClient(cluster.config()) as client:
        res = client.fetch(TOPIC, 0, 0)
        assert bytes(res.records) == b"RECORDS"
    assert len(calls) == 2
    assert cluster.brokers[0].connections >= 2


def test_request_timeout_raises_retriable_error_naming_broker_and_api(cluster):
    cluster.brokers[0].handlers[1] = lambda b, h, r, v: (1.0, fetch_response(r, v))
    with BrokerClient(cluster.config(**{"request.timeout.ms": "200", "retries": "0"})) as client:
        with pytest.raises(BrokerError) as ei:
            client.fetch(TOPIC, 0, 0, max_wait_ms=0)
    err = ei.value
    assert err.error_name == "REQUEST_TIMED_OUT" and err.retriable
    assert err.broker == cluster.brokers[0].address and err.api == "Fetch"


def test_timeout_then_success_with_retries(cluster):
    calls = []

    def handler(b, h, r, v):
        calls.append(1)
        return (1.0, fetch_response(r, v)) if len(calls) == 1 else fetch_response(r, v)

    cluster.brokers[0].handlers[1] = handler
    with BrokerClient(cluster.config(**{"request.timeout.ms": "200", "retries": "2"})) as client:
        assert bytes(client.fetch(TOPIC, 0, 0, max_wait_ms=0).records) == b"RECORDS"
    assert len(calls) == 2


def test_not_leader_refreshes_metadata_and_follows_the_new_leader():
    c = Cluster(n=2)
    try:
        def old_leader(broker, hdr, req, version):
            c.leader = 1   # the partition moved; the next metadata answer says so
            return fetch_response(req, version, error=6, records=None)

        c.brokers[0].handlers[1] = old_leader
        c.brokers[1].handlers[1] = plain_fetch
        with BrokerClient(c.config()) as client:
            res = client.fetch(TOPIC, 0, 10)
            assert res.broker == c.brokers[1].address and bytes(res.records) == b"RECORDS"
        metadata_calls = sum(1 for b in c.brokers for s in b.seen if s[0] == "Metadata")
        assert metadata_calls >= 2
    finally:
        c.close()


def test_non_retriable_partition_error_is_raised_once(cluster):
    cluster.brokers[0].handlers[1] = lambda b, h, r, v: fetch_response(r, v, error=1, records=None)
    with BrokerClient(cluster.config()) as client:
        with pytest.raises(BrokerError) as ei:
            client.fetch(TOPIC, 1, 5000)
    err = ei.value
    assert (err.error_code, err.error_name, err.retriable) == (1, "OFFSET_OUT_OF_RANGE", False)
    assert (err.topic, err.partition, err.api) == (TOPIC, 1, "Fetch")
    assert "OFFSET_OUT_OF_RANGE" in str(err) and "partition 1" in str(err)
    assert sum(1 for s in cluster.brokers[0].seen if s[0] == "Fetch") == 1


def test_retriable_errors_give_up_after_retries(cluster):
    cluster.brokers[0].handlers[1] = lambda b, h, r, v: fetch_response(r, v, error=3, records=None)
    with BrokerClient(cluster.config(retries="2")) as client:
        with pytest.raises(BrokerError) as ei:
            client.fetch(TOPIC, 0, 0)
    assert ei.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION" and ei.value.retriable
    assert sum(1 for s in cluster.brokers[0].seen if s[0] == "Fetch") == 3


def list_offsets_handler(broker, hdr, req, version):
    R = m.ListOffsetsResponse
    out = []
    for p in req.topics[0].partitions:
        offset = {EARLIEST: 0, LATEST: 100, LATEST_TIERED: 60}.get(p.timestamp, 50)
        out.append(R.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=offset,
                                                  timestamp=p.timestamp, leader_epoch=3))
    return R(topics=[R.ListOffsetsTopicResponse(name=req.topics[0].name, partitions=out)])


def test_list_offsets_special_and_timestamp(cluster):
    cluster.brokers[0].handlers[2] = list_offsets_handler
    with BrokerClient(cluster.config()) as client:
        got = client.list_offsets(TOPIC, {0: EARLIEST, 1: LATEST})
        assert (got[0].offset, got[1].offset) == (0, 100)
        assert client.list_offsets(TOPIC, {0: 1_700_000_000_000})[0].offset == 50
        assert client.list_offsets(TOPIC, {1: LATEST_TIERED})[1].offset == 60
    versions = [v for a, v, _ in cluster.brokers[0].seen if a == "ListOffsets"]
    assert versions == [11, 11, 11]


def test_list_offsets_latest_tiered_needs_v9(cluster):
    cluster.brokers[0].versions[2] = (1, 8)
    cluster.brokers[0].handlers[2] = list_offsets_handler
    with BrokerClient(cluster.config()) as client:
        assert client.list_offsets(TOPIC, {0: LATEST})[0].offset == 100
        with pytest.raises(BrokerError) as ei:
            client.list_offsets(TOPIC, {0: LATEST_TIERED})
    assert ei.value.error_name == "UNSUPPORTED_VERSION" and "v9" in str(ei.value)


def test_api_versions_fallback_when_broker_knows_only_older_versions(cluster):
    cluster.brokers[0].versions[18] = (0, 2)
    with BrokerClient(cluster.config()) as client:
        assert client.topic(TOPIC).name == TOPIC
    assert [v for a, v, _ in cluster.brokers[0].seen if a == "ApiVersions"] == [2]


def test_wrong_correlation_id_drops_connection_and_retries(cluster):
    cluster.brokers[0].handlers[1] = plain_fetch
    with BrokerClient(cluster.config()) as client:
        client.topic(TOPIC)
        cluster.brokers[0].wrong_cid_once = True
        assert bytes(client.fetch(TOPIC, 0, 0).records) == b"RECORDS"
    assert cluster.brokers[0].connections >= 2


def test_unreachable_bootstrap_is_a_clear_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with BrokerClient({"bootstrap.servers": f"127.0.0.1:{port}", "retries": "1",
                       "retry.backoff.ms": "1"}) as client:
        with pytest.raises(BrokerError) as ei:
            client.topic(TOPIC)
    assert f"127.0.0.1:{port}" in str(ei.value) and ei.value.retriable


def test_concurrent_fetches_share_one_connection(cluster):
    def handler(broker, hdr, req, version):
        off = req.topics[0].partitions[0].fetch_offset
        return fetch_response(req, version, records=str(off).encode())

    cluster.brokers[0].handlers[1] = handler
    errors = []
    with BrokerClient(cluster.config()) as client:
        client.topic(TOPIC)

        def worker(base):
            try:
                for i in range(15):
                    off = base * 1000 + i
                    assert bytes(client.fetch(TOPIC, i % 2, off).records) == str(off).encode()
            except Exception as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    # one connection: the bootstrap one, which is node 0's
    assert cluster.brokers[0].connections == 1


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_handshakes(cluster, mechanism):
    b = cluster.brokers[0]
    if mechanism == "PLAIN":
        b.sasl = ("PLAIN", {"alice": "s3cret-pw"})
    else:
        b.sasl = (mechanism, {"alice": ScramCredential.from_password("s3cret-pw", mechanism)})
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="alice" password="s3cret-pw";')
    cfg = cluster.config(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                            "sasl.jaas.config": jaas})
    with BrokerClient(cfg) as client:
        assert client.topic(TOPIC).name == TOPIC
    apis = [a for a, _, _ in b.seen]
    assert apis[:2] == ["ApiVersions", "SaslHandshake"] and "SaslAuthenticate" in apis
    assert [v for a, v, _ in b.seen if a == "SaslHandshake"] == [1]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_sasl_wrong_password_fails_without_leaking_it(cluster, mechanism):
    b = cluster.brokers[0]
    if mechanism == "PLAIN":
        b.sasl = ("PLAIN", {"alice": "right-pw"})
    else:
        b.sasl = (mechanism, {"alice": ScramCredential.from_password("right-pw", mechanism)})
    cfg = cluster.config(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                            "sasl.username": "alice", "sasl.password": "wrong-pw-xyz"})
    with BrokerClient(cfg) as client:
        with pytest.raises(BrokerError) as ei:
            client.topic(TOPIC)
    assert ei.value.error_name == "SASL_AUTHENTICATION_FAILED" and not ei.value.retriable
    assert "wrong-pw-xyz" not in str(ei.value) and "right-pw" not in str(ei.value)


def test_sasl_mechanism_not_offered(cluster):
    cluster.brokers[0].sasl = ("SCRAM-SHA-512", {})
    cfg = cluster.config(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                            "sasl.username": "a", "sasl.password": "b"})
    with BrokerClient(cfg) as client:
        with pytest.raises(BrokerError) as ei:
            client.topic(TOPIC)
    assert ei.value.error_name == "UNSUPPORTED_SASL_MECHANISM" and "SCRAM-SHA-512" in str(ei.value)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A throw-away CA and a server certificate for 127.0.0.1, made with the openssl CLI."""
    d = tmp_path_factory.mktemp("tls")

    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=kafka-tiered test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    return d


def _server_ctx(d):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(d / "server.pem"), str(d / "server.key"))
    return ctx


def test_ssl_verifies_the_broker_with_the_given_ca(tls_files):
    c = Cluster(ssl_context=_server_ctx(tls_files))
    try:
        with BrokerClient(c.config(**{"security.protocol": "SSL", "ssl.cafile": str(tls_files / "ca.pem")})) as client:
            assert client.topic(TOPIC).topic_id == TOPIC_ID
    finally:
        c.close()


def test_ssl_refuses_an_unknown_ca(tls_files):
    c = Cluster(ssl_context=_server_ctx(tls_files))
    try:
        with BrokerClient(c.config(**{"security.protocol": "SSL", "retries": "0"})) as client:
            with pytest.raises(BrokerError) as ei:
                client.topic(TOPIC)
        assert "TLS handshake failed" in str(ei.value) and not ei.value.retriable
    finally:
        c.close()


def test_sasl_ssl_with_scram(tls_files):
    c = Cluster(ssl_context=_server_ctx(tls_files))
    try:
        c.brokers[0].sasl = ("SCRAM-SHA-512", {"bob": ScramCredential.from_password("pw1", "SCRAM-SHA-512")})
        c.brokers[0].handlers[1] = plain_fetch
        cfg = c.config(**{"security.protocol": "SASL_SSL", "ssl.cafile": str(tls_files / "ca.pem"),
                          "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "pw1"})
        with BrokerClient(cfg) as client:
            assert bytes(client.fetch(TOPIC, 0, 0).records) == b"RECORDS"
    finally:
        c.close()


def test_idle_connection_is_replaced(cluster):
    cluster.brokers[0].handlers[1] = plain_fetch
    with BrokerClient(cluster.config(**{"connections.max.idle.ms": "50"})) as client:
        client.fetch(TOPIC, 0, 0)
        before = cluster.brokers[0].connections
        time.sleep(0.15)
        client.fetch(TOPIC, 0, 0)
        assert cluster.brokers[0].connections > before


def test_metadata_by_topic_id_sends_ids_with_null_names(cluster):
    with BrokerClient(cluster.config()) as client:
        client.metadata(topic_ids=[TOPIC_ID])
        assert client.topic(TOPIC_ID).name == TOPIC
    _, version, req = [s for s in cluster.brokers[0].seen if s[0] == "Metadata"][0]
    assert version == 13 and req.topics[0].topic_id == TOPIC_ID and req.topics[0].name is None


def test_metadata_by_topic_id_needs_v12(cluster):
    cluster.brokers[0].versions[3] = (0, 11)
    with BrokerClient(cluster.config()) as client:
        with pytest.raises(BrokerError) as ei:
            client.metadata(topic_ids=[TOPIC_ID])
    assert ei.value.error_name == "UNSUPPORTED_VERSION" and "v12" in str(ei.value)


def test_real_clients_read_metadata_through_the_codec(cluster):
    """kafka-python and librdkafka (confluent-kafka) against the scripted broker: proves the
    server side of the codec (headers, ApiVersions, Metadata) with independent clients."""
    import confluent_kafka.admin
    import kafka

    b = cluster.brokers[0]
    for k in (71, 72):          # no client telemetry here
        b.versions.pop(k, None)
    consumer = kafka.KafkaConsumer(bootstrap_servers=b.address, request_timeout_ms=5000)
    try:
        assert consumer.partitions_for_topic(TOPIC) == {0, 1}
    finally:
        consumer.close()
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": b.address})
    md = admin.list_topics(timeout=10)
    assert sorted(md.topics[TOPIC].partitions) == [0, 1]
    assert md.topics[TOPIC].partitions[1].leader == 0
    assert {a for a, _, _ in b.seen} == {"ApiVersions", "Metadata"}


def test_real_consumers_read_records_and_skip_kip1248_response_tags(cluster):
    """The fallback, seen from a real client: kafka-python and librdkafka consume a fetch
    response that carries the KIP-1248 partition tags and simply ignore them."""
    import confluent_kafka
    import kafka
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        builder.append(timestamp=1000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    builder.close()
    batch = bytes(builder.buffer())

    b = cluster.brokers[0]
    for k in (71, 72):
        b.versions.pop(k, None)

    def fetch(broker, hdr, req, version):
        first = req.topics[0].partitions[0].fetch_offset == 0
        return fetch_response(req, version, records=batch if first else b"",
                              remote_log_segment_id=b"\x09" * 16, storage_format_version="ApacheKafkaV1",
                              remote_log_segment_end_position=len(batch),
                              signed_remote_log_segment_location="https://store/seg.log?sig=abc")

    def find_coordinator(broker, hdr, req, version):
        R = m.FindCoordinatorResponse
        if version >= 4:
            return R(coordinators=[R.Coordinator(key=k, node_id=0, host="127.0.0.1", port=broker.port)
                                   for k in req.coordinator_keys])
        return R(node_id=0, host="127.0.0.1", port=broker.port)

    b.handlers[1] = fetch
    b.handlers[10] = find_coordinator

    consumer = kafka.KafkaConsumer(bootstrap_servers=b.address, request_timeout_ms=5000, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = consumer.poll(timeout_ms=5000)
        assert [(r.offset, r.key, r.value) for r in got[tp]] == [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2")]
    finally:
        consumer.close()

    rd = confluent_kafka.Consumer({"bootstrap.servers": b.address, "group.id": "g", "enable.auto.commit": False})
    try:
        rd.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        values = []
        deadline = time.time() + 15
        while time.time() < deadline and len(values) < 3:
            msg = rd.poll(0.2)
            if msg is not None and not msg.error():
                values.append((msg.offset(), msg.value()))
        assert values == [(0, b"v0"), (1, b"v1"), (2, b"v2")]
    finally:
        rd.close()
    fetch_versions = {v for a, v, _ in b.seen if a == "Fetch"}
    assert fetch_versions and min(fetch_versions) >= 12   # flexible: the tags were on the wire


def test_one_connection_per_broker_the_bootstrap_one_reused(cluster):
    b = cluster.brokers[0]
    with BrokerClient(cluster.config()) as client:
        client.topic(TOPIC)                        # over the bootstrap connection
        leader = client.leader(TOPIC, 1)           # node 0: the bootstrap address itself
        leader.ensure_connected()
        assert leader.node_id == 0
        assert len(client.open_connections()) == 1
    assert b.connections == 1 and [a for a, _, _ in b.seen].count("ApiVersions") == 1
