"""Which copy of a tiered segment is the live one: Kafka's leader-epoch lineage rule.

After an unclean leader election, or a copy retried under a new leader, ``__remote_log_metadata``
can hold two finished copies that cover the same offsets.  Kafka's RemoteLogManager serves a
remote segment only if the leader epochs it was written under lie on the partition's current
leader-epoch lineage (``RemoteLogManager.isRemoteSegmentWithinLeaderEpochs``):

* every epoch of the segment (epochs that hold no records dropped, as
  ``buildFilteredLeaderEpochMap`` does) is an epoch of the lineage;
* the segment's first epoch starts no earlier than that epoch starts in the lineage;
* each of its epochs but the last is followed, in the segment and in the lineage, by the same
  epoch at the same start offset;
* it ends before the lineage's next epoch starts after its last epoch, and before the log end.

The broker keeps the lineage in its leader-epoch cache; a client learns it through
OffsetForLeaderEpoch, which answers for epoch E the largest lineage epoch <= E and the offset
where that epoch ends (the next epoch's start, or the log end offset for the latest epoch).
:class:`Lineage` holds those answers; the checks below use nothing else, except where the
lineage's first epoch starts, which no answer tells: the cache's first entry is moved up to the
log start offset as retention advances it, so the log start offset stands in for it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EpochAnswer:
    """OffsetForLeaderEpoch's answer for one requested epoch: the largest lineage epoch <= it
    (-1: none) and where that epoch ends (-1: unknown)."""
    leader_epoch: int
    end_offset: int


class Lineage:
    """The answers of OffsetForLeaderEpoch for the epochs :func:`epochs_to_ask` named."""

    def __init__(self, answers: dict[int, EpochAnswer], log_start_offset: int, log_end_offset: int):
        self.answers = answers
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset

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
    """The epochs to ask OffsetForLeaderEpoch about to check these segments: each epoch and the
    one before it (whose end is the epoch's start)."""
    out: set[int] = set()
    for epochs in segments_epochs:
        for e, _ in filtered_epochs(epochs):
            out.add(e)
            if e > 0:
                out.add(e - 1)
    return out


def on_lineage(segment_epochs, end_offset: int, lineage: Lineage) -> bool:
    """Whether a segment with these ``(epoch, start offset)`` pairs, ending at ``end_offset``
    (inclusive), lies on the lineage: RemoteLogManager's rule, stated in the module doc."""
    epochs = filtered_epochs(segment_epochs)
    if not epochs:
        return False
    for i, (epoch, offset) in enumerate(epochs):
        if not lineage.has(epoch):
            return False
        if i == 0 and offset < lineage.start(epoch):
            return False
        if i + 1 < len(epochs):
            nxt_epoch, nxt_offset = epochs[i + 1]
            # the lineage's next epoch after this one is the segment's next, at the same offset
            if (lineage.end(epoch) != nxt_offset or not lineage.has(nxt_epoch)
                    or lineage.start(nxt_epoch) != nxt_offset):
                return False
        elif end_offset > lineage.end(epoch) - 1:
            return False
    return end_offset < lineage.log_end_offset


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
                                      wants[(topic, p)][0], -1)
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
