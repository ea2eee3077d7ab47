"""read_committed never returns a record of an aborted transaction, wherever a read, a task or a
micro-batch ends (issue 33): the markers of transactions open at a range's end lie past it, in
the same segment, the next one, several copies later, the local tail, past the LSO.

The topics are written by construction (tests/txn_topics.py: hand-built batches and markers
through the embedded broker's append API, or confluent-kafka's transactional producer): each
value names its transaction and outcome, and the expected rows of ``[start, end)`` are the
committed transactions' and non-transactional values there.  Reads go through the planner and
``TaskReader`` (cheap enough to sweep every end; the sweeps run with both decoders), ``scan()``
and ``export``; Spark runs the few cases of tests/test_txn_spark.py."""
from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from txn_topics import LAYOUT_LSO, MOVED_LSO, OFFLINE_END, build_layout, build_moved, ts_of

import kafka_tiered_source as kts
from kafka_tiered_source import planning
from kafka_tiered_source.errors import UnresolvedTransactionError
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning.where import parse_where
from kafka_tiered_source.testing import EmbeddedCluster

TOPIC = "txns"


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """``{kip1248: (cluster, TxnTopic)}``: the layout on a KIP-1248 broker and on today's Kafka
    (an offset-index entry per batch, so tasks split anywhere)."""
    out, started = {}, []
    try:
        for kip in (True, False):
            base = tmp_path_factory.mktemp(f"txn-ends-{'kip' if kip else 'today'}")
            c = EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", kip1248=kip,
                                index_interval_bytes=1, remote_log_metadata_partitions=3).start()
            started.append(c)
            c.remote_dir = str(base / "remote")
            out[kip] = (c, build_layout(c, TOPIC))
        yield out
    finally:
        for c in started:
            c.stop()


def options(c, *, locator: str | None = "auto", start=None, end=None, broker: bool = True, **extra) -> dict:
    o = {"subscribe": TOPIC, "kafka.isolation.level": "read_committed",
         "remote.storage.uri": f"file://{c.remote_dir}", **extra}
    if broker:
        o["kafka.bootstrap.servers"] = c.bootstrap_servers
        o["remote.segment.locator"] = locator
    if start is not None:
        o["startingOffsets"] = json.dumps({TOPIC: {"0": start}})
    if end is not None:
        o["endingOffsets"] = json.dumps({TOPIC: {"0": end}})
    return o


def rows(opts: dict, where=None) -> list[tuple[int, bytes]]:
    """``(offset, value)`` of a read planned and run as executors run it (one TaskReader per task)."""
    return rows_of_options(ReadOptions.parse(opts), parse_where(where) if where is not None else None)


def rows_of_options(o, row_filter=None) -> list[tuple[int, bytes]]:
    out = []
    for task in planning.plan(o, row_filter).tasks:
        reader = TaskReader(o, row_filter=row_filter)
        try:
            for b in reader.read(task):
                out += zip(b.column("offset").to_pylist(), map(bytes, b.column("value").to_pylist()), strict=True)
        finally:
            reader.close()
    return out


def locators(kip: bool) -> list[str]:
    return (["kip1248"] if kip else []) + ["metadata-topic", "listing"]


@pytest.mark.decoder
@pytest.mark.parametrize("kip", [True, False], ids=["kip1248-broker", "todays-kafka"])
def test_every_ending_offset_with_every_locator_gives_the_committed_rows(layouts, kip):
    c, t = layouts[kip]
    for loc in locators(kip):
        for end in range(LAYOUT_LSO + 1):
            # tasks of 1 to 4 records: splits fall inside transactions too
            got = rows(options(c, locator=loc, end=end, maxRecordsPerPartition=str(1 + end % 4)))
            assert got == t.expected(0, end), f"{loc}, endingOffsets {end}"
        # "latest" is the LSO: H is open from 28, and G's marker (30) lies past it
        assert rows(options(c, locator=loc)) == t.expected(0, LAYOUT_LSO), f"{loc}, latest"


@pytest.mark.decoder
@pytest.mark.parametrize("kip", [True, False], ids=["kip1248-broker", "todays-kafka"])
def test_every_ending_offset_across_a_leader_move_with_overlapping_copies(layouts, kip):
    """The markers past the end are taken from the copy that serves them on the lineage: R's
    (16) is in the old leader's copy [9, 16] and the new one's [14, 25], which serves it."""
    c, _ = layouts[kip]
    t = build_moved(c, "moved")
    for loc in (["kip1248"] if kip else ["metadata-topic", "listing"]):
        for end in range(MOVED_LSO + 1):
            got = rows({**options(c, locator=loc, end=end), "subscribe": "moved",
                        "endingOffsets": json.dumps({"moved": {"0": end}})})
            assert got == t.expected(0, end), f"{loc}, endingOffsets {end}"


@pytest.mark.decoder
def test_every_ending_offset_offline_gives_the_committed_rows(layouts):
    c, t = layouts[False]
    for end in range(OFFLINE_END + 1):
        got = rows(options(c, broker=False, end=end, maxRecordsPerPartition=str(1 + end % 3)))
        assert got == t.expected(0, end), f"offline, endingOffsets {end}"
    assert rows(options(c, broker=False)) == t.expected(0, OFFLINE_END)


@pytest.mark.parametrize("kip", [True, False], ids=["kip1248-broker", "todays-kafka"])
def test_reads_that_start_and_end_inside_transactions(layouts, kip):
    c, t = layouts[kip]
    loc = "auto"
    for start in (5, 15):                     # inside B (4-5, 15-16), after A's marker
        for end in range(start, LAYOUT_LSO + 1):
            assert rows(options(c, locator=loc, start=start, end=end)) == t.expected(start, end), \
                f"[{start}, {end})"


@pytest.mark.parametrize("kip", [True, False], ids=["kip1248-broker", "todays-kafka"])
def test_pushed_down_offsets_and_times_and_timestamp_ends(layouts, kip):
    c, t = layouts[kip]
    at = lambda offset: dt.datetime.fromtimestamp(ts_of(offset) / 1000, dt.timezone.utc)  # noqa: E731
    for loc in locators(kip):
        for start, end in ((0, 16), (5, 21), (13, 28)):
            # offset pushdown narrows the end, a timestamp lower bound moves the start
            where = [("offset", "<", end), ("timestamp", ">=", at(start))]
            assert rows(options(c, locator=loc), where) == t.expected(start, end), f"{loc} where [{start}, {end})"
        for end in (5, 16, 27):
            # endingTimestamp: the first record at or after it (markers' timestamps are far older)
            want = t.expected(0, t.first_data_at_or_after(end))
            assert rows(options(c, locator=loc, endingTimestamp=str(ts_of(end)))) == want, f"{loc} ts {end}"


def test_scan_and_export_end_inside_transactions(layouts, tmp_path):
    import pyarrow.dataset as ds
    from kafka_tiered_source.cli import main
    c, t = layouts[False]
    for end in (5, 16, LAYOUT_LSO):
        with kts.scan(options(c, end=end)) as reader:
            table = reader.read_all()
        got = list(zip(table.column("offset").to_pylist(), map(bytes, table.column("value").to_pylist()), strict=True))
        assert got == t.expected(0, end), f"scan to {end}"
    to = tmp_path / "out"
    code = main(["export", "--bootstrap-servers", c.bootstrap_servers, "--topic", TOPIC, "--isolation-level",
                 "read_committed", "--remote-storage-uri", f"file://{c.remote_dir}", "--to", str(to),
                 "-o", "endingOffsets=" + json.dumps({TOPIC: {"0": 16}})])
    assert code == 0
    table = ds.dataset(str(to), format="parquet", partitioning="hive").to_table().sort_by("offset")
    got = list(zip(table.column("offset").to_pylist(), map(bytes, table.column("value").to_pylist()), strict=True))
    assert got == t.expected(0, 16)


def test_micro_batches_of_one_to_five_offsets_give_the_committed_rows(layouts):
    """A stream's micro-batches end anywhere: maxOffsetsPerTrigger 1-5 (4 with a maxTriggerDelay,
    5 with Trigger.AvailableNow) (the Spark-free stream planner, each micro-batch planned and read as
    the Spark source does) on the KIP-1248 broker; today's Kafka follows live producers in
    tests/test_txn_spark.py."""
    from kafka_tiered_source.planning.stream import StreamPlanner, range_options
    from kafka_tiered_source.protocol.client import BrokerClient
    c, t = layouts[True]
    for limit in range(1, 6):
        # limit 4: the last micro-batch is below minOffsetsPerTrigger, its maxTriggerDelay over
        delayed = {"minOffsetsPerTrigger": "4", "maxTriggerDelay": "0s"} if limit == 4 else {}
        o = ReadOptions.parse({**options(c), "startingOffsets": "earliest", "maxOffsetsPerTrigger": str(limit),
                               **delayed}, streaming=True)
        got: list = []
        with BrokerClient.for_read(o) as client:
            sp = StreamPlanner(o, client)
            if limit == 5:
                sp.prepare_available_now()
            start = sp.initial()
            while True:
                end = sp.next_end(start, limited=True)
                if end == start:
                    break
                assert end[(TOPIC, 0)] - start[(TOPIC, 0)] <= limit
                batch = range_options(o, start, end)
                got += rows_of_options(batch)
                start = end
        assert start[(TOPIC, 0)] == LAYOUT_LSO
        assert got == t.expected(0, LAYOUT_LSO), f"maxOffsetsPerTrigger {limit}"


def test_what_finding_markers_past_the_end_costs_is_in_the_estimate_and_the_job_description(layouts, capsys):
    from kafka_tiered_source.planning.estimate import estimate_plan
    from kafka_tiered_source.planning.txn_ends import MarkerCost
    from kafka_tiered_source.spark.jobs import describe
    c, _ = layouts[False]
    # ends inside B (open from 4, marker 21 in the fourth copy, whose entry's LSO, 19, proves
    # the search complete): that copy's manifest and the 34-byte index (aiven layout)
    manifest = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(c.remote_dir) for f in fs
                if f.startswith("00000000000000000019-") and f.endswith(".rsm-manifest")]
    assert len(manifest) == 1
    o = ReadOptions.parse(options(c, locator="metadata-topic", end=16))
    plan = planning.plan(o)
    cost = plan.marker_costs[(TOPIC, 0)]
    assert (cost.index_gets, cost.index_bytes, cost.broker_fetches) == (2, manifest[0] + 34, 0)
    est = estimate_plan(plan, o)
    assert est.markers == cost and est.as_dict()["markers"]["index_gets"] == 2
    assert est.by_partition[f"{TOPIC}-0"]["markers"] == cost.as_dict()
    assert f"markers past the ends: 2 GETs ({manifest[0] + 34:,} bytes) of later transaction indexes" in str(est)
    assert describe(plan).endswith("(markers past the end: 2 GETs)")
    from kafka_tiered_source.cli import main
    assert main(["estimate", "--bootstrap-servers", c.bootstrap_servers, "--topic", TOPIC, "--isolation-level",
                 "read_committed", "--remote-storage-uri", f"file://{c.remote_dir}", "-o",
                 "endingOffsets=" + json.dumps({TOPIC: {"0": 16}}), "-o", "remote.segment.locator=metadata-topic"]) == 0
    assert (f"read_committed: finding the markers of transactions open at the ends took 2 GETs "
            f"({manifest[0] + 34:,} bytes) of later transaction indexes and 0 broker fetches") in capsys.readouterr().out
    # to the LSO: nothing tiered past it, so one broker fetch at LSO - 1
    plan = planning.plan(ReadOptions.parse(options(c, locator="metadata-topic")))
    cost = plan.marker_costs[(TOPIC, 0)]
    assert (cost.index_gets, cost.broker_fetches) == (0, 1) and cost.broker_bytes > 0
    # nothing spent where the range's own entries prove it, or read_uncommitted
    plan = planning.plan(ReadOptions.parse({**options(c, locator="metadata-topic", end=16),
                                            "kafka.isolation.level": "read_uncommitted"}))
    assert plan.marker_costs == {} and estimate_plan(plan, o).markers == MarkerCost()


def test_a_tiered_range_after_a_broker_range_in_one_task_keeps_the_markers_read_between(layouts):
    """A task [tiered, broker, tiered] of one partition: the ABORT read through the broker ends
    its transaction for the tiered range after it too (the filter is fed the broker's batches)."""
    from dataclasses import replace
    from kafka_tiered_source.planning.tasks import BrokerRange, RemoteRange
    c, t = layouts[False]
    o = ReadOptions.parse(options(c, locator="metadata-topic", end=LAYOUT_LSO))
    (task,) = planning.plan(o).tasks
    remote = [r for r in task.ranges if isinstance(r, RemoteRange)]
    assert [(r.offset_start, r.offset_end) for r in remote] == [(0, 9), (9, 14), (14, 19), (19, 25)]
    # the copies [9, 13] (D 12-13) and [14, 18] (D's ABORT) through the broker: D's producer
    # commits F (19-20) in the tiered range after them, which a filter that never saw the ABORT
    # would drop as D's
    middle = [BrokerRange(r.topic, r.partition, r.segment.topic_id, r.offset_start, r.offset_end, 0)
              if r in remote[1:3] else r for r in task.ranges]
    reader = TaskReader(o)
    try:
        got = [(off, bytes(v)) for b in reader.read(replace(task, ranges=tuple(middle)))
               for off, v in zip(b.column("offset").to_pylist(), b.column("value").to_pylist(), strict=True)]
    finally:
        reader.close()
    assert got == t.expected(0, LAYOUT_LSO)


# ---------------------------------------------------------------------------------------------
# a later copy's transaction index that cannot be read
@pytest.fixture(scope="module")
def local_tiered(tmp_path_factory):
    base = tmp_path_factory.mktemp("txn-ends-local-tiered")
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", kip1248=False,
                         layout="kafka-local-tiered", remote_log_metadata_partitions=3) as c:
        c.remote_dir = str(base / "remote")
        t = build_layout(c, TOPIC)
        # the fourth copy holds B's marker (21): its .txnindex is cut to half an entry
        (fourth,) = [s for s in c.remote_segments(TOPIC, 0) if s.base_offset == 19]
        paths = [os.path.join(d, f) for d, _, fs in os.walk(c.remote_dir) for f in fs
                 if f.endswith(".txnindex") and fourth.segment_id in f]
        assert len(paths) == 1 and os.path.getsize(paths[0]) == 34
        with open(paths[0], "r+b") as f:
            f.truncate(17)
        yield c, t


def _local_options(c, **extra) -> dict:
    return options(c, locator="metadata-topic", **{"remote.storage.layout": "kafka-local-tiered", **extra})


def test_an_unreadable_marker_index_is_asked_of_the_broker(local_tiered, caplog):
    c, t = local_tiered
    assert rows(_local_options(c, end=16)) == t.expected(0, 16)
    assert any("cannot be read" in r.getMessage() for r in caplog.records)


def test_an_unreadable_marker_index_with_fallback_never_fails_naming_the_transaction(local_tiered):
    c, t = local_tiered
    with pytest.raises(UnresolvedTransactionError) as info:
        rows(_local_options(c, end=16, **{"fetch.remote.fallback": "never"}))
    e = info.value
    assert (e.topic, e.partition, e.offset, e.producer_ids) == (TOPIC, 0, 16, (2,))
    assert "txns-0" in str(e) and "producer 2 from offset 4" in str(e) and "offset 16" in str(e)


# ---------------------------------------------------------------------------------------------
# a real client: confluent-kafka's transactional producers, interleaved, against the broker
class Written:
    """What the producers were told was written: offset -> value, and each transaction's fate."""

    def __init__(self):
        self.values: dict[int, bytes] = {}
        self.outcome: dict[str, str] = {}

    def expected(self, end: int) -> list[tuple[int, bytes]]:
        out = []
        for o in sorted(self.values):
            v = self.values[o]
            name = v.split(b"/")[0].decode()
            if o < end and (name == "plain" or self.outcome[name] == "commit"):
                out.append((o, v))
        return out


def _send(producer, topic: str, written: Written, name: str, outcome: str, n: int) -> None:
    def delivered(err, msg):
        assert err is None, err
        written.values[msg.offset()] = msg.value()
    for i in range(n):
        producer.produce(topic, value=b"%s/%s/%d" % (name.encode(), outcome.encode(), i), partition=0,
                         on_delivery=delivered)
    assert producer.flush(30) == 0


def _confluent_topic(c, topic: str) -> tuple[Written, int]:
    """Two transactional producers and a plain one, interleaved, aborting and committing across
    segments that tier; a local tail with a transaction left open and an abort past the LSO.
    Returns what was written and the LSO by construction (the open transaction's first offset)."""
    import confluent_kafka as ck
    from broker_fixtures import LIBRDKAFKA_QUIET
    c.create_topic(topic, 1)
    base = {"bootstrap.servers": c.bootstrap_servers, "linger.ms": 0, "transaction.timeout.ms": 900_000,
            **LIBRDKAFKA_QUIET}
    w = Written()
    plain = ck.Producer({**base, "enable.idempotence": True})
    p1 = ck.Producer({**base, "transactional.id": "one"})
    p2 = ck.Producer({**base, "transactional.id": "two"})
    for p in (p1, p2):
        p.init_transactions(30)

    def end(p, name, commit):
        (p.commit_transaction if commit else p.abort_transaction)(30)
        w.outcome[name] = "commit" if commit else "abort"

    p1.begin_transaction()
    _send(p1, topic, w, "a1", "abort", 3)
    p2.begin_transaction()
    _send(p2, topic, w, "b1", "commit", 3)
    _send(plain, topic, w, "plain", "", 2)
    c.roll(topic, 0)
    _send(p1, topic, w, "a1", "abort", 2)
    end(p1, "a1", False)                      # the next segment
    _send(plain, topic, w, "plain", "", 2)
    c.roll(topic, 0)
    _send(p2, topic, w, "b1", "commit", 2)
    p1.begin_transaction()
    _send(p1, topic, w, "a2", "commit", 2)
    c.roll(topic, 0)
    _send(plain, topic, w, "plain", "", 2)
    end(p2, "b1", True)                       # three segments after its first records
    end(p1, "a2", True)
    c.roll(topic, 0)
    p2.begin_transaction()
    _send(p2, topic, w, "b2", "abort", 2)
    c.roll(topic, 0)
    end(p2, "b2", False)
    _send(plain, topic, w, "plain", "", 1)
    c.roll(topic, 0)
    assert c.tier(topic)
    p1.begin_transaction()                    # the local tail
    _send(p1, topic, w, "a3", "abort", 2)
    p3 = ck.Producer({**base, "transactional.id": "three"})
    p3.init_transactions(30)
    p3.begin_transaction()
    _send(p3, topic, w, "c1", "commit", 2)    # left open: the LSO stays at its first offset
    lso = min(o for o, v in w.values.items() if v.startswith(b"c1/"))
    end(p1, "a3", False)                      # its marker lies past the LSO
    _send(plain, topic, w, "plain", "", 2)
    return w, lso


def test_confluent_transactional_producers_every_ending_offset(tmp_path):
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{tmp_path}/remote", kip1248=False,
                         remote_log_metadata_partitions=3) as c:
        c.remote_dir = str(tmp_path / "remote")
        w, lso = _confluent_topic(c, TOPIC)
        assert c.offsets(TOPIC, 0).last_stable_offset == lso
        tiered_end = max(s.end_offset for s in c.remote_segments(TOPIC, 0))
        assert 0 < tiered_end < lso
        for loc in ("metadata-topic", "listing"):
            for end in range(lso + 1):
                got = rows(options(c, locator=loc, end=end, maxRecordsPerPartition=str(1 + end % 3)))
                assert got == w.expected(end), f"{loc}, endingOffsets {end}"
            assert rows(options(c, locator=loc)) == w.expected(lso), f"{loc}, latest"


def test_the_search_stops_on_an_entrys_last_stable_offset_not_on_its_marker():
    """Kafka's collectAbortedTxns ends on lastStableOffset >= the bound.  A stop on the marker
    (lastOffset) would miss A here: B's marker (15) lies past the end (10), but A, open at 10,
    aborts later (20); B's entry says so (its LSO, 5, is A's first offset)."""
    from kafka_tiered_source.planning.plan import PartitionRange
    from kafka_tiered_source.planning.tasks import AbortedTransaction
    from kafka_tiered_source.planning.txn_ends import PastEnd
    from kafka_tiered_source.storage.indexes import AbortedTxn
    from kafka_tiered_source.storage.segment import RemoteSegment

    def seg(n, base, end):
        return RemoteSegment("t", "AAAAAAAAAAAAAAAAAAAAAA", 0, f"copy{n}", base, end, 100)

    class Indexes:
        def __init__(self, entries):
            self.entries_of, self.read = entries, []

        def entries(self, s, cost=None):
            self.read.append(s.segment_id)
            return self.entries_of[s.segment_id]

    copies = [seg(1, 10, 17), seg(2, 18, 29), seg(3, 30, 39)]
    after = [(10, 18, copies[0]), (18, 30, copies[1]), (30, 40, copies[2])]
    pr = PartitionRange("t", 0, "AAAAAAAAAAAAAAAAAAAAAA", 0, 10, 0, 40)
    idx = Indexes({"copy1": [AbortedTxn(2, 12, 15, 5)], "copy2": [AbortedTxn(1, 5, 20, 21)], "copy3": []})
    assert PastEnd(pr, after, idx).aborted == (AbortedTransaction(1, 5),)
    assert idx.read == ["copy1", "copy2"]               # proven at A's entry: copy3 never read
    # an entry whose LSO reaches the end proves it at once
    idx = Indexes({"copy1": [AbortedTxn(2, 12, 15, 16)], "copy2": [AbortedTxn(1, 5, 20, 21)], "copy3": []})
    assert PastEnd(pr, after, idx).aborted == () and idx.read == ["copy1"]


def test_a_long_open_transaction_bounds_the_walk_and_the_broker_answers_the_rest(layouts):
    """L stays open across twelve copies while K aborts in each: no entry's LSO reaches an end
    inside L, so the walk reads WALK_GETS copies' indexes and then asks the broker once."""
    from txn_topics import TxnTopic
    from kafka_tiered_source.planning.txn_ends import WALK_GETS
    c, _ = layouts[False]
    c.create_topic("long", 1)
    t = TxnTopic(c, "long")
    t.txn("L", 2, pid=30, outcome="commit")
    for i in range(12):
        t.txn(f"K{i}", 2, pid=31, outcome="abort")
        t.end(f"K{i}")
        t.plain(1)
        t.roll()
    t.end("L")
    t.plain(1)
    t.roll()
    assert len(c.tier("long")) == 13
    t.plain(2)
    for end in (3, 7, 30):
        o = ReadOptions.parse({**options(c, locator="metadata-topic", end=end), "subscribe": "long",
                               "endingOffsets": json.dumps({"long": {"0": end}})})
        assert rows_of_options(o) == t.expected(0, end), end
    plan = planning.plan(ReadOptions.parse({**options(c, locator="metadata-topic"), "subscribe": "long",
                                            "endingOffsets": json.dumps({"long": {"0": 3}})}))
    cost = plan.marker_costs[("long", 0)]
    assert (cost.index_gets, cost.broker_fetches) == (2 * WALK_GETS, 1)     # a manifest and an index each
