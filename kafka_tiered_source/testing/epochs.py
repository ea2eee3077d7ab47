"""A partition's leader-epoch cache, as Kafka's ``LeaderEpochFileCache`` keeps it: each leader
epoch and the offset where it starts, in the partition directory's ``leader-epoch-checkpoint``
(Kafka's text format: version 0, the entry count, then ``epoch startOffset`` lines).

Each replica of a partition keeps its own cache; a leadership change assigns the new epoch at
the new leader's log end offset (Partition.makeLeader: :meth:`LeaderEpochCache.assign`), every
batch appended afterwards carries the new epoch, and followers assign the epochs of the
batches they replicate.  OffsetForLeaderEpoch answers from here (:meth:`end_offset_for`); from
those answers a client learns which leader epoch wrote each offset (the planner's coverage:
which copy serves it).
"""
from __future__ import annotations

import bisect
import os

CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, directory: str):
        self.path = os.path.join(directory, CHECKPOINT)
        self.entries: list[tuple[int, int]] = []     # (epoch, start offset), both ascending

    # -- persistence
    def load(self) -> bool:
        """Read the checkpoint; False when there is none (the owner rebuilds from batches)."""
        if not os.path.exists(self.path):
            return False
        with open(self.path, encoding="ascii") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        if len(lines) < 2 or lines[0] != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError(f"{self.path}: not a version-0 leader-epoch checkpoint")
        self.entries = [(int(e), int(o)) for e, o in (ln.split() for ln in lines[2:])]
        return True

    def discard(self) -> None:
        """Forget every entry, on disk too (the partition's segments are being replaced)."""
        self.entries = []
        if os.path.exists(self.path):
            os.remove(self.path)

    def save(self) -> None:
        lines = ["0", str(len(self.entries))] + [f"{e} {o}" for e, o in self.entries]
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, self.path)

    # -- updates
    @property
    def latest(self) -> int:
        """The current leader epoch (0 before any)."""
        return self.entries[-1][0] if self.entries else 0

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``, as LeaderEpochFileCache.assign does:
        nothing changes when the latest entry is that epoch from no later an offset; otherwise the
        entries of that epoch or later, or starting at or after ``start_offset``, are dropped
        first (a new leader's epoch at an offset an older epoch also claimed wins)."""
        if epoch < 0 or start_offset < 0:
            return False
        if self.entries and self.entries[-1][0] == epoch and start_offset >= self.entries[-1][1]:
            return False
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start_offset):
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        return True

    def truncate_from_start(self, offset: int) -> None:
        """The log start offset moved to ``offset`` (LeaderEpochFileCache.truncateFromStart):
        entries that start before it go, except the last of them, which now starts there."""
        before = [e for e in self.entries if e[1] <= offset]
        if not before:
            return
        last = before[-1]
        kept = [(last[0], offset)] + [e for e in self.entries if e[1] > offset]
        if kept != self.entries:
            self.entries = kept
            self.save()

    def truncate_from_end(self, offset: int) -> None:
        """The log was truncated to ``offset`` (LeaderEpochFileCache.truncateFromEnd): entries
        that start at or after it go."""
        kept = [e for e in self.entries if e[1] < offset]
        if kept != self.entries:
            self.entries = kept
            self.save()

    # -- look-ups
    def entries_in_range(self, start: int, end: int) -> list[tuple[int, int]]:
        """LeaderEpochFileCache.epochEntriesInRange: the entries of ``[start, end)``, the first
        moved up to ``start`` (``start`` < 0: from the first entry)."""
        out = []
        for i, (e, o) in enumerate(self.entries):
            nxt = self.entries[i + 1][1] if i + 1 < len(self.entries) else None
            if o >= end or (start >= 0 and nxt is not None and nxt <= start):
                continue
            out.append((e, max(o, start)))
        return out

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer, as LeaderEpochFileCache.endOffsetFor gives it: for the
        latest epoch the log end offset; else the largest epoch <= ``requested`` and the next
        epoch's start; for an epoch below every entry, that epoch and the first entry's start;
        above every entry (or none), (-1, -1)."""
        if requested < 0 or not self.entries:
            return -1, -1
        if requested == self.entries[-1][0]:
            return requested, log_end_offset
        i = bisect.bisect_right(self.entries, (requested, float("inf")))
        if i >= len(self.entries):
            return -1, -1
        higher_start = self.entries[i][1]
        if i == 0:
            return requested, higher_start
        return self.entries[i - 1][0], higher_start

    def epoch_for(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (-1 when it lies before the first entry)."""
        i = bisect.bisect_right([o for _, o in self.entries], offset) - 1
        return self.entries[i][0] if i >= 0 else -1
