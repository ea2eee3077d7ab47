"""The metadata catalog: ``__remote_log_metadata`` followed from plan to plan, not rescanned.

The metadata topic keeps every segment event (its retention is unlimited by default), and one of
its partitions holds the events of about 1/50 of the cluster's partitions: reading it from its
start costs every plan the cluster's whole tiering history.  A catalog reads each metadata
partition once and then only what was written since.

A :class:`MetadataCatalog` is what a process knows of one metadata topic (one cluster, one
incarnation of the topic: its topic id and partition count).  Per metadata partition it keeps
the state replayed so far (:class:`~.remote_log_state.RemoteLogState`: the copies, their
states, the per-epoch offset maps, the position to read next) and a :class:`Follow`: which
topics' records were replayed (the others were passed over, so a topic not followed yet means
reading the partition again from its start), and what proves the log there is still the one
that was read — the partition's leader epoch, the leader epoch of the last batch read, its log
start offset and high watermark.  Before reading on from a position:

* a new leader epoch: the last batch's epoch must still end at or after the position on the
  new leader (OffsetForLeaderEpoch, fenced with the leader epoch the client knows, as Kafka's
  consumer validates its position after a leadership change, KIP-320); else the log was
  truncated under the position.  That answer is the proof: a new leader's high watermark may
  lag behind the old one's for a moment (it learns the followers' positions from their next
  fetches), so under a new leader epoch a lower high watermark, even one below the position,
  means "nothing to read yet", not truncation;
* the first answer's log start offset must not be past the position (records deleted unread),
  and under the same leader epoch its high watermark not below the one seen before (a leader's
  high watermark never goes down: truncation);
* the metadata topic deleted and made again has another topic id: another catalog;
* a compacted metadata topic (KIP-1266: keyed records) drops a deleted copy's tombstones
  ``delete.retention.ms`` after cleaning, and with them the last sign that the copy is gone: a
  position read longer ago than that is not read on from.  The value is the metadata topic's
  own, asked with DescribeConfigs (once per follow); where it cannot be read (no
  DESCRIBE_CONFIGS permission, a broker without the API) the partition is read from its start.

Where continuity cannot be proven the partition is read again from its start, with a warning.
A topic deleted and made again under the same name has another topic id, so its copies are
never the old topic's.

**Locks.**  Each metadata partition has a lock of its own, held while that partition is
checked, replayed and snapshotted; no lock covers two partitions, so a slow broker answer for
one metadata partition delays only the plans that need that partition.  A second
plan that needs a partition while another reads it waits for that read, then reads on from
where it ended (usually one Fetch that finds nothing new): two replays from one position would
fetch the same records twice, and one of the two would be thrown away.  The Metadata request
that names the leaders is made before any lock is taken.

Catalogs live in the process (:data:`CATALOGS`: repeated plans, a stream's micro-batches) and,
between processes, as snapshots (:mod:`.catalog_snapshots`: Spark plans a Python data source in
worker processes, and tomorrow's backfill starts a new driver).  A snapshot that is corrupt,
from another log, or from a log that moved on in a way that cannot be proven continuous is
dropped with a warning and the partition rescanned: a plan is never made from it.  A sound one
is trusted for where copies are; the reader checks each slice's bytes against it
(``executor/slices.py``; docs/catalog-trust.md says what that covers).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from ..errors import BrokerError
from ..ids import uuid_from_str, uuid_to_str
from ..protocol import remote_log_metadata as rlm
from . import remote_log_columns
from .catalog_snapshots import FORMAT, SnapshotError, SnapshotStore
from .replay import Discontinuity, Replayed, replay
from .remote_log_state import PartitionState, RemoteLogState

log = logging.getLogger(__name__)


# The topic config that says how long a compacted topic keeps a tombstone after cleaning.
DELETE_RETENTION = "delete.retention.ms"
# A snapshot that only moved on is written at most this often (a stream plans every few seconds,
# and a topic of many copies makes a large snapshot); one made by reading from the start is
# written at once.  An older snapshot costs the next process the records since, nothing else.
SNAPSHOT_INTERVAL_MS = 30_000


@dataclass(frozen=True)
class Follow:
    """How one metadata partition was read: the ids of the topics whose records were replayed,
    the partition's leader epoch then, the leader epoch of the last batch read (-1: none), its
    log start offset and its high watermark, whether its records have keys (compacted,
    KIP-1266) and when it was read (ms since the epoch).  (The position is the state's.)"""
    topics: tuple[str, ...]
    leader_epoch: int = -1
    last_epoch: int = -1
    log_start: int = 0
    high_watermark: int = 0
    keyed: bool = False
    read_ms: int = 0

    def to_dict(self) -> dict:
        return {"topics": list(self.topics), "leader_epoch": self.leader_epoch, "last_epoch": self.last_epoch,
                "log_start": self.log_start, "high_watermark": self.high_watermark, "keyed": self.keyed,
                "read_ms": self.read_ms}

    @classmethod
    def from_dict(cls, d: dict) -> "Follow":
        topics = tuple(sorted(str(t) for t in d["topics"]))
        for t in topics:
            uuid_from_str(t)          # a topic id, or the snapshot is not one of ours
        if not isinstance(d["keyed"], bool):
            raise ValueError(f"keyed is {d['keyed']!r}")
        return cls(topics, int(d["leader_epoch"]), int(d["last_epoch"]), int(d["log_start"]),
                   int(d["high_watermark"]), d["keyed"], int(d["read_ms"]))


@dataclass
class _Part:
    follow: Follow
    state: RemoteLogState
    written: dict[str, int] = field(default_factory=dict)   # snapshot location -> when it was written (ms)
    current: set[str] = field(default_factory=set)          # the locations holding this very state


class MetadataCatalog:
    """One metadata topic (``topic``, ``topic_id``, ``partitions``) of cluster ``cluster_id``
    (None: unknown, then nothing is snapshotted: a snapshot could not be told from another
    cluster's)."""

    def __init__(self, cluster_id: str | None, topic: str, topic_id: str, partitions: int):
        self.cluster_id = cluster_id
        self.topic = topic
        self.topic_id = topic_id
        self.partitions = partitions
        self._parts: dict[int, _Part] = {}
        self._locks: dict[int, threading.Lock] = {}     # one per metadata partition
        self._locks_lock = threading.Lock()             # guards _locks only: never held across I/O
        #: the last replay of each metadata partition: where it began and ended, what it read
        self.last: dict[int, Replayed] = {}

    def __repr__(self) -> str:
        return (f"MetadataCatalog({self.topic} {self.topic_id}, cluster {self.cluster_id}, "
                f"partitions followed: {sorted(self._parts)})")

    def metadata_partition(self, topic_id: str, partition: int) -> int:
        return rlm.metadata_partition(uuid_from_str(topic_id), partition, self.partitions)

    def _lock(self, mp: int) -> threading.Lock:
        with self._locks_lock:
            lock = self._locks.get(mp)
            if lock is None:
                lock = self._locks[mp] = threading.Lock()
            return lock

    def position(self, mp: int) -> int | None:
        """The next offset the catalog reads of metadata partition ``mp`` (None: not read)."""
        part = self._parts.get(mp)
        return None if part is None else part.state.positions.get(mp)

    def partition(self, topic_id: str, partition: int) -> PartitionState:
        """A copy of what the catalog replayed of ``(topic_id, partition)`` (later follows do
        not change it under a plan that uses it)."""
        mp = self.metadata_partition(topic_id, partition)
        with self._lock(mp):
            part = self._parts.get(mp)
            return (part.state.partition(topic_id, partition) if part else PartitionState()).copy()

    # -- following
    def follow(self, client: Any, keys: Iterable[tuple[str, int]], *, snapshots: SnapshotStore | None = None,
               refresh: bool = False) -> None:
        """Bring the metadata partitions holding ``keys`` (``(topic id, partition)``) up to
        their high watermarks: from where this catalog or a snapshot stands when that can be
        proven the same log, else from their start (``refresh``: from their start anyway)."""
        wanted: dict[int, set[str]] = {}
        for tid, p in keys:
            wanted.setdefault(self.metadata_partition(tid, p), set()).add(tid)
        if not wanted:
            return
        leaders = client.topic(self.topic).partitions
        store = snapshots if self.cluster_id else None
        retention = _Retention(client, self.topic)
        for mp in sorted(wanted):          # one partition's lock at a time: no lock order to keep
            leader = leaders.get(mp)
            with self._lock(mp):
                try:
                    self._follow(client, mp, wanted[mp], leader.leader_epoch if leader is not None else -1,
                                 store, refresh, retention)
                except BaseException:
                    # a replay cut short (a broker error, a corrupt record) may have applied part
                    # of what it read: forget the partition rather than apply that part twice
                    self._parts.pop(mp, None)
                    raise

    def _follow(self, client: Any, mp: int, wanted: set[str], leader_epoch: int, store: SnapshotStore | None,
                refresh: bool, retention: "_Retention") -> None:
        where = f"{self.topic}-{mp}"
        part = None if refresh else self._parts.get(mp)
        source = "this process's catalog"
        if part is None and store is not None and not refresh:
            part, source = self._load(store, mp), f"the snapshot {store.shown_path(store.path(*self._name(mp)))}"
            if part is not None:
                part.written[store.location] = part.follow.read_ms
                part.current.add(store.location)
        if refresh:
            log.info("kafka-tiered: reading %s from its start (refresh)", where)
        topics = set(wanted) | set(part.follow.topics if part is not None else ())
        before = None if part is None else (replace(part.follow, read_ms=0), part.state.positions.get(mp))
        if part is not None and not wanted <= set(part.follow.topics):
            log.info("kafka-tiered: reading %s from its start for %d more topic(s) (the records of "
                     "topics not followed before were passed over)", where, len(wanted - set(part.follow.topics)))
            part = None
        proven = False      # the position shown to be on a new leader's log (OffsetForLeaderEpoch)
        if part is not None:
            why = self._diverged(client, mp, part, leader_epoch, retention)
            if why is not None:
                _rescan(where, source, why)
                part = None
            elif leader_epoch != part.follow.leader_epoch:
                proven = part.follow.last_epoch >= 0 and part.state.positions.get(mp) is not None
                # a fenced OffsetForLeaderEpoch may have refreshed the client's metadata
                info = client.topic(self.topic).partitions.get(mp)
                leader_epoch = info.leader_epoch if info is not None else leader_epoch
        ids = {uuid_from_str(t) for t in topics}
        r: Replayed | None = None
        if part is not None:
            try:
                r = replay(client, self.topic, mp, part.state, ids, start=part.state.positions.get(mp),
                           last_epoch=part.follow.last_epoch,
                           high_watermark=-1 if proven else part.follow.high_watermark, proven=proven)
            except Discontinuity as exc:
                _rescan(where, source, str(exc))
        fresh = r is None or part is None
        if r is None or part is None:
            part = _Part(Follow(()), RemoteLogState())
            r = replay(client, self.topic, mp, part.state, ids, start=None)
        keyed = r.keyed or part.follow.keyed     # a part started over has an empty follow
        part.follow = Follow(tuple(sorted(topics)), leader_epoch, r.last_epoch, r.log_start, r.high_watermark,
                             keyed, _now_ms())
        self._parts[mp] = part
        self.last[mp] = r
        log.debug("kafka-tiered: %s read from %d to %d (%d records replayed, %d passed over)", where, r.start,
                  r.next_offset, r.applied, r.passed)
        if before != (replace(part.follow, read_ms=0), part.state.positions.get(mp)):
            part.current.clear()
        if store is not None:
            self._save(store, mp, part, fresh)

    def _save(self, store: SnapshotStore, mp: int, part: _Part, fresh: bool) -> None:
        loc, now = store.location, part.follow.read_ms
        since = now - part.written.get(loc, -SNAPSHOT_INTERVAL_MS - 1)
        due = fresh or loc not in part.written or (loc not in part.current and since >= SNAPSHOT_INTERVAL_MS)
        # a compacted partition's snapshot says when it was read: kept within the hour
        if due or (part.follow.keyed and since > 3_600_000):
            if store.save(store.path(*self._name(mp)), self._snapshot(mp, part)):
                part.written[loc] = now
                part.current.add(loc)

    def _diverged(self, client: Any, mp: int, part: _Part, leader_epoch: int,
                  retention: "_Retention") -> str | None:
        """Why the log of ``mp`` may no longer be the one read up to the position: a leadership
        change that truncated it, or a compacted topic read too long ago (None: it is)."""
        f, position = part.follow, part.state.positions.get(mp)
        if f.keyed:
            kept, why_not = retention.ms()
            age = _now_ms() - f.read_ms
            if kept is None:
                return (f"it is compacted (KIP-1266) and its {DELETE_RETENTION} could not be read ({why_not}): "
                        f"tombstones of copies deleted since it was read may be gone")
            if age > kept:
                return (f"it is compacted (KIP-1266) and was read {age / 3_600_000:.1f} h ago: tombstones of copies "
                        f"deleted since may be gone ({DELETE_RETENTION}={kept}, {kept / 3_600_000:.1f} h)")
        if leader_epoch == f.leader_epoch or f.last_epoch < 0 or position is None:
            return None
        try:
            epoch, end = client.offset_for_leader_epoch(self.topic, mp, [f.last_epoch])[f.last_epoch]
        except BrokerError as exc:
            return f"its leader changed (epoch {f.leader_epoch} -> {leader_epoch}) and OffsetForLeaderEpoch failed ({exc})"
        if epoch != f.last_epoch or end < position:
            return (f"leader epoch {f.last_epoch}, in which the records before offset {position} were written, "
                    f"ends at {end} on the new leader (epoch {epoch}): the log was truncated")
        return None

    # -- snapshots
    def _name(self, mp: int) -> tuple[str, str, str, int]:
        return self.cluster_id or "", self.topic, self.topic_id, mp

    def _identity(self, mp: int) -> dict:
        return {"cluster_id": self.cluster_id, "topic": self.topic, "topic_id": self.topic_id,
                "partitions": self.partitions, "partition": mp}

    def _snapshot(self, mp: int, part: _Part) -> dict:
        return {"format": FORMAT, **self._identity(mp), "written_ms": _now_ms(),
                "follow": part.follow.to_dict(), "state": remote_log_columns.to_doc(part.state)}

    def _load(self, store: SnapshotStore, mp: int) -> _Part | None:
        path = store.path(*self._name(mp))
        try:
            doc = store.load(path)
            if doc is None:
                return None
            identity = {k: doc.get(k) for k in self._identity(mp)}
            if identity != self._identity(mp):
                raise SnapshotError(f"is of another log ({identity})")
            follow = Follow.from_dict(doc["follow"])
            state = remote_log_columns.from_doc(doc["state"])
            position = state.positions.get(mp)
            if position is None or position < 0 or set(state.positions) != {mp}:
                raise SnapshotError(f"holds no position in partition {mp}")
            for tid, p in state.partitions:
                if tid not in follow.topics or self.metadata_partition(tid, p) != mp:
                    raise SnapshotError(f"holds {tid} partition {p}, which partition {mp} does not follow")
        except SnapshotError as exc:
            _rescan(f"{self.topic}-{mp}", f"the snapshot {store.shown_path(path)}", str(exc))
            return None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            _rescan(f"{self.topic}-{mp}", f"the snapshot {store.shown_path(path)}",
                    f"is malformed ({type(exc).__name__}: {exc})")
            return None
        log.debug("kafka-tiered: %s-%d from the snapshot %s (position %d)", self.topic, mp, store.shown_path(path),
                  position)
        return _Part(follow, state)


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Retention:
    """The metadata topic's ``delete.retention.ms``, asked with DescribeConfigs at most once per
    follow and only when a compacted partition is read on from: ``ms()`` is ``(value, None)``
    or ``(None, why it could not be read)``."""

    def __init__(self, client: Any, topic: str):
        self.client, self.topic = client, topic
        self._answer: tuple[int | None, str | None] | None = None

    def ms(self) -> tuple[int | None, str | None]:
        if self._answer is None:
            try:
                raw = self.client.describe_topic_config(self.topic, [DELETE_RETENTION]).get(DELETE_RETENTION)
                self._answer = (int(raw), None) if raw is not None and raw.lstrip("-").isdigit() and int(raw) >= 0 \
                    else (None, f"the broker answered {raw!r}")
            except BrokerError as exc:
                self._answer = (None, str(exc))
        return self._answer


def _rescan(where: str, source: str, why: str) -> None:
    log.warning("kafka-tiered: %s cannot be read on from %s: %s; reading it again from its start",
                where, source, why)


class Catalogs:
    """A process's catalogs, one per cluster and metadata topic incarnation."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, MetadataCatalog] = {}
        self._lock = threading.Lock()

    def catalog(self, client: Any, topic: str) -> MetadataCatalog:
        """The catalog of ``topic`` as the cluster ``client`` talks to has it now (one Metadata
        request: the topic id and partition count name the incarnation)."""
        info = client.topic(topic, refresh=True)
        cluster = client.cluster_id or None
        tid = uuid_to_str(bytes(info.topic_id))
        # without a cluster id (Metadata v0-1) the brokers' addresses stand for the cluster
        where = cluster or ",".join(f"{h}:{p}" for h, p in client.config.bootstrap_servers)
        key = (where, topic, tid, len(info.partitions))
        with self._lock:
            cat = self._by_key.get(key)
            if cat is None:
                cat = self._by_key[key] = MetadataCatalog(cluster, topic, tid, len(info.partitions))
            return cat

    def clear(self) -> None:
        """Forget every catalog (the next plans read from snapshots or from the start)."""
        with self._lock:
            self._by_key.clear()


#: This process's catalogs: what every plan of the ``metadata-topic`` locator reads from.
CATALOGS = Catalogs()

__all__ = ["CATALOGS", "Catalogs", "Follow", "MetadataCatalog"]
