"""Transactional topics whose expected read_committed rows are known by construction.

:class:`TxnTopic` writes hand-built batches straight into the embedded broker's log (its append
API, exact layouts) and the markers a transaction coordinator would write; every value names its
transaction and the outcome it was written for (``B/abort/3``, ``plain/7``).  The expected rows of
a read of ``[start, end)`` are then the non-transactional records and the committed transactions'
records with offsets in the range, from what was written, never from the broker's serving.

:func:`build_layout` writes the layout the read_committed tests share (offsets in brackets)::

    seg0 [0, 8]    plain 0-1 | A 2-3 | B 4-5 | A ABORT 6 | C 7-8          (tiered)
    seg1 [9, 13]   plain 9-10 | C COMMIT 11 | D 12-13                     (tiered)
    seg2 [14, 18]  D ABORT 14 | B 15-16 | plain 17-18                     (tiered)
    seg3 [19, 24]  F 19-20 | B ABORT 21 | F COMMIT 22 | I 23-24           (tiered)
    seg4 [25, ...] I ABORT 25 | G 26-27 | H 28-29 | G ABORT 30 | plain 31-32 (local; H stays open)

F is D's producer's next transaction.  A's marker is in its own segment, C's and D's in the
next one, B's three copies later, I's
(records tiered) in the local tail, G's past the LSO (28: H is open), so a read to the LSO must
drop G while another transaction is open.  Offline, the tiered range ends at 24 and I has no
marker in it: read_committed stops at I's first offset, 23.
"""
from __future__ import annotations

import time

from kafka.record.default_records import DefaultRecordBatchBuilder

# Record timestamps lie far ahead of the markers' (the broker's clock), so a timestamp look-up
# finds a data record, never a marker: the first data offset at or after it is known here.
FUTURE_MS = 4_000_000_000_000
LAYOUT_LSO = 28
LAYOUT_TIERED_END = 24           # last tiered offset
OFFLINE_END = 23                 # I (23-24) has no marker in the tiered range


def ts_of(offset: int) -> int:
    return FUTURE_MS + offset * 1000


class TxnTopic:
    """Writes partition 0 of ``topic`` and remembers what each offset holds."""

    def __init__(self, c, topic: str, codec: int = 0):
        self.c, self.topic, self.codec = c, topic, codec
        self.next = 0
        self.values: dict[int, bytes] = {}          # data offset -> value
        self.txn_of: dict[int, str] = {}            # data offset -> transaction name
        self.outcome: dict[str, str] = {}           # transaction name -> commit/abort (when written)
        self.planned: dict[str, str] = {}           # transaction name -> the outcome its values name
        self.pid: dict[str, int] = {}
        self.seq: dict[int, int] = {}
        self.markers: dict[int, str] = {}           # marker offset -> transaction name

    def _batch(self, values: list[bytes], pid: int = -1, transactional: bool = False) -> None:
        seq = self.seq.get(pid, 0) if pid >= 0 else -1
        b = DefaultRecordBatchBuilder(2, self.codec, transactional, pid, 0 if pid >= 0 else -1, seq, 1 << 20)
        for i, v in enumerate(values):
            b.append(i, ts_of(self.next + i), None, v, [])
        got = self.c.append(self.topic, 0, bytes(b.build()))
        assert (got.base_offset, got.last_offset) == (self.next, self.next + len(values) - 1), "offsets as written"
        if pid >= 0:
            self.seq[pid] = seq + len(values)
        for i, v in enumerate(values):
            self.values[self.next + i] = v
        self.next += len(values)

    def plain(self, n: int) -> None:
        first = self.next
        self._batch([b"plain/%d" % (first + i) for i in range(n)])

    def txn(self, name: str, n: int, *, pid: int, outcome: str) -> None:
        """``n`` records of transaction ``name`` (producer ``pid``), written for ``outcome``."""
        assert self.planned.setdefault(name, outcome) == outcome
        self.pid[name] = pid
        first = self.next
        self._batch([b"%s/%s/%d" % (name.encode(), outcome.encode(), first + i) for i in range(n)], pid, True)
        for i in range(n):
            self.txn_of[first + i] = name

    def end(self, name: str) -> int:
        """The marker of ``name``, for the outcome its values name; returns its offset."""
        commit = self.planned[name] == "commit"
        offset = self.c.write_txn_marker(self.topic, 0, self.pid[name], 0, commit)
        assert offset == self.next
        self.outcome[name] = self.planned[name]
        self.markers[offset] = name
        self.next += 1
        return offset

    def roll(self) -> None:
        self.c.roll(self.topic, 0)

    def expected(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """``(offset, value)`` a read_committed read of ``[start, end)`` returns."""
        out = []
        for o in range(start, end):
            if o not in self.values:
                continue                                  # a marker
            name = self.txn_of.get(o)
            if name is not None:
                assert name in self.outcome, f"offset {o} of {name} is below the end but undecided"
                if self.outcome[name] != "commit":
                    continue
            out.append((o, self.values[o]))
        return out

    def first_data_at_or_after(self, offset: int) -> int:
        """The first data offset >= ``offset`` (a marker's timestamp never matches)."""
        return min(o for o in self.values if o >= offset)


def build_layout(c, topic: str = "txns", codec: int = 0) -> TxnTopic:
    """The layout of the module doc, tiered where it says; returns its :class:`TxnTopic`."""
    c.create_topic(topic, 1)
    t = TxnTopic(c, topic, codec)
    t.plain(2)
    t.txn("A", 2, pid=1, outcome="abort")
    t.txn("B", 2, pid=2, outcome="abort")
    t.end("A")
    t.txn("C", 2, pid=3, outcome="commit")
    t.roll()
    t.plain(2)
    t.end("C")
    t.txn("D", 2, pid=4, outcome="abort")
    t.roll()
    t.end("D")
    t.txn("B", 2, pid=2, outcome="abort")
    t.plain(2)
    t.roll()
    t.txn("F", 2, pid=4, outcome="commit")     # D's producer again, after its abort
    t.end("B")
    t.end("F")
    t.txn("I", 2, pid=8, outcome="abort")
    t.roll()
    t.end("I")
    c.tier(topic)
    t.txn("G", 2, pid=6, outcome="abort")
    t.txn("H", 2, pid=7, outcome="commit")      # never ended: open past the LSO
    t.end("G")
    t.plain(2)
    o = c.offsets(topic, 0)
    assert (o.last_stable_offset, o.highest_tiered_offset) == (LAYOUT_LSO, LAYOUT_TIERED_END), o
    assert [(s.base_offset, s.end_offset) for s in c.remote_segments(topic, 0)] == \
        [(0, 8), (9, 13), (14, 18), (19, 24)]
    return t


def wait_for(cond, timeout_s: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {timeout_s} s")
        time.sleep(0.02)


MOVED_LSO = 33


def build_moved(c, topic: str = "moved") -> TxnTopic:
    """Transactions across a leader move to a replica that rolls elsewhere (offsets in brackets)::

        leader   [0, 8] [9, 16] | after the move (epoch 1 from 20), the new leader's copies
        replica 1 rolls at 6 and 14, so its first copy is [14, 25] (its segment holding 17)
        0-2 plain | P 3-5 | Q 6-7 | P ABORT 8 | R 9-10 | Q COMMIT 11 | plain 12-13 | S 14-15
        R ABORT 16 | S COMMIT 17 | plain 18-19 | T 20-21 | U 22-23 | T ABORT 24 | plain 25
        U COMMIT 26 | V 27-28 | V ABORT 29 | plain 30 | W 31-32 | X 33-34 (open) | W ABORT 35 | plain 36

    R's marker (16) lies in the old copy [9, 16] and in the new one [14, 25], which serves it."""
    c.create_topic(topic, 1)
    r1 = c.add_replica(topic, 0)
    t = TxnTopic(c, topic)
    t.plain(3)
    t.txn("P", 3, pid=11, outcome="abort")
    c.roll(topic, 0, r1)
    t.txn("Q", 2, pid=12, outcome="commit")
    t.end("P")
    t.roll()
    t.txn("R", 2, pid=13, outcome="abort")
    t.end("Q")
    t.plain(2)
    c.roll(topic, 0, r1)
    t.txn("S", 2, pid=14, outcome="commit")
    t.end("R")
    t.roll()
    t.end("S")
    t.plain(2)
    assert [(m.base_offset, m.end_offset) for m in c.tier(topic)] == [(0, 8), (9, 16)]
    assert c.move_leader(topic, 0, r1) == 1
    t.txn("T", 2, pid=15, outcome="abort")
    t.txn("U", 2, pid=16, outcome="commit")
    t.end("T")
    t.plain(1)
    t.roll()
    t.end("U")
    t.txn("V", 2, pid=17, outcome="abort")
    t.roll()
    t.end("V")
    t.plain(1)
    assert [(m.base_offset, m.end_offset) for m in c.tier(topic)] == [(14, 25), (26, 28)]
    t.txn("W", 2, pid=18, outcome="abort")
    t.txn("X", 2, pid=19, outcome="commit")      # never ended
    t.end("W")
    t.plain(1)
    assert c.offsets(topic, 0).last_stable_offset == MOVED_LSO
    return t
