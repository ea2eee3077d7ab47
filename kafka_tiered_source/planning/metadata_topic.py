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

from typing import Any, Callable, Sequence

from ..errors import BrokerError, ConfigError
from ..logs import INFO, get_logger
from ..storage.segment import RemoteSegment
from .catalog import CATALOGS, Catalogs
from .catalog_snapshots import SnapshotStore
from .coverage import Served, serving_all, split_at
from .locate import OPTION, Key, Located, spans_only
from .plan import PartitionRange
from .remote_log_state import PartitionState
from .replay import DEFAULT_TOPIC, MetadataTopicReader
from .tiered import located_spans


log = get_logger(__name__)

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
                 catalogs: Catalogs | None = None, snapshots: SnapshotStore | None = None,
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
            spans = [(s, e, c.segment() if c is not None else None) for s, e, c in served[key]]
            # read_committed: the spans go on past the end (to the LSO); else they end at it
            spans, after = split_at(spans, pr.end) if self.iso == 1 else (spans, [])
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
    if not log.isEnabledFor(INFO):
        return
    used = {c.segment_id for _, _, c in spans if c is not None}
    for c in state.readable():
        if c.end_offset < pr.start or c.start_offset >= pr.end:
            continue
        if c.segment_id not in used:
            log.info("%s-%d: tiered copy %s [%d, %d] serves no offset of [%d, %d): other copies serve "
                     "them, or its leader epochs are not the lineage's there", pr.topic, pr.partition,
                     c.segment_id, c.start_offset, c.end_offset, pr.start, pr.end)
