"""The ``metadata-topic`` locator: find tiered segments the way today's brokers do, by reading
``__remote_log_metadata`` (Kafka 3.6+ with the topic-based RemoteLogMetadataManager).

1. Only the metadata partitions that hold the wanted topic-partitions are read (Kafka's
   partitioner over the topic id and partition; the partition count comes from Metadata), each
   once per plan, from its start to its high watermark.
2. The records are replayed per segment (:class:`MetadataCatalog`): a segment record
   (COPY_SEGMENT_STARTED), then updates; only COPY_SEGMENT_FINISHED segments are readable, with
   the custom metadata of the update that finished them.  DELETE_SEGMENT_STARTED means the
   objects may be gone already; a partition delete marker ends every segment of that partition.
3. Two readable copies covering the same offsets are told apart as RemoteLogManager does: the
   one whose leader epochs lie on the partition's current lineage wins (:mod:`.lineage`,
   answered by OffsetForLeaderEpoch).
4. The partition's range becomes slices of the chosen segments up to the last tiered offset and
   one broker range for the rest, with read_committed's aborted transactions from the tiered
   transaction indexes (skipped where the metadata says a segment's is empty) and the broker
   (:mod:`.tiered`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from itertools import pairwise

from ..errors import BrokerError
from ..ids import uuid_from_str, uuid_to_str
from ..model import EARLIEST, LATEST
from ..protocol import remote_log_metadata as rlm
from ..storage.segment import RemoteSegment
from .lineage import EpochAnswer, Lineage, epochs_to_ask, on_lineage
from .locate import Located
from .plan import PartitionRange
from .tiered import locate_tiered

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "__remote_log_metadata"
# Bytes asked per Fetch while scanning a metadata partition (its records are ~200 bytes each).
_SCAN_BYTES = 4 * 1024 * 1024


@dataclass
class TieredCopy:
    """One copy of a segment as the metadata topic tells it."""
    segment_id: str
    topic: str
    topic_id: str
    partition: int
    start_offset: int
    end_offset: int
    size_bytes: int
    max_timestamp_ms: int
    leader_epochs: tuple[tuple[int, int], ...]
    custom_metadata: bytes | None
    txn_index_empty: bool
    state: int
    order: tuple = ()          # (metadata partition, offset) of the record that set the state

    @property
    def readable(self) -> bool:
        return self.state == rlm.COPY_SEGMENT_FINISHED

    def segment(self) -> RemoteSegment:
        return RemoteSegment(topic=self.topic, topic_id=self.topic_id, partition=self.partition,
                             segment_id=self.segment_id, base_offset=self.start_offset,
                             end_offset=self.end_offset, size_bytes=self.size_bytes,
                             custom_metadata=self.custom_metadata, max_timestamp=self.max_timestamp_ms)


@dataclass
class MetadataCatalog:
    """The replayed state of the metadata partitions read so far."""
    copies: dict = field(default_factory=dict)           # segment id -> TieredCopy
    deleted: set = field(default_factory=set)            # (topic id, partition) deleted

    def apply(self, record, order: tuple) -> None:
        if isinstance(record, rlm.SegmentRecord):
            tip = record.remote_log_segment_id.topic_id_partition
            seg_id = uuid_to_str(bytes(record.remote_log_segment_id.id))
            self.copies[seg_id] = TieredCopy(
                segment_id=seg_id, topic=tip.name, topic_id=uuid_to_str(bytes(tip.id)),
                partition=tip.partition, start_offset=record.start_offset,
                end_offset=record.end_offset, size_bytes=record.segment_size_in_bytes,
                max_timestamp_ms=record.max_timestamp_ms,
                leader_epochs=tuple((e.leader_epoch, e.offset) for e in record.segment_leader_epochs),
                custom_metadata=_bytes(record.custom_metadata),
                txn_index_empty=bool(record.txn_index_empty),
                state=record.remote_log_segment_state, order=order)
        elif isinstance(record, rlm.SegmentUpdate):
            seg_id = uuid_to_str(bytes(record.remote_log_segment_id.id))
            copy = self.copies.get(seg_id)
            if copy is None:   # its segment record was never seen (metadata retention): unusable
                log.debug("metadata update for unknown segment %s at %s ignored", seg_id, order)
                return
            copy.state = record.remote_log_segment_state
            copy.order = order
            if record.custom_metadata is not None:
                copy.custom_metadata = _bytes(record.custom_metadata)
            if getattr(record, "end_offset", -1) >= 0:
                copy.end_offset = record.end_offset
        elif isinstance(record, rlm.PartitionDelete):
            tip = record.topic_id_partition
            self.deleted.add((uuid_to_str(bytes(tip.id)), tip.partition))

    def readable(self, topic_id: str, partition: int) -> list[TieredCopy]:
        """The partition's finished copies, by start offset (a deleted partition has none)."""
        if (topic_id, partition) in self.deleted:
            return []
        return sorted((c for c in self.copies.values()
                       if c.topic_id == topic_id and c.partition == partition and c.readable),
                      key=lambda c: (c.start_offset, c.order))


def _bytes(v) -> bytes | None:
    return None if v is None else bytes(v)


class MetadataTopicLocator:
    """Reads ``__remote_log_metadata`` (``topic``) with ``client``; ``index_of(segment)`` returns
    a segment's offset index (one GET, cached by the caller); ``fetch_index`` reads any index."""

    name = "metadata-topic"

    def __init__(self, client, fetcher, *, topic: str = DEFAULT_TOPIC, isolation_level: int = 0,
                 index_of=None):
        self.client = client
        self.fetcher = fetcher
        self.topic = topic
        self.iso = isolation_level
        self.index_of = index_of or (lambda seg: fetcher.fetch_index(seg, "offset"))
        self.catalog = MetadataCatalog()
        self._partitions: int | None = None
        self._available: bool | None = None
        self._scanned: set[int] = set()
        # ids (16 bytes) of the topics the plan reads, set by the planner: records of other
        # topics are passed over without being decoded (None: every record is replayed)
        self.wanted: set[bytes] | None = None

    # -- reading the metadata topic ------------------------------------------------------------
    def partitions(self) -> int:
        """The metadata topic's partition count (a BrokerError when it cannot be described:
        missing, or no DESCRIBE permission)."""
        if self._partitions is None:
            self._partitions = len(self.client.topic(self.topic, refresh=True).partitions)
        return self._partitions

    def available(self) -> bool:
        """Whether the metadata topic exists and can be described (``auto`` moves on if not);
        asked once per plan."""
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

    def scan(self, mp: int) -> None:
        """Replay metadata partition ``mp`` from its start to its high watermark, once."""
        if mp in self._scanned:
            return
        from ..records import decode
        listed = self.client.list_offsets(self.topic, {mp: EARLIEST}, isolation_level=0)
        offset = listed[mp].offset
        end = self.client.list_offsets(self.topic, {mp: LATEST}, isolation_level=0)[mp].offset
        where_topic = f"{self.topic}-{mp}"
        while offset < end:
            res = self.client.fetch(self.topic, mp, offset, max_bytes=_SCAN_BYTES,
                                    partition_max_bytes=_SCAN_BYTES, max_wait_ms=0, min_bytes=0,
                                    isolation_level=0)
            table = decode(res.records or b"", topic=self.topic, partition=mp, start_offset=offset,
                           include_headers=False)
            if table.num_rows == 0:
                break
            offsets = table.column("offset").to_pylist()
            for off, value in zip(offsets, table.column("value").to_pylist(), strict=True):
                if value is None:
                    continue   # not a metadata record (a tombstone never appears; be lenient)
                if self.wanted is not None:
                    tid = rlm.topic_id_of(value)
                    if tid is not None and tid not in self.wanted:
                        continue   # another topic's segment
                record = rlm.decode_record(value, where=f"{where_topic} offset {off}")
                self.catalog.apply(record, (mp, off))
            offset = offsets[-1] + 1
        self._scanned.add(mp)

    # -- choosing the live copies --------------------------------------------------------------
    def _lineage(self, pr: PartitionRange, copies: list[TieredCopy]) -> Lineage:
        epochs = epochs_to_ask(c.leader_epochs for c in copies)
        answers = self.client.offset_for_leader_epoch(pr.topic, pr.partition, sorted(epochs))
        end = self.client.list_offsets(pr.topic, {pr.partition: LATEST}, isolation_level=0)[pr.partition].offset
        return Lineage({e: EpochAnswer(*answers[e]) for e in epochs}, pr.log_start, end)

    def live_copies(self, pr: PartitionRange) -> list[TieredCopy]:
        """The readable copies Kafka would serve, in offset order, without overlaps."""
        self.scan(self.metadata_partition(pr.topic_id, pr.partition))
        copies = self.catalog.readable(pr.topic_id, pr.partition)
        overlapping = {id(a) for a, b in pairwise(copies) if b.start_offset <= a.end_offset}
        overlapping |= {id(b) for a, b in pairwise(copies) if b.start_offset <= a.end_offset}
        if overlapping:
            contested = [c for c in copies if id(c) in overlapping]
            lineage = self._lineage(pr, contested)
            stale = [c for c in contested if not on_lineage(c.leader_epochs, c.end_offset, lineage)]
            for c in stale:
                log.info("%s-%d: tiered copy %s [%d, %d] is not on the leader-epoch lineage; "
                         "skipped as RemoteLogManager does", pr.topic, pr.partition, c.segment_id,
                         c.start_offset, c.end_offset)
            copies = [c for c in copies if c not in stale]
        out: list[TieredCopy] = []
        for c in copies:   # still overlapping (both on the lineage): the latest record wins
            if out and c.start_offset <= out[-1].end_offset:
                if c.order > out[-1].order:
                    out[-1] = c
                continue
            out.append(c)
        return out

    # -- the locator ---------------------------------------------------------------------------
    def locate(self, pr: PartitionRange) -> Located:
        copies = self.live_copies(pr)
        empty = {c.segment_id for c in copies if c.txn_index_empty}
        return locate_tiered(pr, [c.segment() for c in copies], offset_index=self.index_of,
                             fetcher=self.fetcher, client=self.client, isolation_level=self.iso,
                             txn_index_empty=lambda seg: seg.segment_id in empty)
