"""Random histories of one partition (hypothesis), each replayed on two embedded brokers — today's
Kafka (``kip1248=False``, Aiven layout) and one answering KIP-1248 (LocalTieredStorage layout):
produce (plain, keyed, compressed), transactions committed and aborted, rolls of the leader or
of a replica that rolls at its own offsets, tiering, clean leader moves (new epochs; the new
leader's copies overlap the old ones), stale copies from an unclean leader (off the lineage),
re-uploads on the lineage, remote retention.  Every locator's plan (kip1248, metadata-topic,
listing, auto; and the listing without a broker, which reads or refuses by name), read by
TaskReader in both isolation levels, must equal what kafka-python consumes from the same broker,
offset for offset.  A handful of reads go through Spark.  Examples that once failed are kept
below as ``@example``."""
from __future__ import annotations

import base64
import itertools
from itertools import pairwise
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_fixtures import consume_kafka_python
from histories import History, rows_of
from spark_helpers import collect_rows, load, read_tasks

from kafka_tiered_source import planning
from kafka_tiered_source.errors import ConfigError, OfflinePlanningError
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.testing import EmbeddedCluster

ISOLATION = ["read_uncommitted", "read_committed"]
_topics = itertools.count()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    base = tmp_path_factory.mktemp("histories")
    with EmbeddedCluster(str(base / "today"), remote_storage=f"file://{base}/today-remote", kip1248=False,
                         remote_log_metadata_partitions=3, segment_bytes=1 << 20) as today, \
            EmbeddedCluster(str(base / "kip"), remote_storage=f"file://{base}/kip-remote", kip1248=True,
                            layout="kafka-local-tiered", segment_bytes=1 << 20) as kip:
        today.remote_dir, today.layout, today.locators = f"{base}/today-remote", "aiven", \
            ("metadata-topic", "listing", "auto")
        kip.remote_dir, kip.layout, kip.locators = f"{base}/kip-remote", "kafka-local-tiered", ("kip1248",)
        warm_up(today)
        yield today, kip


def warm_up(c) -> None:
    """One copy made, so ``__remote_log_metadata`` exists (a broker with remote storage has it
    from the start; the embedded one makes it with its first copy)."""
    c.create_topic("warm-up")
    History(c, "warm-up").produce(1)
    c.roll("warm-up", 0)
    c.tier("warm-up")


# --- operations ------------------------------------------------------------------------------
def op_strategy():
    return st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 40), st.booleans(), st.sampled_from([0, 1, 4])),
        st.tuples(st.just("txn"), st.integers(1, 15), st.booleans(), st.integers(0, 12)),
        st.tuples(st.just("roll"), st.sampled_from([None, 1])),
        st.tuples(st.just("tier")),
        st.tuples(st.just("move"), st.sampled_from([0, 1])),
        st.tuples(st.just("stale")),
        st.tuples(st.just("reupload")),
        st.tuples(st.just("expire")),
    )


@st.composite
def rounds(draw):
    """One round of a history: records (and maybe a whole transaction among them), rolls, maybe
    tiering, maybe one event (a leader move, an unclean or a re-uploaded copy, retention)."""
    ops = [("produce", draw(st.integers(1, 40)), draw(st.booleans()), draw(st.sampled_from([0, 0, 1, 4])))]
    if draw(st.integers(0, 2)) == 0:
        n, commit, between = draw(st.integers(1, 15)), draw(st.booleans()), draw(st.integers(0, 12))
        ops += [("txn", n, commit, between), ("txn", 1, commit, 0)]
    if draw(st.booleans()):
        ops.append(("roll", 1))
    if draw(st.integers(0, 3)) > 0:
        ops.append(("roll", None))
    if draw(st.integers(0, 3)) > 0:
        ops.append(("tier",))
    event = draw(st.sampled_from([None, None, ("move", 0), ("move", 1), ("move", 1), ("stale",), ("reupload",),
                                  ("expire",)]))
    if event is not None:
        ops.append(event)
    return ops


histories = st.tuples(st.lists(rounds(), min_size=2, max_size=7).map(lambda rs: [op for r in rs for op in r])
                      | st.lists(op_strategy(), min_size=3, max_size=25),
                      st.sampled_from([None, 400, 1_500]))


def stale_copy(h: History, start: int, end: int, epoch: int) -> bytes:
    """Other records at the offsets of [start, end] (batch-aligned), written in ``epoch``: what
    an unclean leader held there."""
    out = b""
    for w in h.written:
        if start <= w.base and w.last <= end:
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                          producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
            for i in range(w.last - w.base + 1):
                b.append(i, timestamp=1, key=None, value=b"stale-%d" % (w.base + i), headers=[])
            data = bytearray(b.build())
            struct.pack_into(">q", data, 0, w.base)
            struct.pack_into(">i", data, 12, epoch)
            out += bytes(data)
    return out


def play(c, topic: str, ops, retention_bytes) -> History:
    c.create_topic(topic, retention_bytes=retention_bytes)
    replica = c.add_replica(topic, 0, segment_bytes=1_500)      # rolls by size, elsewhere
    h = History(c, topic)
    open_pid = None
    for op in ops:
        kind = op[0]
        if kind == "produce":
            h.produce(op[1], keyed=op[2], codec=op[3], per_batch=7)
        elif kind == "txn":
            pid = 100
            if open_pid is None:
                h.produce(op[1], pid=pid, per_batch=5)
                open_pid = pid
                if op[3] > 6:           # records of others between the transaction's
                    h.produce(op[3], per_batch=4)
            else:
                h.end_txn(pid, commit=op[2])
                open_pid = None
        elif kind == "roll":
            c.roll(topic, 0, op[1] if op[1] is None else replica)
        elif kind == "tier":
            c.tier(topic)
        elif kind == "move":
            c.move_leader(topic, 0, replica if op[1] else 0)
        elif kind in ("stale", "reupload"):
            # a stale copy: another range's records under an epoch off the lineage; a re-upload:
            # a duplicate of a copy the broker serves from (a retried copy).  (A copy finishing
            # inside one that superseded it — an old leader's late copy — makes Kafka's own
            # look-up fail; test_overlapping_copies reads that case against the records written.)
            served = list(c.storage.partition(topic, 0).remote.chain(c.offsets(topic, 0).log_start_offset))
            if served:
                m = served[len(served) // 2]
                aligned = [w for w in h.written if m.base_offset <= w.base and w.last <= m.end_offset]
                if aligned and aligned[0].base == m.base_offset:
                    s, e = aligned[0].base, aligned[-1].last
                    if kind == "stale":
                        c.upload_segment_copy(topic, 0, stale_copy(h, s, e, 1000 + len(served)))
                    else:
                        c.upload_segment_copy(topic, 0, h.data_between(s, e), live=True, end_offset=m.end_offset)
        elif kind == "expire":
            c.expire(topic)
    return h


def options(c, topic, iso, locator, **extra) -> ReadOptions:
    return ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": topic,
                              "kafka.isolation.level": iso, "remote.storage.uri": f"file://{c.remote_dir}",
                              "remote.storage.layout": c.layout, "remote.segment.locator": locator, **extra})


def consumed(c, topic, iso) -> list[tuple]:
    return [(r["offset"], _raw(r["key"]), _raw(r["value"])) for r in
            consume_kafka_python(c.bootstrap_servers, topic, 0, read_committed=iso == "read_committed")]


def _raw(v):
    return None if v is None else base64.b64decode(v)


def check(c, topic: str, h: History) -> None:
    for iso in ISOLATION:
        want = consumed(c, topic, iso)
        assert want == h.expected(committed=iso == "read_committed", start=c.offsets(topic, 0).log_start_offset)
        for locator in c.locators:
            opts = options(c, topic, iso, locator)
            plan = planning.plan(opts)
            batches, totals = read_tasks(opts, plan.tasks)
            got = rows_of(batches, topic)
            assert got == want, (locator, iso, _diff(got, want))
            assert totals.fallbacks == 0, locator
        check_offline(c, topic, h, iso)


def check_offline(c, topic, h, iso) -> None:
    """Without a broker: what is tiered reads as the records written there, or is refused by name."""
    opts = ReadOptions.parse({"subscribe": topic, "kafka.isolation.level": iso,
                              "remote.storage.uri": f"file://{c.remote_dir}", "remote.storage.layout": c.layout})
    try:
        plan = planning.plan(opts)
    except OfflinePlanningError as exc:
        assert f"{topic}-0" in str(exc)
        return
    except ConfigError as exc:       # nothing tiered (yet, or any more)
        assert "has no tiered segments" in str(exc)
        return
    (pr,) = plan.partitions
    batches, _ = read_tasks(opts, plan.tasks)
    want = h.expected(committed=iso == "read_committed", start=pr.start, end=pr.end)
    assert rows_of(batches, topic) == want


def _diff(got, want) -> str:
    for i, (g, w) in enumerate(zip(got, want, strict=False)):   # the first difference, if any
        if g != w:
            return f"first difference at row {i}: got {g!r:.120} want {w!r:.120}"
    return f"got {len(got)} rows, want {len(want)}"


@settings(max_examples=int(__import__("os").environ.get("I24_EXAMPLES", "8")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(history=histories)
# a leader move to a replica that rolled elsewhere, then more tiering: overlapping copies
@example(history=([("produce", 40, False, 0), ("roll", 1), ("produce", 30, True, 4), ("roll", None),
                   ("produce", 25, False, 1), ("tier",), ("move", 1), ("produce", 40, False, 0),
                   ("roll", None), ("produce", 5, False, 0), ("tier",)], None))
# transactions across copies, a stale unclean copy, a re-upload, retention
@example(history=([("produce", 20, False, 0), ("txn", 10, False, 8), ("produce", 9, True, 0),
                   ("txn", 1, False, 0), ("roll", None), ("txn", 12, True, 2), ("produce", 30, False, 4),
                   ("txn", 1, True, 0), ("roll", None), ("produce", 12, False, 0), ("tier",), ("stale",),
                   ("reupload",), ("move", 1), ("produce", 33, False, 0), ("roll", 1), ("roll", None),
                   ("produce", 2, False, 0), ("tier",), ("expire",)], 400))
def test_every_locator_reads_what_kafka_python_consumes(brokers, history):
    ops, retention = history
    n = next(_topics)
    for c in brokers:
        topic = f"h{n}"
        h = play(c, topic, ops, retention)
        check(c, topic, h)


@pytest.mark.spark
def test_spark_reads_a_history_like_kafka_python(brokers, spark):  # noqa: F811 (the fixture)
    """One history with overlapping copies after a leader move, an aborted and a committed
    transaction, read with Spark: metadata-topic in both isolation levels, the listing and
    the KIP-1248 walk read_committed (each Spark read costs seconds; TaskReader covers the rest)."""
    ops = [("produce", 40, False, 0), ("roll", 1), ("txn", 10, False, 8), ("produce", 25, True, 4),
           ("txn", 1, False, 0), ("roll", None), ("produce", 30, False, 1), ("tier",), ("move", 1),
           ("txn", 8, True, 0), ("produce", 40, False, 0), ("txn", 1, True, 0), ("roll", None),
           ("produce", 5, False, 0), ("tier",), ("reupload",)]
    reads = {"aiven": [("metadata-topic", "read_uncommitted"), ("metadata-topic", "read_committed"),
                       ("listing", "read_committed")],
             "kafka-local-tiered": [("kip1248", "read_committed")]}
    for c in brokers:
        topic = "spark-history"
        play(c, topic, ops, None)
        copies = c.remote_segments(topic, 0)
        assert any(a.end_offset >= b.base_offset for a, b in pairwise(copies)), "copies overlap"
        for locator, iso in reads[c.layout]:
            want = consumed(c, topic, iso)
            df = load(spark, _spark_options(c, topic, iso, locator))
            got = [(r["offset"], _raw(r["key"]), _raw(r["value"])) for r in collect_rows(df)[(topic, 0)]]
            assert got == want, (locator, iso, _diff(got, want))


def _spark_options(c, topic, iso, locator) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": topic, "kafka.isolation.level": iso,
            "remote.storage.uri": f"file://{c.remote_dir}", "remote.storage.layout": c.layout,
            "remote.segment.locator": locator}
