"""Overlapping tiered copies on the embedded broker as today's Kafka (``kip1248=False``) and with
KIP-1248: the cases of issue 24 read every offset exactly once with every locator that sees the
lineage, in both isolation levels; copies overlap by themselves after a leader move to a replica
that rolls elsewhere; remote retention deletes leading copies and moves the log start offset;
KIP-1266 metadata records read the same; the invariant stops a broken locator; the listing
without a broker refuses overlapping copies by name.  Reads go through TaskReader (what a Spark
task runs); Spark itself is in test_histories.py."""
from __future__ import annotations

import logging
import os
import re
import struct

import pytest

from broker_fixtures import consume_kafka_python
from histories import History, rows_of
from spark_helpers import read_tasks
from storage_servers import LoggedStore

from kafka_tiered_source import planning
from kafka_tiered_source.errors import OfflinePlanningError, PlanningError
from kafka_tiered_source.options import ReadOptions, client_properties
from kafka_tiered_source.protocol import remote_log_metadata as rlm
from kafka_tiered_source.testing import EmbeddedCluster

ISOLATION = ["read_uncommitted", "read_committed"]
LOCATORS = ["metadata-topic", "listing", "auto"]
REMOTE_BYTES = "remote_fetch_bytes_total"


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    base = tmp_path_factory.mktemp("overlaps")
    # every batch but a segment's first in its offset index: a slice's GET starts at most one
    # batch before the slice and ends with it, so the GETs tell which copy served which offsets
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", kip1248=False,
                         remote_log_metadata_partitions=3, index_interval_bytes=1) as c:
        c.remote_dir = str(base / "remote")
        yield c


@pytest.fixture(scope="module")
def with_kip1248(tmp_path_factory):
    base = tmp_path_factory.mktemp("overlaps-kip1248")
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote",
                         layout="kafka-local-tiered") as c:
        c.remote_dir = str(base / "remote")
        c.layout = "kafka-local-tiered"
        yield c


def options(c, topic, iso="read_uncommitted", locator="auto", **extra) -> ReadOptions:
    return ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": topic,
                              "kafka.isolation.level": iso, "remote.storage.uri": f"file://{c.remote_dir}",
                              "remote.segment.locator": locator,
                              "remote.storage.layout": getattr(c, "layout", "aiven"), **extra})


def read(c, topic, iso, locator, **extra):
    opts = options(c, topic, iso, locator, **extra)
    plan = planning.plan(opts)
    LoggedStore.GETS.clear()                 # what the read asks of storage, not the planner
    batches, totals = read_tasks(opts, plan.tasks)
    return plan, rows_of(batches, topic), totals


def served_by_gets(c, topic, end: int) -> list[tuple[int, int, str]]:
    """``(start, end, segment id)``: which copy served which offsets of ``topic`` below ``end``
    (where the brokers take over), from what the last :func:`read` asked storage for.  A slice
    is read from where it starts to its copy's last byte, so each ``.log`` GET marks where a
    copy began to serve: its first byte 0 is the copy's base offset, any other position is an
    offset-index entry's batch, whose last offset + 1 is where the slice starts (the index
    holds every batch but the first: ``index_interval_bytes=1``).  A copy serves from there to
    where the next one begins.  The batches are walked in the object itself (baseOffset at 0,
    batchLength at 8, lastOffsetDelta at 23)."""
    starts = []
    for key, start, _ in LoggedStore.GETS:
        if not key.startswith(f"{topic}-") or not key.endswith(".log"):
            continue
        sid = re.search(r"-([A-Za-z0-9_-]{22})\.log$", key).group(1)
        base = int(re.search(r"/(\d{20})-", key).group(1))
        if start == 0:
            starts.append((base, sid))
            continue
        data = open(os.path.join(c.remote_dir, key), "rb").read()
        (first, delta) = struct.unpack_from(">q", data, start)[0], struct.unpack_from(">i", data, start + 23)[0]
        starts.append((first + delta + 1, sid))
    starts.sort()
    return [(s, nxt, sid) for (s, sid), nxt in zip(starts, [s for s, _ in starts[1:]] + [end], strict=True)]


def three_segments(c, topic, rolls=(100, 200), **topic_config) -> History:
    """250 records (an aborted transaction at 60-79, its marker at 80), rolled at ``rolls``,
    tiered: copies end at the next segment's base - 1."""
    c.create_topic(topic, **topic_config)
    h = History(c, topic)
    h.produce(60)
    h.produce(20, pid=7)
    h.end_txn(7, commit=False)
    h.produce(19)
    for n in (100, 200, 250):
        h.produce(n - (h.written[-1].last + 1))
        if n in rolls:
            c.roll(topic, 0)
    c.tier(topic)
    return h


def metadata_states(c, topic) -> dict:
    """Segment id -> the states its metadata records carry, in order (read with this project's
    client from the metadata partition Kafka's partitioner picks)."""
    from kafka_tiered_source.ids import uuid_from_str, uuid_to_str
    from kafka_tiered_source.protocol.client import BrokerClient
    from kafka_tiered_source.records import decode
    mp = rlm.metadata_partition(uuid_from_str(c.topic(topic).topic_id), 0, c.topic(rlm.TOPIC).partitions)
    out: dict = {}
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as client:
        offset = 0
        while True:
            res = client.fetch(rlm.TOPIC, mp, offset, max_bytes=1 << 20, partition_max_bytes=1 << 20)
            table = decode(res.records or b"", include_headers=False)
            if not table.num_rows:
                break
            for v in table.column("value").to_pylist():
                r = rlm.decode_record(v, where="test")
                sid = getattr(r, "remote_log_segment_id", None)
                if sid is not None and sid.topic_id_partition.name == topic:
                    out.setdefault(uuid_to_str(bytes(sid.id)), []).append(r.remote_log_segment_state)
            offset = table.column("offset").to_pylist()[-1] + 1
    return out


def upload(c, h, start, end):
    return c.upload_segment_copy(h.topic, 0, h.data_between(start, end), live=True)


# the cases of issue 24: (rolls, copies uploaded after tiering, which copy serves which offsets
# by RemoteLogMetadataCache's rule: "t<base>" the tiered copy starting there, "u<i>" upload i)
CASES = {
    # finishing last, [50, 149] takes 50-99 from [0, 99]; [100, 199] reaches further, keeps its own
    "partial overlap": ((100, 200), [(50, 149)], [(0, 50, "t0"), (50, 100, "u0"), (100, 200, "t100")]),
    # the inner copy's part ends at 99; Kafka's look-up finds nothing for 100-199, the outer holds them
    "a copy inside another": ((200,), [(50, 99)], [(0, 50, "t0"), (50, 100, "u0"), (100, 200, "t0")]),
    # reaching as far as every copy before it, [0, 199] displaces both
    "a copy spanning two": ((100, 200), [(0, 199)], [(0, 200, "u0")]),
    "two overlapping new copies": ((100, 200), [(50, 149), (120, 199)],
                                   [(0, 50, "t0"), (50, 100, "u0"), (100, 120, "t100"), (120, 200, "u1")]),
    # each duplicate replaces the copy at its start offset
    "duplicates": ((100, 200), [(100, 199), (0, 99)], [(0, 100, "u1"), (100, 200, "u0")]),
}


@pytest.mark.decoder
@pytest.mark.parametrize("case", list(CASES))
def test_every_offset_exactly_once_when_copies_overlap(today, case):
    rolls, uploads, serves = CASES[case]
    topic = "case-" + case.replace(" ", "-")
    h = three_segments(today, topic, rolls)
    ids = {f"t{m.base_offset}": m.segment_id for m in today.remote_segments(topic, 0)}
    ids.update({f"u{i}": upload(today, h, s, e).segment_id for i, (s, e) in enumerate(uploads)})
    for locator in LOCATORS:
        for iso in ISOLATION:
            before = today.storage.metrics.get(REMOTE_BYTES)
            plan, got, totals = read(today, topic, iso, locator, **{"remote.storage.fetcher.class":
                                                                   "storage_servers:LoggedStore"})
            want = h.expected(committed=iso == "read_committed")
            assert got == want, (locator, iso, len(got), len(want))
            assert plan.locators[(topic, 0)] == ("metadata-topic" if locator == "auto" else locator)
            assert totals.fallbacks == 0
            # every tiered offset read directly: no tiered byte went through the broker
            assert today.storage.metrics.get(REMOTE_BYTES) == before, (locator, iso)
            assert [r.offset_end for r in plan.broker_ranges] == [250]
            if locator == "listing":     # it cannot know the order copies finished in
                continue
            # what storage was asked for: each offset from the copy Kafka's rule picks
            assert served_by_gets(today, topic, 200) == [(s, e, ids[ref]) for s, e, ref in serves], (locator, iso)


def test_a_copy_finishing_inside_another_is_read_where_kafkas_own_lookup_fails(today):
    """An old leader's late copy [50, 99] inside [0, 199]: RemoteLogMetadataCache maps 50 to it,
    whose part of the epoch ends at 99, so a broker refuses 100-199 (OFFSET_OUT_OF_RANGE); the
    outer copy holds them, and the plan reads them from it."""
    from kafka_tiered_source.protocol.client import BrokerClient
    topic = "inside-kafka"
    h = three_segments(today, topic, rolls=(200,))
    upload(today, h, 50, 99)
    from kafka_tiered_source.errors import BrokerError
    with BrokerClient({"bootstrap.servers": today.bootstrap_servers}) as client:
        with pytest.raises(BrokerError) as info:
            client.fetch(topic, 0, 100, max_bytes=1 << 20, partition_max_bytes=1 << 20)
    assert info.value.error_name == "OFFSET_OUT_OF_RANGE"
    plan = planning.plan(options(today, topic, locator="metadata-topic"))
    assert [(r.offset_start, r.offset_end) for r in plan.remote_ranges] == [(0, 50), (50, 100), (100, 200)]
    _, got, _ = read(today, topic, "read_uncommitted", "metadata-topic")
    assert got == h.expected(committed=False)


@pytest.mark.decoder
def test_a_hole_between_copies_goes_to_the_broker_which_says_why(today):
    topic = "hole"
    h = three_segments(today, topic)
    (middle,) = [m for m in today.remote_segments(topic, 0) if m.base_offset == 100]
    today.storage.partition(topic, 0).remote.delete([middle])      # a copy lost: [100, 199] in no copy
    plan = planning.plan(options(today, topic))
    assert [(r.offset_start, r.offset_end) for r in plan.broker_ranges] == [(100, 250)]
    from kafka_tiered_source.errors import BrokerError
    with pytest.raises(BrokerError) as info:      # the broker serves it, or says why
        read_tasks(options(today, topic), plan.tasks)
    assert info.value.error_name == "OFFSET_OUT_OF_RANGE"
    # the offsets before the hole: read from the copy that holds them
    before = options(today, topic, endingOffsets='{"hole": {"0": 100}}')
    plan = planning.plan(before)
    assert [(r.offset_start, r.offset_end) for r in plan.remote_ranges] == [(0, 100)] and not plan.broker_ranges
    assert rows_of(read_tasks(before, plan.tasks)[0], topic) == h.expected(committed=False, end=100)


@pytest.mark.decoder
@pytest.mark.parametrize("layout_cluster", ["today", "with_kip1248"])
def test_a_leader_move_to_a_replica_that_rolls_elsewhere_overlaps_copies(request, layout_cluster):
    """Replica 1 rolls at 50 and 150, the leader at 100 and 200; after the leader moves to
    replica 1 (epoch 1 from 250), its copy task starts at its segment holding 200: [150, 309]."""
    c = request.getfixturevalue(layout_cluster)
    topic = "leader-move"
    c.create_topic(topic)
    r1 = c.add_replica(topic, 0)
    h = History(c, topic)
    h.produce(50); c.roll(topic, 0, r1)
    h.produce(50); c.roll(topic, 0)
    h.produce(20, pid=3); h.produce(30); c.roll(topic, 0, r1)
    h.produce(10, pid=3); h.end_txn(3, commit=False); h.produce(39); c.roll(topic, 0)
    h.produce(50)
    first = [(m.base_offset, m.end_offset) for m in c.tier(topic)]
    assert first == [(0, 99), (100, 199)]
    assert c.move_leader(topic, 0, r1) == 1
    h.produce(60); c.roll(topic, 0); h.produce(30)
    (moved,) = c.tier(topic)
    assert (moved.base_offset, moved.end_offset, moved.leader_epochs) == (150, 309, {0: 150, 1: 250})
    locators = ["kip1248"] if layout_cluster == "with_kip1248" else LOCATORS
    for iso in ISOLATION:
        committed = iso == "read_committed"
        consumer = [(r["offset"], r["key"], r["value"]) for r in
                    consume_kafka_python(c.bootstrap_servers, topic, 0, read_committed=committed)]
        want = h.expected(committed=committed)
        assert [w[0] for w in want] == [x[0] for x in consumer]
        for locator in locators:
            plan, got, totals = read(c, topic, iso, locator)
            assert got == want, (locator, iso)
            assert totals.fallbacks == 0


@pytest.mark.decoder
def test_remote_retention_deletes_leading_copies_and_moves_the_log_start(today, caplog):
    topic = "retained"
    today.create_topic(topic, retention_bytes=1)       # everything but the local-only tail
    h = History(today, topic)
    for _ in range(3):
        h.produce(100)
        today.roll(topic, 0)
    h.produce(30)
    today.tier(topic)
    assert len(today.remote_segments(topic, 0)) == 3
    gone = today.expire(topic)
    assert [(m.base_offset, m.end_offset) for m in gone] == [(0, 99), (100, 199), (200, 299)]
    assert today.offsets(topic, 0).log_start_offset == 300 and today.remote_segments(topic, 0) == []
    # each deletion is in __remote_log_metadata: DELETE_SEGMENT_STARTED, then FINISHED
    states = metadata_states(today, topic)
    assert {sid: st[2:] for sid, st in states.items()} == \
        {m.segment_id: [rlm.DELETE_SEGMENT_STARTED, rlm.DELETE_SEGMENT_FINISHED] for m in gone}
    # the deletions are in the metadata topic, and a plan from earliest starts at the log start
    plan = planning.plan(options(today, topic, locator="metadata-topic"))
    (pr,) = plan.partitions
    assert (pr.start, pr.end) == (300, 330) and plan.remote_ranges == []
    with pytest.raises(Exception) as info:
        planning.plan(options(today, topic, startingOffsets='{"%s":{"0":0}}' % topic))
    assert "starting offset 0 is below the log start offset 300" in str(info.value)
    _, got, _ = read(today, topic, "read_uncommitted", "metadata-topic")
    assert got == h.expected(committed=False, start=300)


@pytest.mark.decoder
def test_retention_by_time_keeps_the_copies_not_yet_expired(today):
    topic = "retained-by-time"
    today.create_topic(topic, retention_ms=60_000)
    h = History(today, topic)
    h.produce(100)
    today.roll(topic, 0)
    h.produce(10)
    today.tier(topic)
    (copy,) = today.remote_segments(topic, 0)
    # RemoteLogManager: a copy whose max timestamp <= now - retention.ms is deleted
    assert today.expire(topic, now_ms=copy.max_timestamp + 59_999) == []
    assert today.expire(topic, now_ms=copy.max_timestamp + 60_000) == [copy]
    assert today.offsets(topic, 0).log_start_offset == 100
    _, got, _ = read(today, topic, "read_committed", "metadata-topic")
    assert got == h.expected(committed=True, start=100)


@pytest.mark.decoder
def test_kip1266_keyed_metadata_records_and_tombstones_read_the_same(tmp_path):
    import kafka
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{tmp_path}/remote", kip1248=False,
                         remote_log_metadata_partitions=1, kip1266=True) as c:
        c.remote_dir = str(tmp_path / "remote")
        c.create_topic("t", retention_ms=1000)
        h = History(c, "t")
        for _ in range(2):
            h.produce(100)
            c.roll("t", 0)
        h.produce(50)
        c.tier("t")
        upload(c, h, 50, 149)
        first = min(c.remote_segments("t", 0), key=lambda m: m.base_offset)
        assert c.expire("t", now_ms=first.max_timestamp + 1000) == [first]    # [0, 99] expired
        consumer = kafka.KafkaConsumer(bootstrap_servers=c.bootstrap_servers, enable_auto_commit=False)
        tp = kafka.TopicPartition(rlm.TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        records = []
        while consumer.position(tp) < end:
            for batch in consumer.poll(timeout_ms=500).values():
                records += batch
        consumer.close()
        assert all(r.key is not None for r in records)
        tombstones = [r for r in records if r.value is None]
        assert tombstones and all(r.key.decode().split(":")[1] == "t" for r in tombstones)
        versions = {rlm.decode_record(r.value, where="test").__class__ for r in records if r.value is not None}
        assert rlm.SegmentUpdate in versions
        for iso in ISOLATION:
            for locator in ("metadata-topic", "listing"):
                plan, got, _ = read(c, "t", iso, locator)
                start = c.offsets("t", 0).log_start_offset
                assert got == h.expected(committed=iso == "read_committed", start=start), (iso, locator)


# --- the invariant, with each locator broken on purpose --------------------------------------
class _Broken:
    """A locator whose second piece of each partition is dropped (a hole) or repeated (an
    overlap)."""

    def __init__(self, inner, how):
        self.inner, self.how, self.name = inner, how, inner.name

    def refusal(self, pr):
        return self.inner.refusal(pr)

    def available(self):
        return self.inner.available()

    def locate_all(self, prs):
        out = self.inner.locate_all(prs)
        for loc in out.values():
            if len(loc.pieces) > 1:
                second = loc.pieces[1]
                loc.pieces = (loc.pieces[:1] + loc.pieces[2:] if self.how == "hole"
                              else loc.pieces[:2] + [second] + loc.pieces[2:])
        return out


def broken_plan(c, topic, locator, how):
    from kafka_tiered_source.planning.online import Planner
    from kafka_tiered_source.protocol.client import BrokerClient
    from kafka_tiered_source.storage.registry import create_fetcher

    class BrokenPlanner(Planner):
        def choice(self, ranges):
            choice = super().choice(ranges)
            choice.locators = {n: _Broken(loc, how) for n, loc in choice.locators.items()}
            return choice

    opts = options(c, topic, locator=locator)
    with BrokerClient(client_properties(opts)) as client:
        fetcher = create_fetcher(opts.storage)
        try:
            return BrokenPlanner(opts, client, fetcher).plan()
        finally:
            fetcher.close()


@pytest.mark.parametrize("how, fragment", [("hole", "are in no piece of the plan"),
                                           ("overlap", "are in two pieces of the plan")])
def test_a_broken_locator_is_a_planning_error_naming_partition_and_offsets(today, with_kip1248, how, fragment):
    for c, locators in ((today, ("metadata-topic", "listing")), (with_kip1248, ("kip1248",))):
        topic = f"broken-{how}"
        if topic not in c.topics:
            three_segments(c, topic)
        for locator in locators:
            with pytest.raises(PlanningError) as info:
                broken_plan(c, topic, locator, how)
            msg = str(info.value)
            assert msg.startswith(f"{topic}-0: offsets [100, 200) ") and fragment in msg, (locator, msg)


def test_a_broken_offline_listing_is_a_planning_error(today, monkeypatch):
    from kafka_tiered_source.planning.listing import StoreListing
    topic = "broken-offline"
    three_segments(today, topic)
    real = StoreListing.locate

    def dropping(self, pr):
        loc = real(self, pr)
        loc.pieces = loc.pieces[:1] + loc.pieces[2:]
        return loc
    monkeypatch.setattr(StoreListing, "locate", dropping)
    opts = ReadOptions.parse({"subscribe": topic, "remote.storage.uri": f"file://{today.remote_dir}"})
    with pytest.raises(PlanningError, match=rf"^{topic}-0: offsets \[100, 200\) of the range \[0, 200\) are in no piece"):
        planning.plan(opts)


def test_the_listing_without_a_broker_refuses_overlapping_copies_by_name(today, caplog):
    topic = "offline-overlap"
    h = three_segments(today, topic)
    extra = upload(today, h, 50, 149)
    opts = ReadOptions.parse({"subscribe": topic, "remote.storage.uri": f"file://{today.remote_dir}"})
    with pytest.raises(OfflinePlanningError) as info:
        planning.plan(opts)
    msg = str(info.value)
    assert f"{topic}-0" in msg and extra.segment_id in msg and "overlap" in msg
    # with a broker, the same copies read right
    with caplog.at_level(logging.INFO, logger="kafka_tiered_source.planning"):
        _, got, _ = read(today, topic, "read_committed", "listing")
    assert got == h.expected(committed=True)


@pytest.mark.decoder
def test_kip1248_by_name_reads_tiered_offsets_the_new_leader_still_holds_locally(with_kip1248):
    """Found by test_histories: after a leader move to a replica whose segment holding tiered
    offsets is still local (it rolls elsewhere), a KIP-1248 broker serves those offsets as
    records; the walk has nothing only-remote to find, and that is no sign of a broker ignoring
    the tags."""
    c = with_kip1248
    topic = "still-local"
    c.create_topic(topic)
    r1 = c.add_replica(topic, 0)              # rolls only at the broker's segment size: never here
    h = History(c, topic)
    h.produce(50)
    c.roll(topic, 0)
    h.produce(30)
    assert [(m.base_offset, m.end_offset) for m in c.tier(topic)] == [(0, 49)]
    c.move_leader(topic, 0, r1)
    assert c.offsets(topic, 0).local_log_start_offset == 0
    for iso in ISOLATION:
        plan, got, totals = read(c, topic, iso, "kip1248")
        assert got == h.expected(committed=iso == "read_committed")
        assert plan.locators[(topic, 0)] == "broker" and totals.fallbacks == 0
