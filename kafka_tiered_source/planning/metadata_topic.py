"""The ``metadata-topic`` locator: find tiered segments the way today's brokers do, by reading
``__remote_log_metadata`` (Kafka 3.6+ with the topic-based RemoteLogMetadataManager).

1. Only the metadata partitions that hold the wanted topic-partitions are read (Kafka's
   partitioner over the topic id and partition; the partition count comes from Metadata), each
   once per plan, from its start to its high watermark.  Records may carry keys and tombstones
   (KIP-1266's compacted topic): keys are not needed, tombstones carry nothing.
2. The records are replayed into a :class:`~.remote_log_state.RemoteLogState`, as a broker's
   RemoteLogMetadataCache replays them: COPY_SEGMENT_FINISHED copies are readable, with the
   custom metadata of the update that finished them; DELETE_SEGMENT_STARTED means the objects
   may be gone already; a partition delete ends every copy of the partition.
3. The partition's lineage comes from OffsetForLeaderEpoch (:mod:`.lineage`): the epochs the
   copies name, asked for every partition of a topic at once.
4. Which copy serves each offset is Kafka's rule (:mod:`.coverage`): overlapping copies are
   trimmed per offset; what no copy serves goes to the broker (:mod:`.tiered`), with
   read_committed's aborted transactions from the tiered transaction indexes (skipped where the
   metadata says a segment's is empty) and the broker.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from ..errors import BrokerError, ConfigError
from ..ids import uuid_from_str
from ..model import EARLIEST, LATEST
from ..protocol import remote_log_metadata as rlm
from ..storage.segment import RemoteSegment
from .coverage import serving
from .lineage import ask_lineages
from .locate import OPTION
from .plan import PartitionRange
from .remote_log_state import RemoteLogState
from .tiered import located_spans

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "__remote_log_metadata"
# Bytes asked per Fetch while scanning a metadata partition (its records are ~200 bytes each).
_SCAN_BYTES = 4 * 1024 * 1024


class MetadataTopicReader:
    """Replays metadata partitions of ``topic`` into ``state`` with ``client``."""

    def __init__(self, client, topic: str = DEFAULT_TOPIC, state: RemoteLogState | None = None):
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

    def scan(self, mp: int, wanted: set[bytes] | None = None) -> None:
        """Replay metadata partition ``mp`` from where the state stands to its high watermark.
        ``wanted``: ids (16 bytes) of the topics to replay; other topics' records are passed
        over without being decoded (None: every record)."""
        from ..records import decode
        offset = self.state.positions.get(mp)
        if offset is None:
            offset = self.client.list_offsets(self.topic, {mp: EARLIEST}, isolation_level=0)[mp].offset
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
                    continue   # a tombstone (KIP-1266 compaction): the record it deletes is done
                if wanted is not None:
                    tid = rlm.topic_id_of(value)
                    if tid is not None and tid not in wanted:
                        continue   # another topic's segment
                record = rlm.decode_record(value, where=f"{where_topic} offset {off}")
                self.state.apply(record, (mp, off))
            offset = offsets[-1] + 1
        self.state.positions[mp] = offset


class MetadataTopicLocator:
    """Reads ``__remote_log_metadata`` (``topic``) with ``client``; ``index_of(segment)`` returns
    a segment's offset index (one GET, cached by the caller); ``fetcher`` reads the rest."""

    name = "metadata-topic"

    def __init__(self, client, fetcher, *, topic: str = DEFAULT_TOPIC, isolation_level: int = 0,
                 index_of: Callable[[RemoteSegment], bytes | None] | None = None):
        self.client = client
        self.fetcher = fetcher
        self.reader = MetadataTopicReader(client, topic)
        self.iso = isolation_level
        self.index_of = index_of or (lambda seg: fetcher.fetch_index(seg, "offset"))
        self._segments: dict[str, RemoteSegment] = {}

    @property
    def topic(self) -> str:
        return self.reader.topic

    def available(self) -> bool:
        return self.reader.available()

    def refusal(self, pr: PartitionRange) -> str | None:
        return None

    def locate_all(self, prs: Sequence[PartitionRange]) -> dict:
        try:
            return self._locate_all(prs)
        except BrokerError as exc:
            names = ", ".join(f"{pr.topic}-{pr.partition}" for pr in prs[:5])
            raise ConfigError(f"{OPTION}=metadata-topic: cannot read {self.topic} for {names}: {exc}; the "
                              f"reader needs READ and DESCRIBE on it", option=OPTION) from exc

    def _locate_all(self, prs: Sequence[PartitionRange]) -> dict:
        wanted = {uuid_from_str(pr.topic_id) for pr in prs}
        for mp in sorted({self.reader.metadata_partition(pr.topic_id, pr.partition) for pr in prs}):
            self.reader.scan(mp, wanted)
        states = {(pr.topic, pr.partition): self.reader.state.partition(pr.topic_id, pr.partition) for pr in prs}
        lineages = ask_lineages(self.client, {
            (pr.topic, pr.partition): (pr.log_start, [c.leader_epochs for c in states[(pr.topic, pr.partition)].readable()])
            for pr in prs if pr.start < pr.end and states[(pr.topic, pr.partition)].readable()})
        out = {}
        for pr in prs:
            key = (pr.topic, pr.partition)
            state = states[key]
            spans = serving(pr.start, pr.end, state, lineages.get(key))
            _log_trimmed(pr, state, spans)
            empty = {c.segment_id for c in state.readable() if c.txn_index_empty}
            out[key] = located_spans(pr, [(s, e, self._segment(c) if c is not None else None) for s, e, c in spans],
                                     offset_index=self.index_of, fetcher=self.fetcher, client=self.client,
                                     isolation_level=self.iso,
                                     txn_index_empty=_in(empty))
        return out

    def _segment(self, copy) -> RemoteSegment:
        seg = self._segments.get(copy.segment_id)
        if seg is None or seg.end_offset != copy.end_offset:
            seg = self._segments[copy.segment_id] = copy.segment()
        return seg


def _in(ids: set[str]) -> Callable[[RemoteSegment], bool]:
    return lambda seg: seg.segment_id in ids


def _log_trimmed(pr: PartitionRange, state, spans) -> None:
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
