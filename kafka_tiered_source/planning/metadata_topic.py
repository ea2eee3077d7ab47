"""The ``metadata-topic`` locator: find tiered segments the way today's brokers do, by reading
``__remote_log_metadata`` (Kafka 3.6+ with the topic-based RemoteLogMetadataManager).

1. Only the metadata partitions that hold the wanted topic-partitions are read (Kafka's
   partitioner over the topic id and partition; the partition count comes from Metadata), and
   only from where the process's catalog (:mod:`.catalog`) stands: a later plan reads just what
   was written since the last one, or since a snapshot another process left.  Other topics'
   records are passed over without being decoded (:mod:`~..protocol.metadata_select`).
   Records may carry keys and tombstones (KIP-1266's compacted topic).  A replay from the start
   needs neither: compaction leaves either all of a deleted copy's records or none of them.  A
   replay from a position needs the tombstones: the cleaner may have removed a copy's delete
   events after that position, superseded by its tombstone, before they were read; so a
   tombstone ends the copy its key names, and one whose key names nothing this version reads
   means the partition is read again from its start.
2. The records are replayed into a :class:`~.remote_log_state.RemoteLogState`, as a broker's
   RemoteLogMetadataCache replays them: only the state changes RemoteLogSegmentState allows;
   COPY_SEGMENT_FINISHED copies are readable, with the custom metadata of the update that
   finished them; DELETE_SEGMENT_STARTED means the objects may be gone already; a partition
   delete ends every copy of the partition.
3. The partition's lineage comes from OffsetForLeaderEpoch (:mod:`.lineage`): the epochs the
   copies name, asked for every partition of a topic at once.
4. Which copy serves each offset is Kafka's rule (:mod:`.coverage`): overlapping copies are
   trimmed per offset; what no copy serves goes to the broker (:mod:`.tiered`), with
   read_committed's aborted transactions from the tiered transaction indexes (skipped where the
   metadata says a segment's is empty) and the broker.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Sequence

from ..errors import BrokerError, ConfigError
from ..ids import uuid_from_str
from ..model import EARLIEST, LATEST
from ..protocol import remote_log_metadata as rlm
from ..protocol.metadata_select import select_records
from ..storage.segment import RemoteSegment
from .coverage import Served, serving_all, split_at
from .locate import OPTION, Key, Located, spans_only
from .plan import PartitionRange
from .remote_log_state import PartitionState, RemoteLogState
from .tiered import located_spans

if TYPE_CHECKING:
    from .catalog import Catalogs
    from .catalog_snapshots import SnapshotStore

log = logging.getLogger(__name__)

DEFAULT_TOPIC = rlm.TOPIC
# Bytes asked per Fetch while scanning a metadata partition (its records are ~150 bytes each).
SCAN_BYTES = 8 * 1024 * 1024


class Discontinuity(Exception):
    """The metadata partition is no longer the log read up to a position: why, in words."""


@dataclass(frozen=True)
class Replayed:
    """Where a replay of one metadata partition ended: the next offset to read, the
    partitionLeaderEpoch of the last batch read (-1: none), the log start offset and high
    watermark the partition showed, and how many records were applied and passed over."""
    next_offset: int
    last_epoch: int
    log_start: int
    high_watermark: int
    applied: int
    passed: int
    start: int = 0           # where it began
    keyed: bool = False      # records with keys were seen (a KIP-1266 topic, compacted)


def replay(client: Any, topic: str, mp: int, state: RemoteLogState, wanted: Collection[bytes] | None, *,
           start: int | None, last_epoch: int = -1, high_watermark: int = -1, proven: bool = False) -> Replayed:
    """Replay metadata partition ``mp`` of ``topic`` into ``state``, in the partition's order,
    from ``start`` (None: its log start offset) to its high watermark; ``wanted``: the ids of
    the topics whose records are replayed (None: every record).

    With a ``start``, the first answer must show that the log is still the one read up to it
    (``high_watermark``: the one seen then under the same leader epoch, -1: none), and each
    tombstone must name the copy it ends: otherwise :class:`Discontinuity` (the state may then
    hold part of the replay: drop it).  ``proven``: OffsetForLeaderEpoch showed the position on
    a new leader's log, whose high watermark may still lag below it: then there is nothing to
    read yet, and that is no discontinuity."""
    where = f"{topic}-{mp}"
    offset = start
    if offset is None:
        offset = client.list_offsets(topic, {mp: EARLIEST}, isolation_level=0)[mp].offset
    ahead = _Ahead(client, topic, mp)
    try:
        return _replay(client, topic, mp, state, wanted, start, last_epoch, high_watermark, proven, where, offset,
                       ahead)
    finally:
        ahead.close()


class _Ahead:
    """The next Fetch of a replay, asked on a thread of its own while the rows of the last one
    are replayed (the broker's answer and the replay then overlap: a metadata partition of a
    large cluster is hundreds of answers).  Only one request is ever in flight, and the replay
    waits for it before it returns or raises, so the client is used by one thread at a time."""

    def __init__(self, client: Any, topic: str, mp: int):
        self.client, self.topic, self.mp = client, topic, mp
        self._thread: Any = None
        self._offset = -1
        self._result: Any = None

    def fetch(self, offset: int) -> Any:
        """The answer at ``offset``: the one asked ahead, or asked now."""
        if self._thread is not None and self._offset == offset:
            self._thread.join()
            self._thread = None
            ok, value = self._result
            if not ok:
                raise value
            return value
        self.close()
        return self._fetch(offset)

    def _fetch(self, offset: int) -> Any:
        return self.client.fetch(self.topic, self.mp, offset, max_bytes=SCAN_BYTES, partition_max_bytes=SCAN_BYTES,
                                 max_wait_ms=0, min_bytes=0, isolation_level=0)

    def ask(self, offset: int) -> None:
        """Ask for the answer at ``offset`` now, on a thread."""
        import threading

        def run() -> None:
            try:
                self._result = (True, self._fetch(offset))
            except BaseException as exc:   # handed to fetch(), which raises it where it is used
                self._result = (False, exc)
        self._offset = offset
        self._thread = threading.Thread(target=run, name=f"kafka-tiered-{self.topic}-{self.mp}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Wait for a request in flight (its answer is dropped)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _replay(client: Any, topic: str, mp: int, state: RemoteLogState, wanted: Collection[bytes] | None,
            start: int | None, last_epoch: int, high_watermark: int, proven: bool, where: str, offset: int,
            ahead: _Ahead) -> Replayed:
    hw = log_start = -1
    applied = passed = 0
    keyed = False
    first = offset
    while True:
        try:
            res = ahead.fetch(offset)
        except BrokerError as exc:
            if start is None or exc.error_name != "OFFSET_OUT_OF_RANGE":
                raise
            # Kafka refuses a fetch below the log start or past the log end: say which
            listed = client.list_offsets(topic, {mp: EARLIEST}, isolation_level=0)[mp].offset
            _check_range(start, listed, client.list_offsets(topic, {mp: LATEST}, isolation_level=0)[mp].offset,
                         high_watermark, proven)
            raise Discontinuity(f"the position {start} is out of its range") from None
        if hw < 0:
            part = res.partition
            hw, log_start = part.high_watermark, part.log_start_offset
            if start is not None:
                _check_range(start, log_start, hw, high_watermark, proven)
        got = select_records(res.records or b"", wanted, decode=True)
        if got.next_offset is not None and offset < got.next_offset < hw:
            ahead.ask(got.next_offset)       # while these rows are replayed
        tombstones = iter(t for t in got.tombstones if t[0] >= offset)
        tomb = next(tombstones, None)
        apply_row = state.apply_row
        for hit in got.hits:
            # a row (native/rlm_rows.c, or its twin rlm.row_of), or (offset, value) for the codec
            # to read or to say what is wrong with it
            off = hit[0] if len(hit) == 2 else hit[1]
            while tomb is not None and tomb[0] < off:
                _tombstone(state, tomb, wanted, where, incremental=start is not None)
                tomb = next(tombstones, None)
            if off >= offset:    # a fetch answers from the batch holding the offset
                if len(hit) == 2:
                    hit = rlm.row_of(rlm.decode_record(hit[1], where=f"{where} offset {off}"), off)
                apply_row(hit, mp)
                applied += 1
        while tomb is not None:
            _tombstone(state, tomb, wanted, where, incremental=start is not None)
            tomb = next(tombstones, None)
        passed += got.passed
        keyed = keyed or got.keyed > 0
        if got.next_offset is None or got.next_offset <= offset:
            break        # nothing more below the high watermark
        offset, last_epoch = got.next_offset, got.last_epoch
        if offset >= hw:
            break
    state.positions[mp] = offset
    return Replayed(offset, last_epoch, log_start, hw, applied, passed, first, keyed)


def _check_range(start: int, log_start: int, hw: int, seen_hw: int, proven: bool = False) -> None:
    """A position read on from must not lie below the log start, and the high watermark must
    not have gone down since it was seen under the same leader (``seen_hw``).  With no high
    watermark seen (-1) it must not lie below the position, unless OffsetForLeaderEpoch
    ``proven`` the position on a new leader's log, whose high watermark may lag.  (A high
    watermark seen below the position was such a lagging one: that leader proved the position.)"""
    if log_start > start:
        raise Discontinuity(f"its log start offset {log_start} is past the position {start} "
                            f"(records were deleted before they were read)")
    if hw < seen_hw or (hw < start and seen_hw < 0 and not proven):
        raise Discontinuity(f"its high watermark {hw} is below the position {start} or the "
                            f"high watermark {seen_hw} seen before (the log was truncated)")


def _tombstone(state: RemoteLogState, tomb: tuple[int, bytes | None], wanted: Collection[bytes] | None,
               where: str, *, incremental: bool) -> None:
    offset, raw = tomb
    key = rlm.tombstone_key(raw)
    if key is None:
        if incremental and raw is not None:
            raise Discontinuity(f"the tombstone at offset {offset} has a key this version cannot read "
                                f"({bytes(raw[:60])!r}), so which copy it ends is unknown")
        return
    if wanted is None or key.topic_id in wanted:
        state.tombstone(key)


class MetadataTopicReader:
    """Replays metadata partitions of ``topic`` into ``state`` with ``client``."""

    def __init__(self, client: Any, topic: str = DEFAULT_TOPIC, state: RemoteLogState | None = None):
        self.client = client
        self.topic = topic
        self.state = state if state is not None else RemoteLogState()
        self._partitions: int | None = None
        self._available: bool | None = None

    def partitions(self) -> int:
        """The metadata topic's partition count (a BrokerError when it cannot be described:
        missing, or no DESCRIBE permission)."""
        if self._partitions is None:
            self._partitions = len(self.client.topic(self.topic, refresh=True).partitions)
        return self._partitions

    def available(self) -> bool:
        """Whether the metadata topic exists and can be described (``auto`` moves on if not)."""
        if self._available is None:
            try:
                self.partitions()
                self._available = True
            except BrokerError as exc:
                log.info("%s cannot be read (%s): not locating segments through it", self.topic, exc)
                self._available = False
        return self._available

    def metadata_partition(self, topic_id: str, partition: int) -> int:
        return rlm.metadata_partition(uuid_from_str(topic_id), partition, self.partitions())

    def scan(self, mp: int, wanted: Collection[bytes] | None = None) -> Replayed:
        """Replay metadata partition ``mp`` from where the state stands to its high watermark.
        ``wanted``: ids (16 bytes) of the topics to replay; other topics' records are passed
        over without being decoded (None: every record)."""
        return replay(self.client, self.topic, mp, self.state, wanted, start=self.state.positions.get(mp))


class MetadataTopicLocator:
    """Reads ``__remote_log_metadata`` (``topic``) with ``client``; ``index_of(segment)`` returns
    a segment's offset index (one GET, cached by the caller); ``fetcher`` reads the rest.

    The metadata comes from ``catalogs`` (default: this process's,
    :data:`.catalog.CATALOGS`), which follows the metadata partitions from plan to plan and
    snapshots them into ``snapshots`` (None: in the process only); ``refresh`` rescans the
    metadata partitions this plan needs from their start."""

    name = "metadata-topic"

    def __init__(self, client: Any, fetcher: Any, *, topic: str = DEFAULT_TOPIC, isolation_level: int = 0,
                 index_of: Callable[[RemoteSegment], bytes | None] | None = None,
                 catalogs: "Catalogs | None" = None, snapshots: "SnapshotStore | None" = None,
                 refresh: bool = False, ask_on_storage_fault: bool = True, spans_only: bool = False):
        # spans_only (direct reads off): everything through the brokers, each range knowing the
        # spans tiered copies serve; no fetcher is needed then
        self.spans_only = spans_only
        self.client = client
        self.fetcher = fetcher
        self.reader = MetadataTopicReader(client, topic)
        self.iso = isolation_level
        self.index_of = index_of or (lambda seg: fetcher.fetch_index(seg, "offset"))
        self.catalogs = catalogs
        self.snapshots = snapshots
        self.refresh = refresh
        # read_committed: a later copy's transaction index that cannot be read is asked of the
        # broker (fetch.remote.fallback allows it), else the read fails naming the transaction
        self.ask_on_storage_fault = ask_on_storage_fault

    @property
    def topic(self) -> str:
        return self.reader.topic

    def available(self) -> bool:
        return self.reader.available()

    def refusal(self, pr: PartitionRange) -> str | None:
        return None

    def locate_all(self, prs: Sequence[PartitionRange]) -> dict[Key, Located]:
        try:
            return self._locate_all(prs)
        except BrokerError as exc:
            names = ", ".join(f"{pr.topic}-{pr.partition}" for pr in prs[:5])
            raise ConfigError(f"{OPTION}=metadata-topic: cannot read {self.topic} for {names}: {exc}; the "
                              f"reader needs READ and DESCRIBE on it", option=OPTION) from exc

    def states(self, prs: Sequence[PartitionRange]) -> dict[Key, PartitionState]:
        """The replayed state of each range's partition, the catalog brought up to date first."""
        from .catalog import CATALOGS
        catalog = (self.catalogs or CATALOGS).catalog(self.client, self.topic)
        catalog.follow(self.client, [(pr.topic_id, pr.partition) for pr in prs], snapshots=self.snapshots,
                       refresh=self.refresh)
        return {(pr.topic, pr.partition): catalog.partition(pr.topic_id, pr.partition) for pr in prs}

    def _locate_all(self, prs: Sequence[PartitionRange]) -> dict[Key, Located]:
        states = self.states(prs)
        served = serving_all(self.client, prs, states, past_end=self.iso == 1)
        out = {}
        for pr in prs:
            key = (pr.topic, pr.partition)
            state = states[key]
            # each copy's RemoteSegment is made once and kept with it (CopyMeta.segment)
            spans, after = split_at([(s, e, c.segment() if c is not None else None) for s, e, c in served[key]],
                                    pr.end)
            _log_trimmed(pr, state, [x for x in served[key] if x[0] < pr.end])
            if self.spans_only:
                out[key] = spans_only(pr, spans)
                continue
            empty = {c.segment_id for c in state.readable() if c.txn_index_empty}
            out[key] = located_spans(pr, spans, offset_index=self.index_of, fetcher=self.fetcher, client=self.client,
                                     isolation_level=self.iso, txn_index_empty=_in(empty), after=after,
                                     ask_on_storage_fault=self.ask_on_storage_fault)
        return out

def _in(ids: set[str]) -> Callable[[RemoteSegment], bool]:
    return lambda seg: seg.segment_id in ids


def _log_trimmed(pr: PartitionRange, state: PartitionState, spans: Sequence[Served]) -> None:
    """At INFO, the copies that serve only part of what they hold, or nothing (overlaps)."""
    if not log.isEnabledFor(logging.INFO):
        return
    used = {c.segment_id for _, _, c in spans if c is not None}
    for c in state.readable():
        if c.end_offset < pr.start or c.start_offset >= pr.end:
            continue
        if c.segment_id not in used:
            log.info("%s-%d: tiered copy %s [%d, %d] serves no offset of [%d, %d): other copies serve "
                     "them, or its leader epochs are not the lineage's there", pr.topic, pr.partition,
                     c.segment_id, c.start_offset, c.end_offset, pr.start, pr.end)
