"""Broker faults while a task reads (issue 9 part B): a connection cut in the middle of a Fetch
response, a partition leader that moved (NOT_LEADER_OR_FOLLOWER), retention moving the log start
offset after planning (OFFSET_OUT_OF_RANGE), and the topic deleted after planning.

Every fault must end in the same rows or in a clear error, and every offset must come out
exactly once.  The faults are real: a Kafka-aware TCP proxy sits between the reader and the
embedded broker and cuts or rewrites the broker's real answers (decoded and re-encoded with the
project's codec, so the client sees exactly what a broker would send); retention and topic
deletion are the embedded broker's own ``delete_records`` / ``delete_topic``.
"""
from __future__ import annotations

import pathlib
import socket
import struct
import threading
import time

import pytest

from broker_fixtures import consume_kafka_python, fixture_segments
from spark_helpers import arrow_rows, expected_rows, first_difference, offsets_of, read_tasks
from storage_servers import free_port

from kafka_tiered_source.errors import BrokerError, DataLossError
from kafka_tiered_source.protocol import codec, messages as m
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster
from kafka_tiered_source.testing.log import StorageError


TOPIC, PART = "orders", 0
FETCH, METADATA = m.FetchRequest.API_KEY, m.MetadataRequest.API_KEY
NOT_LEADER = 6


# ---------------------------------------------------------------------------------------------
# a Kafka-aware TCP proxy


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


class KafkaProxy:
    """Forwards Kafka frames between clients and one broker.  It learns each request's API key
    and version from the request header, so it can decode the matching response.  Metadata
    answers are rewritten to advertise the proxy (so every later request comes through it too);
    ``faults`` are callables ``(api_key, version, response frame) -> action`` that may return
    ``("cut", n)`` (send n bytes of the frame, then close both sockets), ``("replace", frame)``,
    ``("delay", seconds)`` (hold the answer that long) or None.  ``log`` records
    ``(api_key, version)`` of every request in order, ``times`` when each arrived (monotonic)."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.port = free_port()
        self.faults: list = []
        self.log: list = []
        self.times: list = []
        self.fired: list = []
        self.connections = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(16)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self):
        self.closed = True
        self.sock.close()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            pending: dict = {}
            threading.Thread(target=self._requests, args=(client, upstream, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(client, upstream, pending), daemon=True).start()

    @staticmethod
    def _shut(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _requests(self, client, upstream, pending):
        try:
            while True:
                head = _recv_exact(client, 4)
                body = _recv_exact(client, struct.unpack(">i", head)[0])
                key, version, cid = struct.unpack(">hhi", body[:8])
                pending[cid] = (key, version)
                with self.lock:
                    self.log.append((key, version))
                    self.times.append(time.monotonic())
                upstream.sendall(head + body)
        except OSError:
            self._shut(client, upstream)

    def _responses(self, client, upstream, pending):
        try:
            while True:
                head = _recv_exact(upstream, 4)
                body = _recv_exact(upstream, struct.unpack(">i", head)[0])
                key, version = pending.pop(struct.unpack(">i", body[:4])[0])
                frame = head + body
                if key == METADATA:
                    cid, resp = codec.decode_response(body, key, version)
                    for b in resp.brokers:
                        b.host, b.port = "127.0.0.1", self.port
                    frame = codec.encode_response(resp, version, cid)
                action = None
                with self.lock:
                    for fault in self.faults:
                        action = fault(key, version, frame)
                        if action is not None:
                            # where in the request log the fault struck
                            self.fired.append(len(self.log))
                            break
                if action and action[0] == "cut":
                    client.sendall(frame[:action[1]])
                    self._shut(client, upstream)
                    return
                if action and action[0] == "replace":
                    frame = action[1]
                if action and action[0] == "delay":
                    time.sleep(action[1])
                client.sendall(frame)
        except OSError:
            self._shut(client, upstream)


def once(fn):
    """A fault that fires on the first response it matches, then never again."""
    state = {"fired": None}

    def fault(key, version, frame):
        if state["fired"] is not None:
            return None
        action = fn(key, version, frame)
        if action is not None:
            state["fired"] = action
        return action

    fault.state = state
    return fault


def _fetch_with_records(key, version, frame) -> bool:
    if key != FETCH:
        return False
    _, resp = codec.decode_response(frame[4:], key, version)
    return any(p.records for t in resp.responses for p in t.partitions)


# ---------------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture
def cluster(tmp_path):
    """orders-0 (8557 records in 300 KB segments) imported and tiered; the last segment stays
    local, so a read has tiered ranges and a broker tail."""
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{tmp_path}/remote") as c:
        c.import_log_dir(TOPIC, PART, fixture_segments(TOPIC, PART))
        assert c.tier()
        c.remote_dir = str(tmp_path / "remote")
        yield c


@pytest.fixture
def proxy(cluster):
    p = KafkaProxy(cluster.port)
    yield p
    p.close()


def options(bootstrap, c, *, direct=True, **extra) -> ReadOptions:
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC, "includeHeaders": "true",
            "remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{c.remote_dir}",
            "partition.target.bytes": str(512 * 1024), "kafka.retry.backoff.ms": "20",
            "kafka.max.partition.fetch.bytes": str(128 * 1024)}
    if not direct:
        opts["fetch.remote.enabled"] = "false"
    opts.update(extra)
    return ReadOptions.parse(opts)


def assert_exactly(batches, want_rows):
    offs = offsets_of(batches)
    assert len(offs) == len(set(offs)), "an offset came out twice"
    got = arrow_rows(batches).get((TOPIC, PART), [])
    assert got == want_rows, first_difference(got, want_rows)


WANT = expected_rows(TOPIC, PART, False)


# ---------------------------------------------------------------------------------------------
# a connection cut in the middle of a Fetch response


@pytest.mark.parametrize("direct", [False, True], ids=["broker-only", "direct+tail"])
def test_connection_cut_mid_fetch_response_is_retried_and_rows_are_equal(cluster, proxy, direct):
    opts = options(proxy.bootstrap, cluster, direct=direct)
    plan = planning.plan(opts)
    assert plan.broker_ranges, "the read must fetch records through the broker"

    def cut(key, version, frame):
        # past the header and the partition's offsets, inside the records
        return ("cut", len(frame) // 2) if _fetch_with_records(key, version, frame) else None

    fault = once(cut)
    proxy.faults.append(fault)
    conns = proxy.connections
    batches, stats = read_tasks(opts, plan.tasks)
    assert fault.state["fired"] is not None, "no Fetch response with records was cut"
    assert proxy.connections > conns, "the client did not reconnect"
    assert_exactly(batches, WANT)
    assert stats.records == len(WANT) and stats.fallbacks == 0


def test_broker_gone_for_good_ends_in_a_clear_error_not_a_hang(cluster, proxy):
    """Every Fetch answer is cut: the client's retries run out and the read fails naming the
    partition and the broker, within the retry budget."""
    opts = options(proxy.bootstrap, cluster, direct=False, **{"kafka.retries": "2"})
    plan = planning.plan(opts)
    proxy.faults.append(lambda key, version, frame: ("cut", 10) if key == FETCH else None)
    t0 = time.monotonic()
    with pytest.raises(BrokerError) as info:
        read_tasks(opts, plan.tasks)
    assert time.monotonic() - t0 < 30
    text = str(info.value)
    assert info.value.error_name == "NETWORK_EXCEPTION"
    assert "connection" in text and f"topic {TOPIC} partition {PART}" in text, text


# ---------------------------------------------------------------------------------------------
# NOT_LEADER_OR_FOLLOWER: the leader moved between planning and reading


def _not_leader(key, version, frame):
    if key != FETCH:
        return None
    cid, resp = codec.decode_response(frame[4:], key, version)
    hit = False
    for t in resp.responses:
        for p in t.partitions:
            if p.partition_index == PART and p.records:
                p.error_code, p.records = NOT_LEADER, b""
                p.high_watermark = p.last_stable_offset = p.log_start_offset = -1
                hit = True
    return ("replace", codec.encode_response(resp, version, cid)) if hit else None


@pytest.mark.parametrize("direct", [False, True], ids=["broker-only", "direct+tail"])
def test_not_leader_once_refreshes_metadata_and_rows_are_equal(cluster, proxy, direct):
    opts = options(proxy.bootstrap, cluster, direct=direct)
    plan = planning.plan(opts)
    fault = once(_not_leader)
    proxy.faults.append(fault)
    batches, stats = read_tasks(opts, plan.tasks)
    assert fault.state["fired"] is not None and len(proxy.fired) == 1
    # the error made the client refresh its metadata before it fetched again
    after = [k for k, _ in proxy.log[proxy.fired[0]:]]
    assert METADATA in after and FETCH in after[after.index(METADATA):], after[:10]
    assert_exactly(batches, WANT)
    assert stats.fallbacks == 0


def test_not_leader_that_never_ends_fails_naming_the_partition(cluster, proxy):
    opts = options(proxy.bootstrap, cluster, direct=False, **{"kafka.retries": "2"})
    plan = planning.plan(opts)
    proxy.faults.append(_not_leader)
    with pytest.raises(BrokerError) as info:
        read_tasks(opts, plan.tasks)
    text = str(info.value)
    assert info.value.error_name == "NOT_LEADER_OR_FOLLOWER"
    assert f"topic {TOPIC} partition {PART}" in text, text
    # three attempts (retries=2), each retry after a metadata refresh
    assert len(proxy.fired) == 3
    assert [k for k, _ in proxy.log[proxy.fired[0]:]].count(METADATA) >= 2


# ---------------------------------------------------------------------------------------------
# retention moved the log start offset after planning


def test_delete_records_moves_log_start_and_drops_whole_segments(cluster):
    before = cluster.remote_segments(TOPIC, PART)
    assert len(before) >= 3
    cut = before[2].base_offset + 7          # inside the third tiered segment
    store_keys = sorted(p.name for p in pathlib.Path(cluster.remote_dir).rglob("*.log"))
    assert cluster.delete_records(TOPIC, PART, cut) == cut
    after = cluster.remote_segments(TOPIC, PART)
    assert [s.base_offset for s in after] == [s.base_offset for s in before[2:]]
    left = sorted(p.name for p in pathlib.Path(cluster.remote_dir).rglob("*.log"))
    assert len(left) == len(store_keys) - 2
    o = cluster.offsets(TOPIC, PART)
    assert o.log_start_offset == cut
    # a real client sees the new log start and exactly the records from it
    with BrokerClient({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        assert client.list_offsets(TOPIC, {PART: -2})[PART].offset == cut
        with pytest.raises(BrokerError) as info:
            client.fetch(TOPIC, PART, cut - 1)
        assert info.value.error_name == "OFFSET_OUT_OF_RANGE"
    rows = consume_kafka_python(cluster.bootstrap_servers, TOPIC, PART, start=cut)
    assert [r["offset"] for r in rows] == [r["offset"] for r in WANT if r["offset"] >= cut]
    # idempotent, never backwards, bounded by the high watermark
    assert cluster.delete_records(TOPIC, PART, cut - 100) == cut
    with pytest.raises(StorageError, match="outside") as refused:
        cluster.delete_records(TOPIC, PART, o.high_watermark + 1)
    assert refused.value.error_name == "OFFSET_OUT_OF_RANGE"


@pytest.mark.parametrize("direct", [False, True], ids=["broker-only", "direct"])
def test_retention_after_planning_fail_on_data_loss_true_names_the_offsets(cluster, direct):
    opts = options(cluster.bootstrap_servers, cluster, direct=direct)
    plan = planning.plan(opts)
    first = plan.tasks[0]
    reader = TaskReader(opts)
    got = list(reader.read(first))
    read_end = max(offsets_of(got)) + 1
    cut = read_end + 1500
    cluster.delete_records(TOPIC, PART, cut)
    with pytest.raises(DataLossError) as info:
        read_tasks(opts, plan.tasks[1:], reader)
    text = str(info.value)
    assert f"{TOPIC}-{PART}" in text and f"[{read_end}, {cut})" in text, text
    assert "failOnDataLoss" in text


@pytest.mark.parametrize("direct", [False, True], ids=["broker-only", "direct"])
def test_retention_after_planning_fail_on_data_loss_false_skips_exactly_the_lost(cluster, direct):
    opts = options(cluster.bootstrap_servers, cluster, direct=direct, failOnDataLoss="false")
    plan = planning.plan(opts)
    reader = TaskReader(opts)
    got = list(reader.read(plan.tasks[0]))
    read_end = max(offsets_of(got)) + 1
    cut = read_end + 1500
    cluster.delete_records(TOPIC, PART, cut)
    # the tiered segment holding ``cut`` survives (only whole segments below it are dropped)
    kept = min(s.base_offset for s in cluster.remote_segments(TOPIC, PART))
    assert read_end < kept <= cut
    rest, stats = read_tasks(opts, plan.tasks[1:], reader)
    if direct:
        # The objects of the deleted segments are gone: those direct reads fell back, and the
        # broker skipped to the log start.  The segment that straddles the new log start is
        # still in storage, and a task planned on it reads its records directly (they exist,
        # once); through the broker they are below the log start and skipped.
        lost_end = kept
        assert stats.fallbacks > 0
    else:
        lost_end = cut
    want = [r for r in WANT if r["offset"] < read_end or r["offset"] >= lost_end]
    assert_exactly(got + rest, want)


# ---------------------------------------------------------------------------------------------
# the topic deleted between planning and reading


def test_delete_topic_removes_it_from_metadata_logs_and_remote_storage(cluster):
    assert list(pathlib.Path(cluster.remote_dir).rglob("*.log"))
    cluster.delete_topic(TOPIC)
    assert TOPIC not in cluster.topics
    assert not list(pathlib.Path(cluster.remote_dir).rglob("*.log"))
    with BrokerClient({"bootstrap.servers": cluster.bootstrap_servers, "retries": "0"}) as client:
        with pytest.raises(BrokerError) as info:
            client.topic(TOPIC)
        assert info.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    # the name can be used again, for a new, empty topic
    cluster.create_topic(TOPIC, partitions=1)
    assert cluster.offsets(TOPIC, 0).log_end_offset == 0


@pytest.mark.parametrize("direct", [False, True], ids=["broker-only", "direct"])
def test_topic_deleted_after_planning_fails_naming_the_topic(cluster, direct):
    opts = options(cluster.bootstrap_servers, cluster, direct=direct, **{"kafka.retries": "2"})
    plan = planning.plan(opts)
    reader = TaskReader(opts)
    first = list(reader.read(plan.tasks[0]))
    assert first
    cluster.delete_topic(TOPIC)
    t0 = time.monotonic()
    with pytest.raises(BrokerError) as info:
        read_tasks(opts, plan.tasks[1:], reader)
    assert time.monotonic() - t0 < 30, "the read must fail, not wait"
    text = str(info.value)
    assert TOPIC in text and ("UNKNOWN_TOPIC_OR_PARTITION" in text or "UNKNOWN_TOPIC_ID" in text), text


def test_delete_records_and_delete_topic_remove_every_object_in_the_kafka_local_tiered_layout(tmp_path):
    remote = tmp_path / "remote"
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{remote}",
                         layout="kafka-local-tiered") as c:
        c.import_log_dir(TOPIC, PART, fixture_segments(TOPIC, PART))
        segs = c.tier()
        files = lambda: sorted(p.name for p in remote.rglob("*") if p.is_file())   # noqa: E731
        assert len(files()) == 6 * len(segs)
        c.delete_records(TOPIC, PART, segs[1].base_offset)
        left = files()
        assert len(left) == 6 * (len(segs) - 1)
        assert not [n for n in left if n.startswith(f"{segs[0].base_offset:020d}-")]
        c.delete_topic(TOPIC)
        assert files() == []
        assert not pathlib.Path(c.storage.data_dir, f"{TOPIC}-{PART}").exists()
