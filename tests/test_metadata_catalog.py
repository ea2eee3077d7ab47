"""The ``__remote_log_metadata`` catalog (planning/catalog.py): later plans read only what was
written since, in the process and from snapshots, and give exactly the records of the range
whatever happened to the metadata topic, the snapshot or the topic read in between: new
segments, an older snapshot, a corrupt one, an unclean truncation, the metadata topic or the read
topic deleted and made again, a compacted KIP-1266 topic.

Reads use ``fetch.remote.fallback=never``: a copy planned that is not in storage any more fails
the read instead of being read through the broker, so a wrong plan cannot pass as right rows."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from spark_helpers import read_tasks

from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning.catalog import CATALOGS, Catalogs
from kafka_tiered_source.planning import remote_log_columns
from kafka_tiered_source.planning.catalog_snapshots import FORMAT, parse, seal
from kafka_tiered_source.protocol import remote_log_metadata as rlm
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.testing import EmbeddedCluster

pytestmark = pytest.mark.decoder
META = rlm.TOPIC
RESCAN = "reading it again from its start"


def new_cluster(base, partitions: int = 2, **kw) -> EmbeddedCluster:
    c = EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", kip1248=False,
                        remote_log_metadata_partitions=partitions, segment_bytes=1 << 20, **kw)
    c.remote_dir = str(base / "remote")
    return c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One metadata partition: every topic's events share it, as on a busy cluster."""
    with new_cluster(tmp_path_factory.mktemp("catalog"), partitions=1) as c:
        yield c


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    """Each test starts as a new process would: no catalog in memory; snapshots written as soon
    as they move on (test_snapshots_that_only_moved_on_are_written_at_most_every_30_s: when not)."""
    from kafka_tiered_source.planning import catalog as module
    monkeypatch.setattr(module, "SNAPSHOT_INTERVAL_MS", 0)
    CATALOGS.clear()
    yield
    CATALOGS.clear()


class Topic:
    """A topic written segment by segment: ``values[p]`` are its records' values by offset."""

    def __init__(self, c, name: str, partitions: int = 1, *, metadata_partition: int | None = None):
        self.c, self.name = c, name
        c.create_topic(name, partitions, topic_id=None if metadata_partition is None else
                       id_on(metadata_partition, c.storage.rlmm.partitions))
        self.values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.start = dict.fromkeys(self.values, 0)

    def tier(self, segments: int, per: int = 4, tag: str = "v") -> None:
        for p, values in self.values.items():
            for _ in range(segments):
                b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                              producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
                for i in range(per):
                    v = f"{self.name}-{tag}-{len(values) + i}".encode()
                    b.append(i, 1_700_000_000_000 + len(values) + i, None, v, [])
                values += [f"{self.name}-{tag}-{len(values) + i}".encode() for i in range(per)]
                self.c.append(self.name, p, bytes(b.build()))
                self.c.roll(self.name, p)
        self.c.tier(self.name)

    def rows(self, p: int = 0) -> list[tuple[int, bytes]]:
        return [(o, v) for o, v in enumerate(self.values[p]) if o >= self.start[p]]

    @property
    def topic_id(self) -> str:
        return self.c.topic(self.name).topic_id

    def tiered(self, p: int = 0) -> set[str]:
        return {s.segment_id for s in self.c.remote_segments(self.name, p)}


def id_on(mp: int, partitions: int) -> str:
    """A topic id whose partition 0's events go to metadata partition ``mp`` (Kafka's partitioner)."""
    from kafka_tiered_source.ids import random_uuid, uuid_to_str
    while True:
        tid = random_uuid()
        if rlm.metadata_partition(tid, 0, partitions) == mp:
            return uuid_to_str(tid)


def read(c, topic: Topic, cache, *, refresh: bool = False, p: int = 0, bootstrap: str | None = None):
    """Plan ``topic`` through the metadata topic and read it: ``(plan, rows of partition p)``;
    ``cache``: the catalog's snapshot directory (a path, a URL, or "none")."""
    opts = ReadOptions.parse({"kafka.bootstrap.servers": bootstrap or c.bootstrap_servers, "subscribe": topic.name,
                              "remote.storage.uri": f"file://{c.remote_dir}",
                              "remote.segment.locator": "metadata-topic", "fetch.remote.fallback": "never",
                              "remote.log.metadata.cache.dir": str(cache)})
    plan = planning.plan(opts, refresh=refresh)
    batches, totals = read_tasks(opts, plan.tasks)
    assert totals.fallbacks == 0
    rows = [(o, v) for b in batches if b.num_rows for o, v in zip(b.column("offset").to_pylist(),
                                                                  b.column("value").to_pylist(), strict=True)
            if b.column("partition")[0].as_py() == p]
    return plan, rows


def segments_of(plan, p: int = 0) -> set[str]:
    return {r.segment.segment_id for r in plan.remote_ranges if r.partition == p}


def catalog(c):
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as client:
        return CATALOGS.catalog(client, META)


def last(c, topic: Topic, p: int = 0):
    cat = catalog(c)
    return cat.last[cat.metadata_partition(topic.topic_id, p)]


def snapshot_path(c, topic: Topic, cache, p: int = 0) -> str:
    from kafka_tiered_source.planning.catalog_snapshots import SnapshotStore
    cat = catalog(c)
    path = SnapshotStore(str(cache)).path(cat.cluster_id, META, cat.topic_id, cat.metadata_partition(topic.topic_id, p))
    assert os.path.exists(path), path
    return path


# ---------------------------------------------------------------------------------------------
def test_later_plans_read_only_what_was_written_since(cluster, tmp_path):
    t, other = Topic(cluster, "follow-a"), Topic(cluster, "follow-b", partitions=4)
    t.tier(3)
    other.tier(2)                 # other topics' events in the same metadata partitions
    plan, rows = read(cluster, t, tmp_path)
    assert rows == t.rows() and segments_of(plan) == t.tiered()
    first = last(cluster, t)
    assert first.start == 0 and first.applied == 6 and first.passed > 0

    plan, rows = read(cluster, t, tmp_path)                    # nothing new: nothing replayed
    again = last(cluster, t)
    assert (again.start, again.applied, rows) == (first.next_offset, 0, t.rows())

    hw = cluster.offsets(META, 0).high_watermark      # one metadata partition holds every event
    for p in range(4):
        plan, rows = read(cluster, other, tmp_path, p=p)
        replayed = last(cluster, other, p)
        if p == 0:            # a topic whose events the catalog passed over: read from the start,
            # replaying both topics' events (two per copy), passing over any other topic's
            assert (replayed.start, replayed.next_offset) == (0, hw)
            assert (replayed.applied, replayed.passed) == (2 * 3 + 4 * 2 * 2, hw - 2 * 3 - 4 * 2 * 2)
        else:                 # followed since: read on from the high watermark, nothing new
            assert (replayed.start, replayed.next_offset, replayed.applied) == (hw, hw, 0)
        assert rows == other.rows(p) and segments_of(plan, p) == other.tiered(p)

    t.tier(2)                                                   # new segments after the catalog read
    plan, rows = read(cluster, t, tmp_path)
    more = last(cluster, t)
    assert (more.start, more.applied) == (first.next_offset, 4)
    assert rows == t.rows() and segments_of(plan) == t.tiered() and len(t.tiered()) == 5

    CATALOGS.clear()                                            # a new process: the snapshot
    t.tier(1)
    plan, rows = read(cluster, t, tmp_path)
    resumed = last(cluster, t)
    assert (resumed.start, resumed.applied) == (more.next_offset, 2)
    assert rows == t.rows() and segments_of(plan) == t.tiered()

    plan, rows = read(cluster, t, tmp_path, refresh=True)       # a rescan on demand
    assert (last(cluster, t).start, last(cluster, t).applied) == (0, 12) and rows == t.rows()


def test_a_snapshot_from_an_older_state_is_read_on_from(cluster, tmp_path):
    t = Topic(cluster, "older")
    t.tier(2)
    read(cluster, t, tmp_path)
    path = snapshot_path(cluster, t, tmp_path)
    with open(path, "rb") as f:
        older = f.read()
    older_position = last(cluster, t).next_offset
    t.tier(2)
    read(cluster, t, tmp_path)
    gone = sorted(cluster.remote_segments(t.name, 0), key=lambda s: s.base_offset)[0]
    cluster.delete_records(t.name, 0, gone.end_offset + 1)      # its copy deleted: DELETE events
    t.start[0] = gone.end_offset + 1
    with open(path, "wb") as f:
        f.write(older)
    CATALOGS.clear()
    plan, rows = read(cluster, t, tmp_path)
    assert last(cluster, t).start == older_position            # read on from the older snapshot
    assert rows == t.rows() and segments_of(plan) == t.tiered() and gone.segment_id not in t.tiered()
    state = catalog(cluster).partition(t.topic_id, 0)
    assert {c.segment_id for c in state.readable()} == t.tiered()


def _corrupt(kind: str, raw: bytes) -> bytes:
    doc = parse(raw)
    if kind == "garbage":
        return b"\x00\x01 not json"
    if kind == "truncated":
        return raw[: len(raw) // 2]
    if kind == "edited":                    # a digit of a field nothing else checks, checksum kept
        i = raw.index(b'"written_ms":') + len(b'"written_ms":')
        return raw[:i] + (b"7" if raw[i:i + 1] != b"7" else b"8") + raw[i + 1:]
    if kind == "future-format":
        doc["format"] = FORMAT + 1
    elif kind == "malformed":
        del doc["follow"]["last_epoch"]
    elif kind == "another-log":
        doc["topic_id"] = "AAAAAAAAAAAAAAAAAAAAAQ"
    elif kind == "past-the-log":            # a position the metadata partition never reached
        doc["state"]["positions"] = {k: 10**9 for k in doc["state"]["positions"]}
    return seal(doc)


@pytest.mark.parametrize("kind", ["garbage", "truncated", "edited", "future-format", "malformed", "another-log",
                                  "past-the-log"])
def test_a_corrupt_or_stale_snapshot_means_a_rescan_with_a_warning(cluster, tmp_path, kind, caplog):
    t = Topic(cluster, f"corrupt-{kind}")
    t.tier(2)
    read(cluster, t, tmp_path)
    path = snapshot_path(cluster, t, tmp_path)
    with open(path, "rb") as f:
        raw = f.read()
    with open(path, "wb") as f:
        f.write(_corrupt(kind, raw))
    CATALOGS.clear()
    t.tier(1)
    with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.catalog"):
        plan, rows = read(cluster, t, tmp_path)
    warned = [r.getMessage() for r in caplog.records if RESCAN in r.getMessage()]
    assert len(warned) == 1 and path in warned[0], warned
    assert last(cluster, t).start == 0
    assert rows == t.rows() and segments_of(plan) == t.tiered()
    with open(path, "rb") as f:
        assert parse(f.read())["state"]["positions"], "a sound snapshot took its place"


def test_a_topic_deleted_and_made_again_under_its_name_never_gets_the_old_copies(cluster, tmp_path):
    old = Topic(cluster, "reborn")
    old.tier(3, tag="old")
    plan, rows = read(cluster, old, tmp_path)
    old_copies, old_id = old.tiered(), old.topic_id
    assert rows == old.rows() and segments_of(plan) == old_copies
    cluster.delete_topic("reborn")
    new = Topic(cluster, "reborn")
    new.tier(2, per=3, tag="new")
    assert new.topic_id != old_id and old_copies.isdisjoint(new.tiered())
    for restart in (False, True):
        if restart:
            CATALOGS.clear()
        plan, rows = read(cluster, new, tmp_path)
        assert rows == new.rows() and segments_of(plan) == new.tiered()


# ---------------------------------------------------------------------------------------------
# the metadata topic itself changes under the catalog (a cluster each: one metadata partition)
def test_a_metadata_topic_truncated_by_an_unclean_election_is_read_again(tmp_path, caplog):
    with new_cluster(tmp_path / "c", partitions=1) as c:
        t = Topic(c, "trunc")
        t.tier(2)                                   # metadata offsets 0-3: two copies
        read(c, t, tmp_path / "cache")
        path = snapshot_path(c, t, tmp_path / "cache")
        with open(path, "rb") as f:
            before = f.read()
        first, second = (s.segment_id for s in sorted(c.remote_segments(t.name, 0), key=lambda s: s.base_offset))
        c.unclean_leader_election(META, 0, 2)        # the second copy's events are gone
        t.tier(1)                                   # a third copy's events take offsets 2-3
        assert c.offsets(META, 0).high_watermark == 4
        (third,) = t.tiered() - {first, second}
        for source in ("memory", "snapshot"):
            if source == "snapshot":
                with open(path, "wb") as f:
                    f.write(before)
                CATALOGS.clear()
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.catalog"):
                plan, rows = read(c, t, tmp_path / "cache")
            assert any("truncated" in r.getMessage() and RESCAN in r.getMessage() for r in caplog.records)
            # the log now names the first and third copies; the second's offsets go to the broker
            known = {cp.segment_id for cp in catalog(c).partition(t.topic_id, 0).readable()}
            assert known == {first, third} and segments_of(plan) == known
            assert rows == t.rows() and plan.broker_ranges


def test_a_metadata_log_start_past_the_position_is_read_again(tmp_path, caplog):
    with new_cluster(tmp_path / "c", partitions=1) as c:
        t = Topic(c, "expired")
        t.tier(2)                                   # metadata offsets 0-3
        read(c, t, tmp_path / "cache")
        t.tier(2)                                   # 4-7
        c.delete_records(META, 0, 6)                # retention on the metadata topic: 0-5 gone unread
        CATALOGS.clear()
        with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.catalog"):
            plan, rows = read(c, t, tmp_path / "cache")
        assert any("log start offset 6 is past the position 4" in r.getMessage() for r in caplog.records)
        assert last(c, t).start == 6 and rows == t.rows()
        newest = max(c.remote_segments(t.name, 0), key=lambda s: s.base_offset).segment_id
        assert segments_of(plan) == {newest}        # what a reader from the log start knows


def test_a_record_that_cannot_be_read_fails_the_plan_naming_it_and_nothing_half_read_stays(tmp_path):
    from kafka_tiered_source.errors import ProtocolError
    from kafka_tiered_source.ids import uuid_from_str
    from kafka_tiered_source.testing.rlmm import record_batch
    with new_cluster(tmp_path / "c", partitions=1) as c:
        t = Topic(c, "unreadable")
        t.tier(1)
        read(c, t, tmp_path / "cache")
        t.tier(1)                                   # offsets 2-3, then a record of the topic cut short
        name = t.name.encode()
        c.append(META, 0, record_batch(bytes([1, 0, 0, len(name) + 1]) + name + uuid_from_str(t.topic_id) + b"\x01",
                                       1_700_000_000_000))
        with pytest.raises(ProtocolError) as info:
            read(c, t, tmp_path / "cache")
        assert f"{META}-0 offset 4" in str(info.value)
        assert catalog(c).position(0) is None       # the partition is read again, not half of it twice


def test_a_metadata_topic_deleted_and_made_again_is_another_catalog(tmp_path):
    with new_cluster(tmp_path / "c", partitions=1) as c:
        t = Topic(c, "remade")
        t.tier(3)                                   # metadata offsets 0-5
        read(c, t, tmp_path / "cache")
        before = t.tiered()
        c.delete_topic(META)
        t.tier(1)                                   # the new metadata topic: offsets 0-1
        plan, rows = read(c, t, tmp_path / "cache")
        assert segments_of(plan) == t.tiered() - before and rows == t.rows()
        dirs = os.listdir(os.path.dirname(os.path.dirname(snapshot_path(c, t, tmp_path / "cache"))))
        assert len(dirs) == 2                       # a snapshot per incarnation of the topic


def test_kip1266_keys_tombstones_and_compaction_replay_to_the_same_state(tmp_path, caplog, monkeypatch):
    with new_cluster(tmp_path / "c", partitions=1, kip1266=True) as c:
        t = Topic(c, "compacted")
        t.tier(4)
        cache = tmp_path / "cache"
        read(c, t, cache)                           # the snapshot: before any deletion
        segs = sorted(c.remote_segments(t.name, 0), key=lambda s: s.base_offset)
        c.delete_records(t.name, 0, segs[1].end_offset + 1)    # two copies deleted: events, tombstones
        t.start[0] = segs[1].end_offset + 1
        t.tier(1)

        def state(catalogs, refresh):
            with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as client:
                cat = catalogs.catalog(client, META)
                cat.follow(client, [(t.topic_id, 0)], refresh=refresh)
                return cat.partition(t.topic_id, 0).to_dict()
        full = state(Catalogs(), True)             # everything the topic ever held, from its start
        assert {cp["segment_id"] for cp in full["copies"]} == t.tiered()

        c.roll(META, 0)
        removed = c.compact(META, 0, remove_tombstones=False)   # deleted copies: only tombstones left
        assert removed == 8
        CATALOGS.clear()
        plan, rows = read(c, t, cache)             # on from the snapshot: the tombstones end the copies
        assert last(c, t).start > 0
        followed = catalog(c).partition(t.topic_id, 0).to_dict()
        assert followed == full and rows == t.rows() and segments_of(plan) == t.tiered()
        assert state(Catalogs(), True) == full      # from the start of the compacted log

        c.roll(META, 0)
        assert c.compact(META, 0) == 4              # delete.retention.ms passed: tombstones gone too
        assert state(Catalogs(), True) == full

        # a tombstone whose key names no copy this version can read: the follow cannot go on
        from kafka_tiered_source.testing.rlmm import record_batch
        c.append(META, 0, record_batch(None, 1_700_000_000_000, key=b"\xffnot-a-kip-1266-key"))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.catalog"):
            plan, rows = read(c, t, cache)
        assert any("cannot read" in r.getMessage() and RESCAN in r.getMessage() for r in caplog.records)
        assert last(c, t).start == 0 and rows == t.rows()

        # a day later the tombstones of copies deleted since may be gone: not read on from
        from kafka_tiered_source.planning import catalog as module
        clock = module._now_ms
        monkeypatch.setattr(module, "_now_ms", lambda: clock() + 25 * 3_600_000)
        CATALOGS.clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.catalog"):
            plan, rows = read(c, t, cache)
        assert any("compacted" in r.getMessage() and RESCAN in r.getMessage() for r in caplog.records)
        assert last(c, t).start == 0 and rows == t.rows()


def test_snapshots_that_only_moved_on_are_written_at_most_every_30_s(cluster, tmp_path, monkeypatch):
    from kafka_tiered_source.planning import catalog as module
    monkeypatch.setattr(module, "SNAPSHOT_INTERVAL_MS", 30_000)
    t = Topic(cluster, "throttled")
    t.tier(1)
    read(cluster, t, tmp_path)                         # a read from the start: written at once
    path = snapshot_path(cluster, t, tmp_path)
    first = parse(open(path, "rb").read())
    t.tier(1)
    read(cluster, t, tmp_path)                         # moved on seconds later: not yet
    assert parse(open(path, "rb").read()) == first
    clock = module._now_ms
    monkeypatch.setattr(module, "_now_ms", lambda: clock() + 31_000)
    t.tier(1)
    read(cluster, t, tmp_path)
    later = parse(open(path, "rb").read())
    assert later["state"]["positions"] != first["state"]["positions"]
    assert later["state"]["positions"]["0"] == last(cluster, t).next_offset


@pytest.mark.parametrize("where", ["none", "memory://kt-cache-test"])
def test_no_snapshots_or_an_fsspec_url_for_a_shared_cache(cluster, tmp_path, where):
    import fsspec
    t = Topic(cluster, f"where-{where.split(':')[0]}")
    t.tier(2)
    read(cluster, t, where)
    CATALOGS.clear()
    t.tier(1)
    plan, rows = read(cluster, t, where)
    assert rows == t.rows() and segments_of(plan) == t.tiered()
    shared = fsspec.filesystem("memory").find("/kt-cache-test")
    if where == "none":
        assert last(cluster, t).start == 0 and not os.listdir(tmp_path)
    else:                                  # the second "process" read on from the shared snapshot
        assert last(cluster, t).start > 0 and [p for p in shared if p.endswith("/0.json")]


@pytest.mark.parametrize("where", ["local", "memory"])
def test_concurrent_writers_never_leave_half_a_snapshot(tmp_path, where):
    import threading
    from kafka_tiered_source.planning.catalog_snapshots import SnapshotStore
    store = SnapshotStore(str(tmp_path) if where == "local" else "memory://kt-concurrent")
    path = store.path("cluster", META, "AAAAAAAAAAAAAAAAAAAAAQ", 0)
    docs = [{"format": FORMAT, "writer": w, "payload": "x" * (1000 * (w + 1))} for w in range(4)]
    seen, errors, stop = [], [], threading.Event()

    def write(doc):
        for _ in range(40):
            if not store.save(path, doc):
                errors.append("not written")

    def read_all():
        while not stop.is_set():
            try:
                got = store.load(path)            # a torn read: SnapshotError
            except Exception as exc:
                errors.append(exc)
                return
            if got is not None:
                seen.append(got["writer"])
    reader = threading.Thread(target=read_all)
    reader.start()
    writers = [threading.Thread(target=write, args=(d,)) for d in docs]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert not errors and seen and set(seen) <= {0, 1, 2, 3} and store.load(path)["writer"] in {0, 1, 2, 3}


# ---------------------------------------------------------------------------------------------
def test_segments_and_estimate_share_the_catalog_and_refresh_rescans(cluster, tmp_path, capsys):
    from kafka_tiered_source.cli import main
    t = Topic(cluster, "cli-catalog")
    t.tier(2)
    args = ["--bootstrap-servers", cluster.bootstrap_servers, "--topic", t.name, "--remote-storage-uri",
            f"file://{cluster.remote_dir}", "-o", "remote.segment.locator=metadata-topic",
            "-o", f"remote.log.metadata.cache.dir={tmp_path}", "--json"]
    assert main(["segments", *args]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["segment_id"] for r in listed if r["tiered"]} == t.tiered()
    path = snapshot_path(cluster, t, tmp_path)
    written = parse(open(path, "rb").read())["written_ms"]
    assert main(["estimate", *args]) == 0                 # the same catalog: nothing replayed
    assert json.loads(capsys.readouterr().out)["partitions"][f"{t.name}-0"]["segments"] == 2
    assert last(cluster, t).start > 0 and last(cluster, t).applied == 0
    assert parse(open(path, "rb").read())["written_ms"] == written
    for command in ("segments", "estimate"):
        assert main([command, *args, "--refresh"]) == 0
        capsys.readouterr()
        assert last(cluster, t).start == 0 and last(cluster, t).applied == 4

    # a new process finds the snapshot: nothing is new, so it has nothing to write
    before = open(path, "rb").read()
    out = subprocess.run([sys.executable, "-m", "kafka_tiered_source.cli", "segments", *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        json.loads(line) for line in _segments_now(main, args, capsys)]
    assert open(path, "rb").read() == before


def _segments_now(main, args, capsys) -> list[str]:
    assert main(["segments", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_stream_carries_its_catalog_across_micro_batches_and_restarts(cluster, tmp_path):
    from kafka_tiered_source.planning.stream import StreamPlanner, range_options
    t = Topic(cluster, "streamed")
    t.tier(2)
    opts = ReadOptions.parse({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": t.name,
                              "remote.storage.uri": f"file://{cluster.remote_dir}", "startingOffsets": "earliest",
                              "remote.segment.locator": "metadata-topic", "fetch.remote.fallback": "never",
                              "remote.log.metadata.cache.dir": str(tmp_path)}, streaming=True)
    got: list = []
    starts = []
    with BrokerClient({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        position = StreamPlanner(opts, client).initial()
        for batch in range(4):
            if batch == 2:
                CATALOGS.clear()                      # the query restarted: a new planner process
            planner = StreamPlanner(opts, client)
            end = planner.next_end(position, limited=False)
            batch_opts = range_options(opts, position, end)
            plan = planning.plan(batch_opts)
            batches, _ = read_tasks(batch_opts, plan.tasks)
            got += [(o, v) for b in batches for o, v in zip(b.column("offset").to_pylist(),
                                                          b.column("value").to_pylist(), strict=True)]
            starts.append(last(cluster, t).start)
            position = end
            t.tier(1)                                  # history grows between micro-batches
    assert got == t.rows()[: len(got)] and len(got) == 8 + 3 * 4
    assert starts[0] == 0 and all(s > 0 for s in starts[1:])   # later micro-batches read on


# ---------------------------------------------------------------------------------------------
# issue 35: what the catalog holds, trusts and waits for
def test_a_repeated_copy_started_leaves_the_finished_copy_served(cluster, tmp_path):
    """A COPY_SEGMENT_STARTED record again for a finished copy (a retried write of the metadata
    producer): RemoteLogMetadataCache refuses FINISHED -> STARTED, so the copy stays served."""
    t = Topic(cluster, "started-again")
    t.tier(2)
    first = min(cluster.remote_segments(t.name, 0), key=lambda s: s.base_offset)
    cluster.storage.rlmm.copy_started(first, 0)
    plan, rows = read(cluster, t, tmp_path)
    assert rows == t.rows() and segments_of(plan) == t.tiered() and first.segment_id in segments_of(plan)


def test_plans_wait_only_for_the_metadata_partitions_they_need(tmp_path):
    """While the broker holds its answer for metadata partition 0, a plan of a topic on partition
    1 goes through; a second plan of the topic on partition 0 waits for the first one's read and
    then reads on from where it ended (one replay of each record)."""
    import threading
    from kafka_tiered_source.protocol import messages as m
    with new_cluster(tmp_path / "c", partitions=2) as c:
        slow, fast = Topic(c, "slow", metadata_partition=0), Topic(c, "fast", metadata_partition=1)
        slow.tier(2)
        fast.tier(2)                                # 4 events in each metadata partition
        meta_id = c.topic(META).topic_id_bytes
        held, release = threading.Event(), threading.Event()

        def hold(key, req):
            if key == m.FetchRequest.API_KEY and any(
                    (t.topic == META or t.topic_id == meta_id) and any(p.partition == 0 for p in t.partitions)
                    for t in req.topics):
                held.set()
                return release
            return None
        c.hold_answers(hold)
        out: dict = {}

        def plan(name, topic):
            th = threading.Thread(target=lambda: out.__setitem__(name, read(c, topic, "none")), daemon=True)
            th.start()
            return th
        first = plan("first", slow)
        try:
            assert held.wait(30)
            second, other = plan("second", slow), plan("other", fast)
            other.join(30)
            assert "other" in out, "a plan of metadata partition 1 waited for partition 0's broker answer"
            assert first.is_alive() and second.is_alive()
        finally:
            release.set()
        first.join(60)
        second.join(60)
        for name, topic in (("first", slow), ("second", slow), ("other", fast)):
            plan_, rows = out[name]
            assert rows == topic.rows() and segments_of(plan_) == topic.tiered(), name
        again = last(c, slow)                       # the second plan's replay, after the first's
        assert (again.start, again.applied) == (c.offsets(META, 0).high_watermark, 0) == (4, 0)


def test_a_lower_high_watermark_under_a_new_leader_epoch_is_not_truncation(tmp_path, caplog):
    """A new leader of the metadata partition answers a high watermark below the one seen (it
    has not learnt the followers' positions yet): OffsetForLeaderEpoch shows the position on its
    log, so the catalog reads on, and later plans read on from there too."""
    from test_faults_broker import KafkaProxy, once
    from kafka_tiered_source.protocol import codec, messages as m
    with new_cluster(tmp_path / "c", partitions=1) as c:
        t = Topic(c, "lagging")
        t.tier(2)
        read(c, t, "none")
        position = last(c, t).next_offset
        assert position == c.offsets(META, 0).high_watermark == 4
        assert c.bump_leader_epoch(META, 0) == 1
        meta_id = c.topic(META).topic_id_bytes

        def lagging(key, version, frame):
            if key != m.FetchRequest.API_KEY:
                return None
            cid, resp = codec.decode_response(frame[4:], key, version)
            hit = [p for r in resp.responses if r.topic == META or r.topic_id == meta_id for p in r.partitions]
            for p in hit:
                p.high_watermark = position - 2
            return ("replace", codec.encode_response(resp, version, cid)) if hit else None
        proxy = KafkaProxy(c.port)
        proxy.faults.append(once(lagging))
        try:
            with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.catalog"):
                plan, rows = read(c, t, "none", bootstrap=proxy.bootstrap)
        finally:
            proxy.close()
        assert proxy.faults[0].state["fired"] and not [r for r in caplog.records if RESCAN in r.getMessage()]
        assert (last(c, t).start, last(c, t).applied) == (position, 0) and rows == t.rows()
        t.tier(1)
        plan, rows = read(c, t, "none")
        assert (last(c, t).start, last(c, t).applied) == (position, 2) and segments_of(plan) == t.tiered()


def test_a_compacted_metadata_topics_own_delete_retention_ms_bounds_the_catalogs_age(tmp_path, monkeypatch,
                                                                                    caplog):
    """KIP-1266: a snapshot older than the metadata topic's delete.retention.ms (asked with
    DescribeConfigs: one hour here, not Kafka's default day) is not read on from; nor is one
    whose topic's delete.retention.ms cannot be read (a broker without DescribeConfigs)."""
    from kafka_tiered_source.planning import catalog as module
    with new_cluster(tmp_path / "c", partitions=1, kip1266=True) as c:
        t = Topic(c, "tombstoned")
        t.tier(2)
        cache = tmp_path / "cache"
        read(c, t, cache)
        c.set_topic_config(META, delete_retention_ms=3_600_000)
        clock = module._now_ms
        for hours, rescan in ((0.5, False), (2.5, True), (0, "unreadable")):
            monkeypatch.setattr(module, "_now_ms", lambda h=hours: clock() + int(h * 3_600_000))
            if rescan == "unreadable":
                server = c._server
                monkeypatch.setattr(server, "advertised", {k: v for k, v in server.advertised.items() if k != 32})
            CATALOGS.clear()
            t.tier(1)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.catalog"):
                plan, rows = read(c, t, cache)
            warned = [r.getMessage() for r in caplog.records if RESCAN in r.getMessage()]
            assert rows == t.rows() and segments_of(plan) == t.tiered()
            assert (last(c, t).start == 0) == bool(rescan) and len(warned) == int(bool(rescan)), (hours, warned)
            if rescan is True:
                assert "delete.retention.ms=3600000" in warned[0]
            elif rescan:
                assert "delete.retention.ms could not be read" in warned[0] and "UNSUPPORTED_VERSION" in warned[0]


@pytest.mark.parametrize("policy", ["auto", "never"])
def test_a_shared_snapshot_wrong_about_copies_offsets_never_reads_wrong_rows(cluster, tmp_path, policy, caplog):
    """A sound snapshot (checksum and all) in a shared directory that says the first two copies
    hold each other's offsets: the plan reads [0, 4) from the object holding 4-7 and [4, 8) from
    the one holding 0-3.  The read-time check finds the batches are not the offsets planned:
    those slices fall back to the brokers (auto) or fail naming the object and the offsets
    (never).  No row is missing, none is read twice."""
    from kafka_tiered_source.errors import SliceMismatchError
    t = Topic(cluster, f"wrong-snapshot-{policy}")
    t.tier(3)                                         # copies [0, 3], [4, 7], [8, 11]
    read(cluster, t, tmp_path)
    path = snapshot_path(cluster, t, tmp_path)
    doc = parse(open(path, "rb").read())
    state = remote_log_columns.from_doc(doc["state"])
    mine = state.partitions[(t.topic_id, 0)]
    a, b = (cp.to_dict() for cp in sorted(mine.copies.values(), key=lambda cp: cp.start_offset)[:2])
    (a_start, a_end), (b_start, b_end) = (a["start_offset"], a["end_offset"]), (b["start_offset"], b["end_offset"])
    for cp, (start, end) in ((a, (b_start, b_end)), (b, (a_start, a_end))):
        mine.copies[cp["segment_id"]] = replace(mine.copies[cp["segment_id"]], start_offset=start, end_offset=end,
                                                leader_epochs=((0, start),))
    ids = mine.epochs[0].ids
    ids[0], ids[1] = ids[1], ids[0]
    doc["state"] = remote_log_columns.to_doc(state)
    with open(path, "wb") as f:
        f.write(seal(doc))
    CATALOGS.clear()                                  # another process finds the shared snapshot
    opts = ReadOptions.parse({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": t.name,
                              "remote.storage.uri": f"file://{cluster.remote_dir}",
                              "remote.segment.locator": "metadata-topic", "fetch.remote.fallback": policy,
                              "remote.log.metadata.cache.dir": str(tmp_path)})
    plan = planning.plan(opts)
    assert last(cluster, t).start > 0                  # read on from the snapshot, which it trusted
    assert [(r.offset_start, r.offset_end, r.segment.segment_id) for r in plan.remote_ranges] == \
        [(0, 4, b["segment_id"]), (4, 8, a["segment_id"]), (8, 12, sorted(t.tiered() - {a["segment_id"], b["segment_id"]})[0])]
    if policy == "never":
        with pytest.raises(SliceMismatchError) as info:
            read_tasks(opts, plan.tasks)
        msg = str(info.value)
        assert f"slice [0, 4) of tiered copy {b['segment_id']} [0, 3]" in msg and "[4, 7]" in msg, msg
        assert info.value.location and b["segment_id"] in info.value.location
        assert (info.value.planned, info.value.copy, info.value.found) == ((0, 4), (0, 3), (4, 7))
        return
    with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.executor"):
        batches, totals = read_tasks(opts, plan.tasks)
    rows = [(o, v) for bt in batches for o, v in zip(bt.column("offset").to_pylist(), bt.column("value").to_pylist(),
                                                     strict=True)]
    assert rows == t.rows()
    # the first slice fails the check; as after any failed direct read, the rest of the
    # partition goes through the brokers
    assert dict(totals.fallback_reasons) == {"slice mismatch: the object's batches are not the offsets planned": 1}
    (warned,) = [r.getMessage() for r in caplog.records if "does not hold the offsets planned" in r.getMessage()]
    assert f"slice [0, 4) of tiered copy {b['segment_id']} [0, 3]" in warned and "offsets [4, 7]" in warned


def test_a_metadata_partition_read_in_many_fetches_replays_as_one(cluster, tmp_path, monkeypatch):
    """Small answers (a record or two each): every next Fetch is asked on a thread while the last
    answer is replayed, and the replay is the same as one answer's."""
    from kafka_tiered_source.planning import replay
    t = Topic(cluster, "many-fetches")
    t.tier(3)
    _, whole = read(cluster, t, "none")
    whole_read = last(cluster, t)
    CATALOGS.clear()
    monkeypatch.setattr(replay, "SCAN_BYTES", 1)
    threads = []
    real = replay._Ahead.ask
    monkeypatch.setattr(replay._Ahead, "ask", lambda self, o: (threads.append(o), real(self, o)))
    plan, rows = read(cluster, t, "none")
    assert rows == whole == t.rows() and segments_of(plan) == t.tiered()
    got = last(cluster, t)
    assert (got.start, got.next_offset, got.applied) == (whole_read.start, whole_read.next_offset, whole_read.applied)
    assert len(threads) >= got.next_offset - got.start - 2, threads   # one answer per batch


def test_several_metadata_partitions_replay_each_and_a_failure_names_its_own(tmp_path):
    """A plan that needs several metadata partitions: every partition's rows come back as
    written, and a record that cannot be read fails the plan naming its metadata partition and
    offset, that partition forgotten, the others kept."""
    from kafka_tiered_source.errors import ProtocolError
    from kafka_tiered_source.ids import uuid_from_str
    from kafka_tiered_source.testing.rlmm import record_batch
    with new_cluster(tmp_path / "c", partitions=4) as c:
        t = Topic(c, "spread", partitions=6)
        t.tier(2, per=2)
        cat = catalog(c)
        mps = {p: cat.metadata_partition(t.topic_id, p) for p in range(6)}
        assert len(set(mps.values())) >= 2, mps          # Kafka's partitioner spreads six partitions
        for p in range(6):
            assert read(c, t, tmp_path / "cache", p=p)[1] == t.rows(p)
        bad = mps[3]
        name = t.name.encode()
        c.append(META, bad, record_batch(bytes([1, 0, 0, len(name) + 1]) + name + uuid_from_str(t.topic_id) + b"\x01",
                                         1_700_000_000_000))
        with pytest.raises(ProtocolError) as info:
            read(c, t, tmp_path / "cache")
        assert f"{META}-{bad} offset" in str(info.value), str(info.value)
        cat = catalog(c)
        assert cat.position(bad) is None
        assert all(cat.position(mp) is not None for mp in set(mps.values()) - {bad})
