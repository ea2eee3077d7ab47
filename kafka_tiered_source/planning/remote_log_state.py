"""What ``__remote_log_metadata`` says about tiered copies, replayed the way a broker's
RemoteLogMetadataCache replays it: plain data, no I/O, serializable.

Per topic-partition (:class:`PartitionState`):

* every copy whose segment record was seen and that has not reached DELETE_SEGMENT_FINISHED,
  with its state (:class:`CopyMeta`).  A state changes only as
  ``RemoteLogSegmentState.isValidTransition`` allows (:func:`valid_transition`); any other
  record is dropped as RemoteLogMetadataCache drops it, so a repeated COPY_SEGMENT_STARTED for a
  finished copy leaves it finished;
* per leader epoch, the offset-to-copy map of Kafka's ``RemoteLogLeaderEpochState``
  (:class:`EpochState`): for each COPY_SEGMENT_FINISHED copy, the offset where that epoch starts
  in it, mapped to the copy.  A copy that finishes replaces the mapping at the same start offset,
  and when it reaches at least as far in that epoch as any copy before it, it also displaces the
  mappings at or above its start (``handleSegmentWithCopySegmentFinishedState``: a new leader's
  copy that is a superset of the old leader's).  DELETE_SEGMENT_STARTED removes its mapping.
  The replay is order-dependent, as Kafka's is: records are applied in the order of their
  metadata partition, which holds every record of one topic-partition;
* whether a partition delete was announced (then nothing of the partition is readable).

Which copy serves each offset is computed from this state by :mod:`.coverage`; the state does
not know about offset ranges, lineages or brokers.  The catalog (:mod:`.catalog`) keeps one
:class:`RemoteLogState` per metadata partition it follows, applies new records with
:meth:`RemoteLogState.apply` (each with its ``(metadata partition, offset)``) and KIP-1266
tombstones with :meth:`RemoteLogState.tombstone`, remembers how far it read in
:attr:`RemoteLogState.positions`, and snapshots :meth:`RemoteLogState.to_dict`.
"""
from __future__ import annotations

import base64
import bisect
import itertools
from sys import intern

from ..dataclass import dataclass, field, field_names
from ..ids import uuid_to_str
from ..logs import get_logger
from ..protocol import remote_log_metadata as rlm
from ..records.backend import slots_maker
from ..storage.segment import RemoteSegment

log = get_logger(__name__)

STARTED, FINISHED = rlm.COPY_SEGMENT_STARTED, rlm.COPY_SEGMENT_FINISHED
DELETE_STARTED, DELETE_FINISHED = rlm.DELETE_SEGMENT_STARTED, rlm.DELETE_SEGMENT_FINISHED
# RemoteLogSegmentState.isValidTransition, which RemoteLogMetadataCache.checkStateTransition
# applies to every record: from no state only to COPY_SEGMENT_STARTED; a state to itself (a
# retried or repeated record); STARTED to FINISHED or DELETE_STARTED; FINISHED to DELETE_STARTED;
# DELETE_STARTED to DELETE_FINISHED.  Anything else is dropped, the copy as it was.
_VALID = {None: {STARTED}, STARTED: {STARTED, FINISHED, DELETE_STARTED}, FINISHED: {FINISHED, DELETE_STARTED},
          DELETE_STARTED: {DELETE_STARTED, DELETE_FINISHED}, DELETE_FINISHED: {DELETE_FINISHED}}


def valid_transition(old: int | None, new: int) -> bool:
    """Whether a copy in state ``old`` (None: not seen) may move to ``new``, as Kafka's
    RemoteLogSegmentState.isValidTransition says."""
    return new in _VALID.get(old, ())


@dataclass(slots=True)
class CopyMeta:
    """One tiered copy of a segment, as its segment record and updates describe it (updated in
    place as its state changes: a topic of 100k copies replays 200k records per plan)."""
    segment_id: str
    topic: str
    topic_id: str
    partition: int
    start_offset: int
    end_offset: int                                   # inclusive, Kafka's endOffset
    size_bytes: int
    max_timestamp_ms: int
    leader_epochs: tuple[tuple[int, int], ...]        # (epoch, start offset), ascending
    custom_metadata: bytes | None = None
    txn_index_empty: bool = False
    state: int = STARTED
    order: tuple[int, ...] = ()                       # (metadata partition, offset) of its last record
    broker_epoch: int = -1                            # the copying leader's epoch (v1 records, KIP-1266)
    # the generation of the PartitionState that may change it in place (copy on write)
    gen: int = field(default=0, compare=False, repr=False)
    # its RemoteSegment, made once (the copy changes only by being replaced)
    _segment: RemoteSegment | None = field(default=None, compare=False, repr=False)

    @property
    def readable(self) -> bool:
        return self.state == FINISHED

    def epoch_end(self, epoch: int) -> int:
        """The last offset of ``epoch`` in this copy (RemoteLogMetadataCache.highestOffsetForEpoch):
        the next epoch's start - 1, or the copy's end offset."""
        if len(self.leader_epochs) == 1:
            return self.end_offset
        later = [o for e, o in self.leader_epochs if e > epoch]
        return min(later) - 1 if later else self.end_offset

    def clone(self, gen: int) -> "CopyMeta":
        """A copy of it that generation ``gen`` may change (no cached segment)."""
        return CopyMeta(self.segment_id, self.topic, self.topic_id, self.partition, self.start_offset,
                        self.end_offset, self.size_bytes, self.max_timestamp_ms, self.leader_epochs,
                        self.custom_metadata, self.txn_index_empty, self.state, self.order, self.broker_epoch, gen)

    def segment(self) -> RemoteSegment:
        """Its :class:`RemoteSegment`, made once (``update`` drops it when it changes the copy)."""
        seg = self._segment
        if seg is None:
            # every field, in order (no presigned URL, the default storage format, no manifest)
            seg = self._segment = slots_maker(RemoteSegment)(
                self.topic, self.topic_id, self.partition, self.segment_id, self.start_offset, self.end_offset,
                self.size_bytes, self.custom_metadata, None, "ApacheKafkaV1", None, self.max_timestamp_ms, False)
        return seg

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in _FIELDS}
        d["leader_epochs"] = [list(e) for e in self.leader_epochs]
        d["order"] = list(self.order)
        d["custom_metadata"] = (None if self.custom_metadata is None
                                else base64.b64encode(self.custom_metadata).decode("ascii"))
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CopyMeta":
        d = dict(d)
        d["leader_epochs"] = tuple((int(e), int(o)) for e, o in d["leader_epochs"])
        d["order"] = tuple(d.get("order", ()))
        cm = d.get("custom_metadata")
        d["custom_metadata"] = None if cm is None else base64.b64decode(cm)
        return cls(**d)


def _by_start_then_order(c: CopyMeta) -> tuple:
    return c.start_offset, c.order


# what a snapshot holds of a copy (not its generation nor its cached segment)
_FIELDS = tuple(f for f in field_names(CopyMeta) if f not in ("gen", "_segment"))
# generations of PartitionState: a copy whose gen is not its state's is shared, and replaced
# before it changes
_GENERATIONS = itertools.count(1)


@dataclass
class EpochState:
    """Kafka's RemoteLogLeaderEpochState for one epoch: ``keys`` (ascending start offsets of
    the epoch in finished copies) map to ``ids``; ``highest`` is the highest offset of the epoch
    in any copy that finished (never lowered, as in Kafka)."""
    keys: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    highest: int | None = None

    def finished(self, start: int, segment_id: str, epoch_end: int) -> None:
        keys = self.keys
        if not keys or keys[-1] < start:       # the usual case: the next copy, after every other
            keys.append(start)
            self.ids.append(segment_id)
            if self.highest is None or epoch_end > self.highest:
                self.highest = epoch_end
            return
        # a copy reaching at least as far as every earlier one displaces the mappings at or
        # above its start (an old leader's copies that the new leader's copy is a superset of)
        while self.keys and self.keys[-1] >= start and self.highest is not None \
                and self.highest <= epoch_end:
            self.keys.pop()
            self.ids.pop()
        i = bisect.bisect_left(self.keys, start)
        if i < len(self.keys) and self.keys[i] == start:
            self.ids[i] = segment_id
        else:
            self.keys.insert(i, start)
            self.ids.insert(i, segment_id)
        if self.highest is None or epoch_end > self.highest:
            self.highest = epoch_end

    def removed(self, start: int, segment_id: str) -> None:
        i = bisect.bisect_left(self.keys, start)
        if i < len(self.keys) and self.keys[i] == start and self.ids[i] == segment_id:
            del self.keys[i]
            del self.ids[i]


@dataclass
class PartitionState:
    """The replayed state of one topic-partition's tiered copies."""
    copies: dict[str, CopyMeta] = field(default_factory=dict)
    epochs: dict[int, EpochState] = field(default_factory=dict)
    deleted: bool = False
    gen: int = field(default_factory=lambda: next(_GENERATIONS), compare=False, repr=False)
    # readable(), kept until the copies change (add, update, gone, mark_deleted drop it)
    _readable: list | None = field(default=None, compare=False, repr=False)

    def add(self, copy: CopyMeta) -> None:
        """A segment record: COPY_SEGMENT_STARTED, as RemoteLogMetadataCache.addCopyInProgressSegment
        takes it (a copy of the same id in another state stays as it is: a repeated STARTED of a
        finished copy does not make it unreadable).  A copy not seen before may also be given
        whole in its state (the ``listing`` locator's finished copies)."""
        old = self.copies.get(copy.segment_id)
        if old is not None and not valid_transition(old.state, copy.state):
            log.info("segment %s: a segment record in state %s after %s is not a valid transition; "
                     "ignored, as RemoteLogMetadataCache ignores it", copy.segment_id,
                     rlm.SEGMENT_STATES.get(copy.state, copy.state), rlm.SEGMENT_STATES.get(old.state, old.state))
            return
        self.copies[copy.segment_id] = copy
        self._readable = None
        if copy.state == FINISHED:
            self._finished(copy)

    def update(self, segment_id: str, state: int, order: tuple, *, custom_metadata: bytes | None = None,
               end_offset: int = -1) -> None:
        copy = self.copies.get(segment_id)
        if copy is None:   # its segment record was never seen (metadata retention): unusable
            log.debug("metadata update for unknown segment %s at %s ignored", segment_id, order)
            return
        if state == STARTED or not valid_transition(copy.state, state):   # STARTED comes in segment records
            log.info("segment %s: state %s after %s is not a valid transition; ignored, as "
                     "RemoteLogMetadataCache ignores it", segment_id, rlm.SEGMENT_STATES.get(state, state),
                     rlm.SEGMENT_STATES.get(copy.state, copy.state))
            return
        self._readable = None
        # copy on write: a plan holds the copies of an earlier snapshot (PartitionState.copy
        # shares them), which must not change under it
        if copy.gen != self.gen:
            copy = self.copies[segment_id] = copy.clone(self.gen)
        copy.state, copy.order, copy._segment = state, order, None
        if custom_metadata is not None:
            copy.custom_metadata = custom_metadata
        if end_offset >= 0:
            copy.end_offset = end_offset
        if state == FINISHED:
            self._finished(copy)
        elif state == DELETE_STARTED:
            self._unmapped(copy)
        elif state == DELETE_FINISHED:
            del self.copies[segment_id]

    def gone(self, segment_id: str) -> None:
        """A KIP-1266 tombstone of the copy: its records are compacted away or will be, so it
        ends as DELETE_SEGMENT_STARTED then _FINISHED would end it."""
        copy = self.copies.pop(segment_id, None)
        self._readable = None
        if copy is not None and copy.state == FINISHED:
            self._unmapped(copy)

    def _unmapped(self, copy: CopyMeta) -> None:
        """The copy's mappings taken out of its epochs' maps (DELETE_SEGMENT_STARTED)."""
        for epoch, start in copy.leader_epochs:
            es = self.epochs.get(epoch)
            if es is not None:
                es.removed(max(start, copy.start_offset), copy.segment_id)

    def _finished(self, copy: CopyMeta) -> None:
        epochs = self.epochs
        one = len(copy.leader_epochs) == 1
        for epoch, start in copy.leader_epochs:
            es = epochs.get(epoch)
            if es is None:
                es = epochs[epoch] = EpochState()
            es.finished(max(start, copy.start_offset), copy.segment_id,
                        copy.end_offset if one else copy.epoch_end(epoch))

    def mark_deleted(self) -> None:
        """A partition delete: nothing of the partition is readable any more."""
        self.deleted = True
        self._readable = None

    def readable(self) -> list[CopyMeta]:
        """The finished copies, by start offset then finish order (none once deleted).  The
        list is kept until the copies change: do not change it."""
        got = self._readable
        if got is None:
            got = self._readable = [] if self.deleted else sorted(
                (c for c in self.copies.values() if c.state == FINISHED), key=_by_start_then_order)
        return got

    def copy(self) -> "PartitionState":
        """An independent copy (replaying more records into this one leaves it as it is)."""
        # the copies are shared, not copied: update() replaces a copy it changes (copy on
        # write), so a plan of a million copies neither copies nor doubles them.  Neither side
        # may change a shared copy in place from now on: both take new generations.
        self.gen = next(_GENERATIONS)
        return PartitionState(dict(self.copies),
                              {e: EpochState(list(s.keys), list(s.ids), s.highest) for e, s in self.epochs.items()},
                              self.deleted)

    def to_dict(self) -> dict:
        return {"copies": [c.to_dict() for c in self.copies.values()],
                "epochs": {str(e): {"keys": s.keys, "ids": s.ids, "highest": s.highest}
                           for e, s in self.epochs.items()},
                "deleted": self.deleted}

    @classmethod
    def from_dict(cls, d: dict) -> "PartitionState":
        copies = {c.segment_id: c for c in map(CopyMeta.from_dict, d["copies"])}
        epochs = {int(e): EpochState(list(s["keys"]), list(s["ids"]), s["highest"])
                  for e, s in d["epochs"].items()}
        return cls(copies, epochs, bool(d["deleted"]))


@dataclass
class RemoteLogState:
    """The replayed ``__remote_log_metadata``: per ``(topic id, partition)`` a
    :class:`PartitionState`; ``positions`` is the next offset to read per metadata partition."""
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)

    def partition(self, topic_id: str, partition: int) -> PartitionState:
        return self.partitions.get((topic_id, partition)) or PartitionState()

    def apply(self, decoded: object, order: tuple) -> None:
        """Replay one decoded metadata record (:mod:`..protocol.remote_log_metadata`) read at
        ``order`` (metadata partition, offset)."""
        self.apply_row(rlm.row_of(decoded, order[1]), order[0])

    def apply_rows(self, rows: list, mp: int, *, native: bool = True) -> None:
        """Replay the rows of metadata partition ``mp`` in order, as :meth:`apply_row` does one
        by one: with ``native``, their usual state changes in C (native/rlm_replay.c, which hands
        every other row to :meth:`apply_row`); else each through :meth:`apply_row`, the
        reference."""
        if native:
            from .._native import rlm_apply
            rlm_apply(rows, mp, self.partitions, slots_maker(CopyMeta), self.apply_row)
            return
        apply_row = self.apply_row
        for row in rows:
            apply_row(row, mp)

    def apply_row(self, row: tuple, mp: int) -> None:
        """Replay one metadata record of metadata partition ``mp`` given as its row
        (:func:`~..protocol.remote_log_metadata.row_of`, or native/rlm_rows.c)."""
        kind, offset, tid, p = row[0], row[1], row[2], row[3]
        key = (tid, p)
        state = self.partitions.get(key)
        if kind == 0:
            order = (mp, offset)
            if row[13] != STARTED:
                # RemoteLogMetadataCache.addCopyInProgressSegment refuses any other state
                log.info("segment record at %s in state %s, not COPY_SEGMENT_STARTED: ignored, as "
                         "RemoteLogMetadataCache refuses it", order, row[13])
                return
            if state is None:
                state = self.partitions[key] = PartitionState()
            # a million copies share their topic's strings
            state.add(CopyMeta(row[5], intern(row[4]), intern(tid), p, row[6], row[7], row[9], row[8], row[10],
                               row[11], row[12], STARTED, order, row[14], state.gen))
        elif kind == 1:
            if state is not None:
                state.update(row[4], row[5], (mp, offset), custom_metadata=row[6], end_offset=row[7])
        elif kind == 2:
            if state is None:
                state = self.partitions[key] = PartitionState()
            state.mark_deleted()

    def tombstone(self, key: rlm.TombstoneKey) -> None:
        """Replay a KIP-1266 tombstone: the copy its key names is gone (the records that said so
        may have been compacted away before they were read)."""
        state = self.partitions.get((uuid_to_str(key.topic_id), key.partition))
        if state is None:
            return
        sid = None if key.segment_id is None else uuid_to_str(key.segment_id)
        for c in list(state.copies.values()):
            if c.segment_id == sid or (sid is None and c.end_offset == key.end_offset
                                       and c.broker_epoch == key.broker_epoch):
                state.gone(c.segment_id)

    def to_dict(self) -> dict:
        return {"partitions": [{"topic_id": t, "partition": p, **s.to_dict()}
                               for (t, p), s in self.partitions.items()],
                "positions": {str(k): v for k, v in self.positions.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "RemoteLogState":
        parts = {(x["topic_id"], int(x["partition"])): PartitionState.from_dict(x) for x in d["partitions"]}
        return cls(parts, {int(k): int(v) for k, v in d["positions"].items()})


