"""What a read task is: the small, frozen, picklable ranges that travel from the driver to the
executors.  Planning builds them (:mod:`.packing`); the executor reads them; estimates count
them.  Nothing here does I/O.
"""
from __future__ import annotations

from typing import Union

from ..dataclass import dataclass
from ..storage.segment import RemoteSegment


@dataclass(frozen=True, slots=True)
class RemoteRange:
    """Read bytes ``[byte_start, byte_end)`` of a tiered segment's ``.log`` data and emit the
    records with offsets in ``[offset_start, offset_end)``.  ``byte_start`` is always a batch
    boundary; ``byte_end`` may cut a batch (leftover)."""
    segment: RemoteSegment
    byte_start: int
    byte_end: int
    offset_start: int
    offset_end: int
    estimated_bytes: int
    estimated_records: int

    @property
    def topic(self) -> str:
        return self.segment.topic

    @property
    def partition(self) -> int:
        return self.segment.partition


@dataclass(frozen=True, slots=True)
class BrokerRange:
    """Fetch offsets ``[offset_start, offset_end)`` of one partition from the brokers.

    As planner input, ``estimated_bytes`` is the planner's guess for the whole range; splits
    share it in proportion to their offsets.

    ``tiered``: the spans ``(start, end exclusive)`` of the range that tiered copies serve, one
    per copy, as the plan found them, each with the copy (its :class:`RemoteSegment`) where the
    plan knows it: ``(start, end, copy)``.  A broker answers a fetch inside one with no records
    below the high watermark where that copy holds no batch from there to its end (compaction
    left it a tail: RemoteLogManager.read answers nothing), but also where a remote read
    outlasted ``remote.fetch.max.wait.ms``: the reader goes on at the span's end only once it
    has proven the tail empty (:mod:`~kafka_tiered_source.executor.tails`)."""
    topic: str
    partition: int
    topic_id: str
    offset_start: int
    offset_end: int
    estimated_bytes: int
    tiered: tuple[tuple, ...] = ()

    @property
    def estimated_records(self) -> int:
        return self.offset_end - self.offset_start


Range = Union[RemoteRange, BrokerRange]


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """One entry of Fetch's ``AbortedTransactions`` (or of a ``.txnindex``)."""
    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class PartitionTxnInfo:
    """What a read_committed reader needs for one partition: the last stable offset (read
    nothing at or past it) and the aborted transactions that may touch the ranges read."""
    topic: str
    partition: int
    last_stable_offset: int
    aborted: tuple[AbortedTransaction, ...] = ()


@dataclass(frozen=True, slots=True)
class ReadTask:
    """One Spark input partition.  ``ranges`` are grouped by topic-partition in the planner's
    order, each partition's ranges in ascending offset order.  ``txn`` holds the
    :class:`PartitionTxnInfo` of the partitions read (read_committed only, else empty)."""
    index: int
    ranges: tuple[Range, ...]
    txn: tuple[PartitionTxnInfo, ...] = ()

    @property
    def estimated_bytes(self) -> int:
        return sum(r.estimated_bytes for r in self.ranges)

    @property
    def estimated_records(self) -> int:
        return sum(r.estimated_records for r in self.ranges)

    @property
    def topic_partitions(self) -> tuple[tuple[str, int], ...]:
        return tuple(dict.fromkeys((r.topic, r.partition) for r in self.ranges))
