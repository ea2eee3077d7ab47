"""A partition's leader-epoch cache, as Kafka's ``LeaderEpochFileCache`` keeps it: each leader
epoch and the offset where it starts, in the partition directory's ``leader-epoch-checkpoint``
(Kafka's text format: version 0, the entry count, then ``epoch startOffset`` lines).

The embedded broker is always its partitions' leader; :meth:`LeaderEpochCache.bump` stands in for a
leadership change (Kafka assigns the new epoch at the log end offset when a replica becomes
leader), and every batch appended afterwards carries the new epoch.  OffsetForLeaderEpoch answers
from here (:meth:`end_offset_for`), and so does the lineage rule that decides which copy of a
tiered segment is live.
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
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``assign``: an epoch not newer
        than the latest, or a start offset below the latest one's, changes nothing)."""
        if epoch < 0:
            return False
        if self.entries and (epoch <= self.entries[-1][0] or start_offset < self.entries[-1][1]):
            return False
        self.entries.append((epoch, start_offset))
        return True

    def bump(self, log_end_offset: int) -> int:
        """A new leader epoch, starting at the log end offset; returns it."""
        epoch = self.latest + 1
        self.entries.append((epoch, log_end_offset))
        self.save()
        return epoch

    # -- look-ups
    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer: the largest epoch <= ``requested`` and where it ends
        (the next epoch's start, or the log end offset for the latest); (-1, -1) for none."""
        i = bisect.bisect_right(self.entries, (requested, float("inf"))) - 1
        if i < 0:
            return -1, -1
        epoch = self.entries[i][0]
        end = self.entries[i + 1][1] if i + 1 < len(self.entries) else log_end_offset
        return epoch, end

    def epoch_for(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (-1 when it lies before the first entry)."""
        i = bisect.bisect_right([o for _, o in self.entries], offset) - 1
        return self.entries[i][0] if i >= 0 else -1
