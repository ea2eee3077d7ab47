"""Where a partition's offsets live: the locators' common interface, and how one is chosen.

A locator (:class:`SegmentLocator`) turns partition ranges into a coverage map and the pieces
built from it, in offset order: slices of tiered segments (read directly from remote storage)
and broker ranges for what no tiered copy serves.  With the pieces it hands over how to find
the aborted transactions a reader starting anywhere in the range must apply (read_committed),
because each locator learns those differently: KIP-1248 answers carry them, tiered
``.txnindex`` files hold them.

Locators: ``kip1248`` (:mod:`.kip1248`, the Fetch walk with location tags), ``metadata-topic``
(:mod:`.metadata_topic`, ``__remote_log_metadata`` as today's brokers keep it), ``listing``
(:mod:`.listing`, the object store listed; offline too) and :class:`BrokerLocator` (everything
through the brokers).  :class:`LocatorChoice` picks one per partition: by name, or for
``auto`` the first of a chain of (condition, locator) that holds.  Whatever the locator, the
planner checks its pieces against the range (:func:`.coverage.check_cover`) before packing.
"""
from __future__ import annotations

from itertools import repeat
from typing import Any, Callable, Iterable, Protocol, Sequence, Union

from ..dataclass import dataclass, field
from ..errors import BrokerError, ConfigError
from ..model import LATEST_TIERED
from .coverage import Exclusion
from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import BrokerRange
from .txn import AbortedFor

# With no remote data to learn from, a broker offset is guessed to cost this many bytes.
DEFAULT_BYTES_PER_OFFSET = 256
OPTION = "remote.segment.locator"
Key = tuple  # (topic, partition)


@dataclass
class Located:
    """One partition's pieces and how to find the aborted transactions of a reader of it.
    ``coverage``: the served spans the pieces were built from (``(start, end, segment or
    None)``), for estimates and tests; ``exclusions``: offsets deliberately read nowhere;
    ``past_end``: how the aborted transactions whose markers lie past the range's end are found
    (a :class:`~.txn_ends.PastEnd`; None where ``aborted_for``'s answers hold them already)."""
    pieces: list[Union[SegmentSlice, BrokerRange]]
    aborted_for: AbortedFor
    exclusions: list[Exclusion] = field(default_factory=list)
    coverage: tuple = ()
    past_end: Any = None

    @property
    def segments(self) -> int:
        return sum(map(isinstance, self.pieces, repeat(SegmentSlice)))   # no Python step per piece


class SegmentLocator(Protocol):
    """A way of finding where offsets live.  ``refusal`` says why it cannot serve a partition
    when asked for by name (None: it can); ``locate_all`` locates every range given at once."""
    name: str

    def refusal(self, pr: PartitionRange) -> str | None: ...

    def locate_all(self, prs: Sequence[PartitionRange]) -> dict[Key, Located]: ...


def no_aborted(topic, partition, first, end, first_range) -> tuple:
    """For ranges read through the brokers: their Fetch answers carry the aborted list."""
    return ()


def broker_range(pr: PartitionRange, start: int, end: int, remote_bytes: int = 0,
                 remote_offsets: int = 0, *, tiered: tuple = ()) -> BrokerRange:
    """``[start, end)`` through the brokers; its size guessed from the tiered part when there
    is one (the same producers wrote both).  ``tiered``: the spans of it tiered copies serve."""
    per_offset = remote_bytes / remote_offsets if remote_offsets else DEFAULT_BYTES_PER_OFFSET
    return BrokerRange(pr.topic, pr.partition, pr.topic_id, start, end, int((end - start) * per_offset),
                       tuple(tiered))


def merged(a: BrokerRange, b: BrokerRange) -> BrokerRange:
    """Two broker ranges of a partition that meet (``a`` ends where ``b`` starts) as one."""
    return BrokerRange(a.topic, a.partition, a.topic_id, a.offset_start, b.offset_end,
                       a.estimated_bytes + b.estimated_bytes, a.tiered + b.tiered)


def spans_only(pr: PartitionRange, spans: Sequence) -> Located:
    """The pieces of ``pr`` when direct reads are off: everything through the brokers, each
    range knowing the spans tiered copies serve and the copy serving each (``spans``:
    ``(start, end, copy or None)``, contiguous over the range), where an answer with no records
    may be a compacted tail."""
    tiered = tuple((s, e, copy) for s, e, copy in spans if copy is not None)
    pieces: list[Union[SegmentSlice, BrokerRange]] = (
        [broker_range(pr, pr.start, pr.end, tiered=tiered)] if pr.start < pr.end else [])
    located = Located(pieces, no_aborted)
    located.coverage = tuple(spans)
    return located


def broker_tail(pr: PartitionRange, offset: int, remote_bytes: int = 0,
                remote_offsets: int = 0) -> BrokerRange:
    """``[offset, pr.end)`` through the brokers."""
    return broker_range(pr, offset, pr.end, remote_bytes, remote_offsets)


class BrokerLocator:
    """Everything through the brokers (direct reads off, or nothing of the range tiered)."""

    name = "broker"

    def refusal(self, pr: PartitionRange) -> str | None:
        return None

    def locate_all(self, prs: Sequence[PartitionRange]) -> dict[Key, Located]:
        out = {}
        for pr in prs:
            loc = Located([broker_tail(pr, pr.start)] if pr.start < pr.end else [], no_aborted)
            loc.coverage = ((pr.start, pr.end, None),) if pr.start < pr.end else ()
            out[(pr.topic, pr.partition)] = loc
        return out


class Unavailable:
    """A locator that cannot be built with these options: refuses by name, with the reason."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason

    def refusal(self, pr: PartitionRange) -> str | None:
        return self.reason

    def locate_all(self, prs: Sequence[PartitionRange]) -> dict[Key, Located]:
        raise ConfigError(f"{OPTION}={self.name}: {self.reason}", option=OPTION)


class TieredEnds:
    """ListOffsets LATEST_TIERED (-5) of the plan's partitions: the highest tiered offset (-1:
    none), None where the broker is older than Kafka 3.9 (ListOffsets v9).  Asked once per
    topic, for every partition of the plan, when first needed."""

    def __init__(self, client, ranges: Iterable[PartitionRange]):
        self.client = client
        self.partitions: dict[str, list[int]] = {}
        for pr in ranges:
            self.partitions.setdefault(pr.topic, []).append(pr.partition)
        self._ends: dict[Key, int | None] = {}

    def __call__(self, pr: PartitionRange) -> int | None:
        key = (pr.topic, pr.partition)
        if key not in self._ends:
            parts = self.partitions.get(pr.topic) or [pr.partition]
            try:
                listed = self.client.list_offsets(pr.topic, dict.fromkeys(parts, LATEST_TIERED))
                self._ends.update({(pr.topic, p): o.offset for p, o in listed.items()})
            except BrokerError as exc:
                if exc.error_name != "UNSUPPORTED_VERSION":
                    raise
                self._ends.update({(pr.topic, p): None for p in parts})
        return self._ends.get(key)

    def none_in(self, pr: PartitionRange) -> bool:
        """Whether the broker says nothing of ``pr`` is tiered."""
        end = self(pr)
        return end is not None and end < pr.start


Condition = Callable[[PartitionRange], bool]


class LocatorChoice:
    """Which locator serves each partition: ``named`` (``remote.segment.locator``) or, for
    ``auto``, the first ``(condition, locator)`` of ``chain`` whose condition holds, else
    ``fallback``.  A partition with an empty range goes to ``fallback``; one with no direct
    reads to the first of ``undirected`` whose condition holds (locators that learn where the
    tiered copies are and hand everything to the brokers), else ``fallback``."""

    def __init__(self, name: str, locators: dict[str, SegmentLocator], chain: Sequence[tuple[Condition, SegmentLocator]],
                 fallback: SegmentLocator, undirected: Sequence[tuple[Condition, SegmentLocator]] = ()):
        self.name = name
        self.locators = locators
        self.chain = chain
        self.fallback = fallback
        self.undirected = undirected

    def choose(self, pr: PartitionRange, direct: bool) -> SegmentLocator:
        if pr.start >= pr.end:
            return self.fallback
        if not direct:
            return next((loc for cond, loc in self.undirected if cond(pr)), self.fallback)
        if self.name == "auto":
            return next((loc for cond, loc in self.chain if cond(pr)), self.fallback)
        loc = self.locators[self.name]
        why = loc.refusal(pr)
        if why is not None:
            raise ConfigError(f"{OPTION}={self.name}: {why}", option=OPTION)
        return loc

    def locate(self, ranges: Sequence[PartitionRange], direct: dict) -> tuple[dict[Key, Located], dict[Key, str]]:
        """Every range located by its locator (each locator asked once, for all its ranges);
        and the name of each partition's locator (``broker`` when it found no tiered slice)."""
        groups: dict[int, tuple[SegmentLocator, list]] = {}
        for pr in ranges:
            loc = self.choose(pr, direct[(pr.topic, pr.partition)])
            groups.setdefault(id(loc), (loc, []))[1].append(pr)
        located: dict[Key, Located] = {}
        names: dict[Key, str] = {}
        for loc, prs in groups.values():
            found = loc.locate_all(prs)
            for pr in prs:
                key = (pr.topic, pr.partition)
                located[key] = found[key]
                names[key] = loc.name if found[key].segments else "broker"
        return located, names
