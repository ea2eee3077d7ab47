"""A partition's leader-epoch lineage as a client learns it: OffsetForLeaderEpoch answers.

Kafka's broker serves offset ``o`` from remote storage under the leader epoch that wrote ``o``
on the partition's current lineage (its leader-epoch cache, ``epochForOffset``).  A client
cannot read that cache; it asks OffsetForLeaderEpoch, which answers for epoch E the largest
lineage epoch <= E and the offset where that epoch ends (the next epoch's start, or the log end
offset for the latest epoch).  :class:`Lineage` holds those answers for the epochs the copies
name and the one before each (:func:`epochs_to_ask`): together they give where each lineage
epoch starts and ends, which is all :mod:`.coverage` needs to find each offset's epoch.  Where
the lineage's first epoch starts no answer tells: the cache's first entry is moved up to the
log start offset as retention advances it, so the log start offset stands in for it.

An epoch of a copy that is not on the lineage (an unclean leader's, truncated away) gets an
answer naming another epoch, so :meth:`Lineage.has` says no and nothing is served from it in
that epoch.  Also here: Kafka's leader-epoch checkpoint text, as uploaded with each copy, for
the ``listing`` locator, which learns copies' epochs from it.
"""
from __future__ import annotations

from ..dataclass import dataclass



@dataclass(frozen=True)
class EpochAnswer:
    """OffsetForLeaderEpoch's answer for one requested epoch: the largest lineage epoch <= it
    (-1: none) and where that epoch ends (-1: unknown)."""
    leader_epoch: int
    end_offset: int


class Lineage:
    """The answers of OffsetForLeaderEpoch for the epochs :func:`epochs_to_ask` named, and the
    partition's log start offset."""

    def __init__(self, answers: dict[int, EpochAnswer], log_start_offset: int):
        self.answers = answers
        self.log_start_offset = log_start_offset

    def has(self, epoch: int) -> bool:
        a = self.answers.get(epoch)
        return a is not None and a.leader_epoch == epoch

    def start(self, epoch: int) -> int:
        """Where ``epoch`` (a lineage epoch) starts: where the lineage epoch before it ends, or
        the log start offset for the lineage's first epoch."""
        before = self.answers.get(epoch - 1)
        if before is None or before.leader_epoch < 0:
            return self.log_start_offset
        return before.end_offset

    def end(self, epoch: int) -> int:
        """Where ``epoch`` ends: the next lineage epoch's start, or the log end offset."""
        return self.answers[epoch].end_offset


def filtered_epochs(segment_epochs) -> list[tuple[int, int]]:
    """``(epoch, start offset)`` ascending, without epochs that hold no records (an epoch whose
    successor starts at the same offset)."""
    pairs = sorted(segment_epochs)
    return [(e, o) for i, (e, o) in enumerate(pairs) if i + 1 == len(pairs) or pairs[i + 1][1] != o]


def epochs_to_ask(segments_epochs) -> set[int]:
    """The epochs to ask OffsetForLeaderEpoch about for copies with these leader epochs: each
    epoch and the one before it (whose end is the epoch's start)."""
    out: set[int] = set()
    for epochs in segments_epochs:
        if len(epochs) == 1:          # most copies: one leader wrote the whole segment
            e = epochs[0][0]
            out.add(e)
            if e > 0:
                out.add(e - 1)
            continue
        for e, _ in filtered_epochs(epochs):
            out.add(e)
            if e > 0:
                out.add(e - 1)
    return out


def ask_lineages(client, wants: dict) -> dict:
    """``{(topic, partition): (log start offset, segments' epochs)}`` -> ``{(topic, partition):
    Lineage}``: the epochs :func:`epochs_to_ask` names, asked with OffsetForLeaderEpoch for
    every partition of a topic at once (one request per leader per round)."""
    by_topic: dict = {}
    for (topic, p), (_, segment_epochs) in wants.items():
        by_topic.setdefault(topic, {})[p] = sorted(epochs_to_ask(segment_epochs))
    out = {}
    for topic, asks in by_topic.items():
        answers = client.offset_for_leader_epochs(topic, asks) if any(asks.values()) else {}
        for p, epochs in asks.items():
            got = answers.get(p, {})
            out[(topic, p)] = Lineage({e: EpochAnswer(*got[e]) for e in epochs if e in got},
                                      wants[(topic, p)][0])
    return out


def parse_checkpoint(data: bytes, *, where: str) -> list[tuple[int, int]]:
    """Kafka's leader-epoch checkpoint text (``LeaderEpochCheckpointFile``: version 0, the entry
    count, then ``epoch startOffset`` lines), as RemoteLogManager uploads it with every segment
    (the uploading leader's entries up to the segment's end)."""
    from ..errors import SegmentFormatError
    lines = [ln.strip() for ln in bytes(data).decode("ascii", "replace").splitlines() if ln.strip()]
    try:
        if len(lines) < 2 or lines[0] != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError("not a version-0 checkpoint with as many entries as it says")
        entries = [(int(e), int(o)) for e, o in (ln.split() for ln in lines[2:])]
    except ValueError as exc:
        raise SegmentFormatError(f"leader-epoch checkpoint: {exc}", location=where) from None
    return entries


def epochs_in_range(entries, start: int, end: int) -> tuple[tuple[int, int], ...]:
    """LeaderEpochFileCache.epochEntriesInRange(start, end) over checkpoint ``entries``: the
    epochs with offsets in ``[start, end)``, the first one moved up to ``start`` — a segment's
    leader epochs as RemoteLogManager records them."""
    pairs = sorted(entries, key=lambda x: x[1])
    out = []
    for i, (e, o) in enumerate(pairs):
        nxt = pairs[i + 1][1] if i + 1 < len(pairs) else None
        if o >= end or (nxt is not None and nxt <= start):
            continue
        out.append((e, max(o, start)))
    return tuple(out)
