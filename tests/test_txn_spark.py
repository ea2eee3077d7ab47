"""read_committed through Spark where reads and micro-batches end inside transactions (issue 33):
a few representative batch reads of the layout of tests/txn_topics.py, and streams against live
transactional producers (confluent-kafka) while the broker tiers under them.  The exhaustive
sweeps run without Spark (tests/test_txn_ends.py)."""
from __future__ import annotations

import json
import threading

import pytest

from spark_helpers import b64
from txn_topics import LAYOUT_LSO, build_layout

import kafka_tiered_source as kts
from kafka_tiered_source import planning
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.testing import EmbeddedCluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sp(spark):
    kts.register(spark)
    return spark


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    base = tmp_path_factory.mktemp("txn-spark")
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", kip1248=False,
                         remote_log_metadata_partitions=3) as c:
        c.remote_dir = str(base / "remote")
        yield c, build_layout(c, "txns")


def _values(rows) -> list[tuple[int, bytes]]:
    return sorted((r.offset, bytes(r.value)) for r in rows)


@pytest.mark.spark
@pytest.mark.parametrize("locator", ["metadata-topic", "listing"])
def test_spark_reads_ending_inside_a_transaction_and_at_the_lso(sp, today, locator):
    c, t = today
    base = {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "txns",
            "kafka.isolation.level": "read_committed", "remote.storage.uri": f"file://{c.remote_dir}",
            "remote.segment.locator": locator, "minPartitions": "3"}
    inside = sp.read.format("kafka-tiered").options(**base, endingOffsets=json.dumps({"txns": {"0": 16}})).load()
    assert _values(inside.select("offset", "value").collect()) == t.expected(0, 16)
    latest = sp.read.format("kafka-tiered").options(**base).load()
    assert _values(latest.select("offset", "value").collect()) == t.expected(0, LAYOUT_LSO)


# ---------------------------------------------------------------------------------------------
# live transactional producers while the broker tiers
class LiveProducers:
    """Two transactional producers with overlapping transactions (every third aborts) and a
    plain one, rolling and tiering every few transactions, in a thread.  ``values`` (offset ->
    value) from the delivery reports; ``outcome`` per transaction."""

    def __init__(self, c, topic: str, rounds: int):
        import confluent_kafka as ck
        from broker_fixtures import LIBRDKAFKA_QUIET
        self.c, self.topic, self.rounds = c, topic, rounds
        base = {"bootstrap.servers": c.bootstrap_servers, "linger.ms": 0, "transaction.timeout.ms": 900_000,
                **LIBRDKAFKA_QUIET}
        self.tx = [ck.Producer({**base, "transactional.id": f"live-{i}"}) for i in range(2)]
        self.plain = ck.Producer({**base, "enable.idempotence": True})
        for p in self.tx:
            p.init_transactions(30)
        self.values: dict[int, bytes] = {}
        self.outcome: dict[str, str] = {}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="live-producers", daemon=True)

    def _send(self, p, name: str, outcome: str, n: int) -> None:
        def delivered(err, msg):
            if err is None:
                self.values[msg.offset()] = msg.value()
        for i in range(n):
            p.produce(self.topic, value=b"%s/%s/%d" % (name.encode(), outcome.encode(), i), partition=0,
                      on_delivery=delivered)
        assert p.flush(30) == 0

    def _run(self) -> None:
        try:
            for k in range(self.rounds):
                a, b = f"x{k}", f"y{k}"
                fate_a, fate_b = ("abort" if k % 3 == 1 else "commit"), ("abort" if k % 3 != 1 else "commit")
                self.tx[0].begin_transaction()
                self._send(self.tx[0], a, fate_a, 2)
                self.tx[1].begin_transaction()
                self._send(self.tx[1], b, fate_b, 2)
                self._send(self.plain, "plain", "", 1)
                if k % 2:
                    self.c.roll(self.topic, 0)
                self._send(self.tx[0], a, fate_a, 1)
                (self.tx[0].commit_transaction if fate_a == "commit" else self.tx[0].abort_transaction)(30)
                self.outcome[a] = fate_a
                self._send(self.tx[1], b, fate_b, 1)
                (self.tx[1].commit_transaction if fate_b == "commit" else self.tx[1].abort_transaction)(30)
                self.outcome[b] = fate_b
                if k % 2:
                    self.c.tier(self.topic)
        except BaseException as exc:       # reported by the test
            self.error = exc

    def expected(self) -> list[tuple[int, bytes]]:
        out = []
        for o in sorted(self.values):
            name = self.values[o].split(b"/")[0].decode()
            if name == "plain" or self.outcome[name] == "commit":
                out.append((o, self.values[o]))
        return out

    def end(self) -> int:
        return self.c.offsets(self.topic, 0).high_watermark


def test_micro_batches_of_one_to_five_offsets_follow_live_transactions(tmp_path):
    """Five streams (the Spark-free stream planner, maxOffsetsPerTrigger 1 to 5) follow the
    producers, each micro-batch planned and read as the Spark source does."""
    from kafka_tiered_source.planning.stream import StreamPlanner, range_options
    from kafka_tiered_source.protocol.client import BrokerClient
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{tmp_path}/remote", kip1248=False,
                         remote_log_metadata_partitions=3) as c:
        c.create_topic("live", 1)
        live = LiveProducers(c, "live", rounds=8)
        streams = []
        for limit in range(1, 6):
            o = ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "live",
                                   "kafka.isolation.level": "read_committed", "startingOffsets": "earliest",
                                   "remote.storage.uri": f"file://{tmp_path}/remote",
                                   "maxOffsetsPerTrigger": str(limit)}, streaming=True)
            client = BrokerClient.for_read(o)
            planner = StreamPlanner(o, client)
            streams.append([o, client, planner, planner.initial(), []])
        live.thread.start()
        try:
            def step(s) -> bool:
                o, _, planner, start, got = s
                end = planner.next_end(start, limited=True)
                if end == start:
                    return False
                batch = range_options(o, start, end)
                for task in planning.plan(batch).tasks:
                    reader = TaskReader(batch)
                    try:
                        got += [(off, bytes(v)) for b in reader.read(task) for off, v in
                                zip(b.column("offset").to_pylist(), b.column("value").to_pylist(), strict=True)]
                    finally:
                        reader.close()
                s[3] = end
                return True
            while live.thread.is_alive():
                for s in streams:
                    step(s)
            live.thread.join()
            assert live.error is None, live.error
            end = live.end()
            for s in streams:
                while step(s):
                    pass
                assert s[3] == {("live", 0): end}
                assert s[4] == live.expected(), f"maxOffsetsPerTrigger {s[0].max_offsets_per_trigger}"
            assert len(c.remote_segments("live", 0)) >= 3, "segments tiered while the streams read"
        finally:
            for s in streams:
                s[1].close()


@pytest.mark.spark
def test_a_spark_stream_follows_live_transactions_while_segments_tier(sp, tmp_path):
    import time
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{tmp_path}/remote", kip1248=False,
                         remote_log_metadata_partitions=3) as c:
        c.create_topic("live", 1)
        live = LiveProducers(c, "live", rounds=3)
        df = (sp.readStream.format("kafka-tiered")
              .options(**{"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "live",
                          "kafka.isolation.level": "read_committed", "startingOffsets": "earliest",
                          "remote.storage.uri": f"file://{tmp_path}/remote", "maxOffsetsPerTrigger": "5"})
              .load())
        q = (df.writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="0 seconds").start())
        try:
            live.thread.start()
            live.thread.join(120)
            assert live.error is None, live.error
            end = live.end()
            deadline = time.monotonic() + 180
            reached = -1
            while reached < end and time.monotonic() < deadline:
                assert q.exception() is None, q.exception()
                for progress in q.recentProgress:
                    for source in progress.get("sources", []):
                        stop = source.get("endOffset")
                        stop = json.loads(stop) if isinstance(stop, str) else stop
                        if isinstance(stop, dict):
                            reached = max(reached, int(stop.get("live", {}).get("0", -1)))
                time.sleep(0.1)
            assert reached == end, f"the stream reached {reached} of {end}"
            assert all(p["numInputRows"] <= 5 for p in q.recentProgress)
        finally:
            q.stop()
        got = sorted((r.offset, r.value) for r in sp.read.parquet(str(tmp_path / "out")).collect())
        assert [(o, b64(v)) for o, v in got] == [(o, b64(v)) for o, v in live.expected()]
        assert c.remote_segments("live", 0), "segments tiered while the stream read"
