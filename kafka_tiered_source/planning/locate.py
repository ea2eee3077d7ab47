"""Where a partition's offsets live: the locators' common interface.

A locator turns one :class:`PartitionRange` into pieces in offset order: slices of tiered
segments (read directly from remote storage) and, for what is not tiered, one broker range.
With the pieces it hands over how to find the aborted transactions a reader starting anywhere in
the range must apply (read_committed), because each locator learns those differently: KIP-1248
answers carry them, tiered ``.txnindex`` files hold them.

Locators today: ``kip1248`` (:mod:`.kip1248`, the Fetch walk with location tags) and ``listing``
(:mod:`.listing`, the object store listed, used offline).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Union

from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import BrokerRange
from .txn import AbortedFor

# With no remote data to learn from, a broker offset is guessed to cost this many bytes.
DEFAULT_BYTES_PER_OFFSET = 256


@dataclass
class Located:
    """One partition's pieces and how to find the aborted transactions of a reader of it."""
    pieces: list[Union[SegmentSlice, BrokerRange]]
    aborted_for: AbortedFor

    @property
    def segments(self) -> int:
        return sum(isinstance(p, SegmentSlice) for p in self.pieces)


class SegmentLocator(Protocol):
    name: str

    def locate(self, pr: PartitionRange) -> Located:
        """The pieces of ``[pr.start, pr.end)``."""


def no_aborted(topic, partition, first, end, first_range) -> tuple:
    """For ranges read through the brokers: their Fetch answers carry the aborted list."""
    return ()


def broker_tail(pr: PartitionRange, offset: int, remote_bytes: int = 0,
                remote_offsets: int = 0) -> BrokerRange:
    """``[offset, pr.end)`` through the brokers; its size guessed from the tiered part when
    there is one (the same producers wrote both)."""
    per_offset = remote_bytes / remote_offsets if remote_offsets else DEFAULT_BYTES_PER_OFFSET
    return BrokerRange(pr.topic, pr.partition, pr.topic_id, offset, pr.end,
                       int((pr.end - offset) * per_offset))
