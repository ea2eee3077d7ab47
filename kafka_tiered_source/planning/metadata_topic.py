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
   one broker range for the rest.  A slice's byte start is 0 unless the range enters the segment
   mid-way; then one GET of the segment's remote offset index finds it.
5. read_committed: the aborted transactions of a tiered slice come from the ``.txnindex`` of the
   tiered segments from the slice on (skipped where the metadata says the index is empty), plus
   the broker's answer for the first untiered offset, which lists every aborted transaction still
   open there whose marker lies in the local log.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..ids import uuid_from_str, uuid_to_str
from ..model import EARLIEST, LATEST
from ..protocol import remote_log_metadata as rlm
from ..storage.indexes import lookup_position, parse_offset_index, parse_txn_index
from ..storage.segment import RemoteSegment
from .lineage import EpochAnswer, Lineage, epochs_to_ask, on_lineage
from .locate import Located, broker_tail
from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import AbortedTransaction, RemoteRange
from .txn import aborted_in

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
                             custom_metadata=self.custom_metadata)


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
        self._scanned: set[int] = set()

    # -- reading the metadata topic ------------------------------------------------------------
    def partitions(self) -> int:
        """The metadata topic's partition count (a BrokerError when it cannot be described:
        missing, or no DESCRIBE permission)."""
        if self._partitions is None:
            self._partitions = len(self.client.topic(self.topic, refresh=True).partitions)
        return self._partitions

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
            for off, value in zip(offsets, table.column("value").to_pylist()):
                if value is None:
                    continue   # not a metadata record (a tombstone never appears; be lenient)
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
        overlapping = {id(a) for a, b in zip(copies, copies[1:]) if b.start_offset <= a.end_offset}
        overlapping |= {id(b) for a, b in zip(copies, copies[1:]) if b.start_offset <= a.end_offset}
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
        copies = [c for c in self.live_copies(pr) if c.end_offset >= pr.start and c.start_offset < pr.end]
        pieces: list = []
        offset = pr.start
        remote_bytes = remote_offsets = 0
        tiered: list[TieredCopy] = []
        for c in copies:
            if c.start_offset > offset:
                break   # a hole in the tiered range (deleted copies): the broker serves the rest
            seg = c.segment()
            first, end = offset, min(pr.end, c.end_offset + 1)
            start_pos = 0
            if first > c.start_offset:   # entered mid-way: the offset index says where
                index = self.index_of(seg)
                start_pos = lookup_position(parse_offset_index(index or b""), c.start_offset, first)
            pieces.append(SegmentSlice(seg, first, end, ((first, start_pos),)))
            tiered.append(c)
            remote_bytes += c.size_bytes - start_pos
            remote_offsets += end - first
            offset = end
            if offset >= pr.end:
                break
        if offset < pr.end:
            pieces.append(broker_tail(pr, offset, remote_bytes, remote_offsets))
        return Located(pieces, self._aborted_for(pr, tiered, offset))

    def _aborted_for(self, pr: PartitionRange, tiered: list[TieredCopy], untiered_from: int):
        """read_committed: see step 5 of the module doc.  Read lazily, once per partition."""
        cache: dict = {}

        def entries():
            if "all" not in cache:
                found = []
                for c in tiered:
                    if c.txn_index_empty:
                        continue
                    data = self.fetcher.fetch_index(c.segment(), "transaction")
                    if data:
                        found += parse_txn_index(data, location=f"{pr.topic}-{pr.partition} segment "
                                                                 f"{c.segment_id}")
                local = []
                if untiered_from < pr.latest:
                    res = self.client.fetch(pr.topic, pr.partition, untiered_from, max_bytes=1,
                                            partition_max_bytes=1, max_wait_ms=0, min_bytes=0,
                                            isolation_level=1)
                    local = [AbortedTransaction(a.producer_id, a.first_offset)
                             for a in (res.partition.aborted_transactions or ())]
                cache["all"] = (found, local)
            return cache["all"]

        def aborted_for(topic, p, first, end, first_range):
            if not isinstance(first_range, RemoteRange):   # broker answers carry their own lists
                return ()
            found, local = entries()
            # markers in the local log lie past every tiered offset, so past ``first``
            return [*aborted_in(found, first, end), *(a for a in local if a.first_offset < end)]

        return aborted_for

