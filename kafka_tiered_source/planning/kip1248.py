"""The ``kip1248`` locator: ask the partition leader where each offset lives.

The range is walked with Fetch requests that carry the KIP-1248 tags
(``RemoteLogSegmentLocationRequested``).  While the leader answers with a remote location, the
range lies in a tiered segment and the answer gives the segment id, custom metadata, byte hints
and (read_committed) the aborted transactions; the walk jumps past the segment.  The first
ordinary answer means the rest is still on the brokers: it becomes one broker range.  An
answer for a segment that starts past the offset asked (a hole between tiered copies) leaves
the hole to the brokers too: they serve it or say why.

Every partition of a plan is walked at once (:func:`~kafka_tiered_source.protocol.rounds.fetch_rounds`):
each round asks every partition a leader leads for its next segment in one request, and the
rounds are pipelined, so a plan costs about one round trip per segment of its longest partition,
not one per segment.  The walk stops below the partition's earliest local offset (ListOffsets
-4), where a KIP-1248 broker serves records rather than locations: planning never pulls local
records through the broker.  A leader that does not advertise the feature is probed first with
a one-byte limit, so that a broker ignoring the tags sends one batch at most.
"""
from __future__ import annotations

from ..errors import BrokerError, ConfigError
from ..model import EARLIEST_LOCAL
from ..protocol.fetch_answers import (P_ABORTED, P_BASE_OFFSET, P_CUSTOM_METADATA, P_END_OFFSET, P_END_POSITION,
                                      P_SEGMENT_ID, P_SIGNED_LOCATION, P_START_POSITION, P_STORAGE_FORMAT)
from ..protocol.rounds import fetch_rounds
from ..records.backend import slots_maker
from ..storage.segment import RemoteSegment
from .locate import OPTION, Located, TieredEnds, broker_range, broker_tail, merged
from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import AbortedTransaction, BrokerRange, RemoteRange

INT32_MAX = 2**31 - 1
# A probe asks for one byte: a broker that ignores the KIP-1248 tags then returns one batch.
_PROBE_BYTES = 1


class Kip1248Locator:
    """``client`` is a :class:`~kafka_tiered_source.protocol.client.BrokerClient`.  Without a
    configured fetcher (``storage_configured`` false) only segments with a presigned URL are
    read directly, the rest through the brokers; with ``spans_only`` (direct reads off) every
    segment is.  Either way the walk goes on, so each broker range knows the tiered spans it
    crosses (:attr:`~.tasks.BrokerRange.tiered`)."""

    name = "kip1248"

    def __init__(self, client, *, isolation_level: int, storage_configured: bool,
                 strict: bool = False, tiered_ends: TieredEnds | None = None, spans_only: bool = False):
        self.client = client
        self.iso = isolation_level
        self.storage_configured = storage_configured and not spans_only
        self.spans_only = spans_only
        # asked for by name: a walk that finds nothing of a tiered range is an error
        self.strict = strict
        self.tiered_ends = tiered_ends
        # a RemoteSegment and a SegmentSlice per copy (a million at 1M copies), made from every
        # field in order without the frozen __init__'s object.__setattr__ per field
        self.make_segment, self.make_slice = slots_maker(RemoteSegment), slots_maker(SegmentSlice)

    def refusal(self, pr: PartitionRange) -> str | None:
        if not self.client.supports_kip1248(pr.topic, pr.partition):
            return (f"the leader of {pr.topic}-{pr.partition} speaks no flexible Fetch version (12+), "
                    f"which the KIP-1248 tags need")
        return None

    def _locate(self, pr: PartitionRange, offset: int, max_bytes: int):
        return self.client.fetch(pr.topic, pr.partition, offset, max_bytes=max_bytes,
                                 partition_max_bytes=max_bytes, max_wait_ms=0, min_bytes=0,
                                 isolation_level=self.iso, request_remote_location=True)

    def locate(self, pr: PartitionRange) -> Located:
        return self.locate_all([pr])[(pr.topic, pr.partition)]

    def locate_all(self, prs) -> dict:
        """``{(topic, partition): Located}`` for every range, walked together."""
        walks = {(pr.topic, pr.partition): _Walk(self, pr) for pr in prs}
        local = self._earliest_local([pr for pr in prs if pr.start < pr.end])
        starts = {}
        for key, w in walks.items():
            w.limit = min(w.pr.end, local.get(key, w.pr.end))
            if w.offset < w.limit:
                probe = not self.client.advertises_kip1248(*key)
                w.probing = probe
                starts[key] = (w.offset, _PROBE_BYTES if probe else INT32_MAX)
        if starts:
            fetch_rounds(self.client, starts, lambda key, result: walks[key].advance(result),
                         isolation_level=self.iso, request_remote_location=True)
        out = {key: w.located() for key, w in walks.items()}
        if self.strict and self.tiered_ends is not None:
            for w in walks.values():
                if w.limit > w.pr.start:     # something of the range is only in remote storage
                    self._check_found(w.pr, out[(w.pr.topic, w.pr.partition)], w.answered)
        return out

    def _check_found(self, pr: PartitionRange, loc: Located, answered: bool) -> None:
        """A walk that found nothing although the range is tiered: the broker ignored the tags,
        which is an error when ``kip1248`` was asked for by name.  (A walk answered with
        locations that serve nothing, compacted copies, found what there is.)"""
        if loc.segments or answered or pr.start >= pr.end:
            return
        latest_tiered = self.tiered_ends(pr) if self.tiered_ends is not None else None
        if latest_tiered is not None and latest_tiered >= pr.start:
            raise ConfigError(f"{OPTION}=kip1248, but the broker ignores the KIP-1248 tags: "
                              f"{pr.topic}-{pr.partition} is tiered up to offset {latest_tiered} and the "
                              f"leader answered with records, not locations; use auto or metadata-topic",
                              option=OPTION)

    def _earliest_local(self, prs: list[PartitionRange]) -> dict:
        """The earliest local offset of each partition (one ListOffsets per topic and leader);
        left out where the broker is too old to say (ListOffsets v8, Kafka 3.5)."""
        by_topic: dict = {}
        for pr in prs:
            by_topic.setdefault(pr.topic, []).append(pr.partition)
        out = {}
        for topic, parts in by_topic.items():
            try:
                listed = self.client.list_offsets(topic, dict.fromkeys(parts, EARLIEST_LOCAL))
            except BrokerError as exc:
                if exc.error_name == "UNSUPPORTED_VERSION":
                    continue
                raise
            out.update({(topic, p): o.offset for p, o in listed.items() if o.offset >= 0})
        return out


class _Walk:
    """One partition's walk: the slices found so far and where it stands."""

    def __init__(self, locator: Kip1248Locator, pr: PartitionRange):
        self.locator = locator
        self.pr = pr
        self.offset = pr.start
        self.limit = pr.end
        self.probing = False
        self.pieces: list = []        # SegmentSlice, or (start, end, tiered spans) for the brokers
        self.answered = False         # the leader answered a location
        # first offset of a slice -> the aborted transactions the leader answered for it
        self.aborted_at: dict[int, tuple] = {}
        self.remote_bytes = self.remote_offsets = 0

    def advance(self, part: tuple):
        """Take one Fetch answer (a partition's tuple, :mod:`~..protocol.fetch_answers`); what to
        ask next, or None when the walk is over."""
        sid = part[P_SEGMENT_ID]
        if sid is None:
            return None              # records, not a location: the rest is the brokers'
        self.answered = True
        if self.probing:             # the leader answers locations: ask for the whole segment
            self.probing = False
            return self.offset, INT32_MAX
        pr = self.pr
        start_pos, end_pos = part[P_START_POSITION], part[P_END_POSITION]
        if end_pos < start_pos or start_pos < 0:
            return None              # an inconsistent hint: the broker serves the rest
        signed = part[P_SIGNED_LOCATION]
        # every field in order: no manifest read, no max timestamp, positions from the broker
        seg = self.locator.make_segment(pr.topic, pr.topic_id, pr.partition, sid, part[P_BASE_OFFSET], part[P_END_OFFSET],
                            end_pos, part[P_CUSTOM_METADATA], signed, part[P_STORAGE_FORMAT] or "ApacheKafkaV1",
                            None, None, True)
        # A later segment than asked for: the leader would serve the offset from that segment's
        # first batch (RemoteLogManager.read moved past a copy whose tail holds no record).  The
        # offsets between go to the brokers, which answer them so; a tiered copy serves them.
        first = max(self.offset, seg.base_offset)
        if first > self.offset:
            end = min(first, pr.end)
            self.pieces.append((self.offset, end, ((self.offset, end),)))
        if first >= pr.end:
            self.offset = pr.end
            return None
        seg_end = min(pr.end, seg.end_offset + 1)
        if end_pos == start_pos or self.locator.spans_only or (not self.locator.storage_configured and not signed):
            # No bytes (the leader would serve nothing up to the segment's end offset: a fetch
            # answers empty records there), nothing to read the segment with, or direct reads
            # off: the brokers serve it, and an empty answer there is the copy's compacted tail.
            # (A location alone never makes offsets be skipped: a wrong one costs a fetch.)
            self.pieces.append((first, seg_end, ((first, seg.end_offset + 1, seg),)))
        else:
            listed = part[P_ABORTED]
            # read_uncommitted (null), or none aborted: the usual answer, no tuple made
            self.aborted_at[first] = tuple(AbortedTransaction(*a) for a in listed) if listed else ()
            self.pieces.append(self.locator.make_slice(seg, first, seg_end, ((first, start_pos),)))
            self.remote_bytes += end_pos - start_pos
            self.remote_offsets += seg_end - first
        self.offset = seg.end_offset + 1
        return (self.offset, INT32_MAX) if self.offset < self.limit else None

    def located(self) -> Located:
        pr, aborted_at = self.pr, self.aborted_at
        pieces: list = []
        for p in self.pieces:
            if isinstance(p, tuple):
                r = broker_range(pr, p[0], p[1], self.remote_bytes, self.remote_offsets, tiered=p[2])
                if pieces and isinstance(pieces[-1], BrokerRange) and pieces[-1].offset_end == r.offset_start:
                    r = merged(pieces.pop(), r)
                pieces.append(r)
            else:
                pieces.append(p)
        if self.offset < pr.end:
            r = broker_tail(pr, self.offset, self.remote_bytes, self.remote_offsets)
            if pieces and isinstance(pieces[-1], BrokerRange) and pieces[-1].offset_end == r.offset_start:
                r = merged(pieces.pop(), r)
            pieces.append(r)
        locator = self.locator

        def aborted_for(topic, p, first, end, first_range):
            """The answer for exactly ``first`` (asked now when no slice starts there), plus the
            answers of the slices that start later inside ``[first, end)``.  For contiguous
            slices this is what a broker answers for one fetch over the whole span."""
            if not isinstance(first_range, RemoteRange):   # broker answers carry their own lists
                return ()
            if first not in aborted_at:
                aborted_at[first] = _aborted(locator._locate(pr, first, INT32_MAX).partition)
            return [a for start, entries in sorted(aborted_at.items()) if first <= start < end
                    for a in entries]

        located = Located(pieces, aborted_for)
        located.coverage = tuple((p.offset_start, p.offset_end, p.segment if isinstance(p, SegmentSlice) else None)
                                 for p in pieces)
        return located


def _aborted(part) -> tuple:
    listed = part.aborted_transactions
    if not listed:          # read_uncommitted (null), or none aborted: the usual answer
        return ()
    return tuple(AbortedTransaction(a.producer_id, a.first_offset) for a in listed)
