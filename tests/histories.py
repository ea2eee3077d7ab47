"""Driving one partition of an EmbeddedCluster through the histories real clusters write, and an
oracle of what a consumer must see that owes nothing to the broker's serving.

Batches are appended as a producer's Produce appends them (built with kafka-python's own record
batch builder, so the bytes are not this project's), transactions with their markers.

:class:`History` is the oracle: every record appended (offset, key, value), which transactions
aborted, what compaction removed and which lineage won an unclean election.  Its rules are
stated here, from Kafka's documentation and code, not taken from the embedded broker:

* **compaction** (:meth:`History.clean`, LogCleaner over ``[start, end)``): a record stays if it
  has a key, no later record of the region has that key (records of aborted transactions do not
  count), it is not in an aborted transaction, and it is not a tombstone whose
  ``delete.retention.ms`` passed.  Transaction markers stay (they are never shown anyway).
* **unclean election** (:meth:`History.truncate`): records at or past the new leader's log end
  are gone; later appends take their offsets again.
* **consumers** (:meth:`History.expected`): every record still there from ``start`` on;
  read_committed leaves out aborted transactions and stops at the first offset of the earliest
  open transaction (the LSO).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafka.record.default_records import DefaultRecordBatchBuilder

TS0 = 1_700_000_000_000


@dataclass
class Written:
    base: int
    last: int
    data: bytes
    values: list          # (offset, key, value) of the data records; value None: a tombstone
    pid: int = -1         # producer id of a transactional batch, -1 otherwise
    control: bool = False


@dataclass
class History:
    cluster: object
    topic: str
    partition: int = 0
    written: list[Written] = field(default_factory=list)
    aborted: set = field(default_factory=set)     # offsets of records of aborted transactions
    open_txn: dict = field(default_factory=dict)  # pid -> [offsets]
    removed: set = field(default_factory=set)     # offsets compaction removed
    sequences: dict = field(default_factory=dict)
    log_end: int = 0
    n: int = 0

    def _record(self, i: int, keyed: bool, tombstones: bool) -> tuple:
        n = self.n + i
        key = (b"k%d" % (n % 7)) if keyed else None
        value = None if (keyed and tombstones and n % 5 == 4) else b"v%d" % n
        return key, value

    def batch(self, count: int, *, keyed: bool = False, pid: int = -1, codec: int = 0,
              tombstones: bool = False) -> bytes:
        txn = pid >= 0
        seq = self.sequences.get(pid, 0) if txn else -1
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=txn,
                                      producer_id=pid, producer_epoch=0 if txn else -1,
                                      base_sequence=seq, batch_size=1 << 20)
        for i in range(count):
            key, value = self._record(i, keyed, tombstones)
            b.append(i, timestamp=TS0 + self.n + i, key=key, value=value, headers=[])
        if txn:
            self.sequences[pid] = seq + count
        return bytes(b.build())

    def produce(self, count: int, *, per_batch: int = 10, keyed: bool = False, pid: int = -1,
                codec: int = 0, tombstones: bool = False) -> None:
        """``count`` records in batches of ``per_batch`` (one Produce each); with ``tombstones``
        every fifth keyed record has a null value."""
        done = 0
        while done < count:
            k = min(per_batch, count - done)
            data = self.batch(k, keyed=keyed, pid=pid, codec=codec, tombstones=tombstones)
            res = self.cluster.append(self.topic, self.partition, data)
            assert res.base_offset == self.log_end, (res.base_offset, self.log_end)
            buf = bytearray(data)
            struct.pack_into(">q", buf, 0, res.base_offset)
            struct.pack_into(">i", buf, 12, self.cluster.leader_epoch(self.topic, self.partition))
            values = [(res.base_offset + i, *self._record(i, keyed, tombstones)) for i in range(k)]
            self.written.append(Written(res.base_offset, res.last_offset, bytes(buf), values, pid))
            if pid >= 0:
                self.open_txn.setdefault(pid, []).extend(o for o, _, _ in values)
            self.n += k
            done += k
            self.log_end = res.last_offset + 1

    def end_txn(self, pid: int, commit: bool) -> int:
        from kafka_tiered_source.testing.log import control_batch
        offset = self.cluster.write_txn_marker(self.topic, self.partition, pid, 0, commit)
        assert offset == self.log_end
        offsets = self.open_txn.pop(pid, [])
        if not commit:
            self.aborted.update(offsets)
        # the marker as another replica holds it (the timestamp is the control record's own)
        data = control_batch(offset, pid, 0, commit, 0, TS0,
                             self.cluster.leader_epoch(self.topic, self.partition))
        self.written.append(Written(offset, offset, data, [], pid, control=True))
        self.log_end = offset + 1
        return offset

    # -- what Kafka does to the log -----------------------------------------------------------
    def clean(self, start: int, end: int, *, remove_tombstones: bool) -> int:
        """LogCleaner over the records of ``[start, end)``: the offsets it removes (module doc);
        returns how many."""
        region = [(o, k, v) for w in self.written if not w.control for o, k, v in w.values
                  if start <= o < end and o not in self.removed]
        latest = {k: o for o, k, _ in region if k is not None and o not in self.aborted}
        gone = {o for o, k, v in region
                if o in self.aborted or k is None or latest[k] != o or (v is None and remove_tombstones)}
        self.removed |= gone
        return len(gone)

    def truncate(self, offset: int) -> None:
        """An unclean leader election: the winning replica's log ends at ``offset`` (a batch
        boundary); what lay past it is another lineage's."""
        assert not self.open_txn, "an election with a transaction open is not modelled"
        self.written = [w for w in self.written if w.base < offset]
        assert all(w.last < offset for w in self.written), f"{offset} is not a batch boundary"
        self.removed = {o for o in self.removed if o < offset}
        self.aborted = {o for o in self.aborted if o < offset}
        self.log_end = offset

    def data_between(self, start: int, end: int) -> bytes:
        """The written batches of offsets ``[start, end]`` (batch-aligned), as one segment."""
        parts = [w for w in self.written if start <= w.base and w.last <= end]
        if not parts or parts[0].base != start or parts[-1].last != end:
            raise ValueError(f"[{start}, {end}] is not batch-aligned")
        return b"".join(w.data for w in parts)

    @property
    def bases(self) -> list[int]:
        return [w.base for w in self.written]

    def keeps_transactions(self, offset: int) -> bool:
        """Whether a log cut at ``offset`` leaves every transaction begun before it decided (a
        cut between a transaction's records and its marker would leave it hanging: not
        modelled)."""
        first: dict[int, int] = {}
        for w in self.written:
            if w.control:
                if first.pop(w.pid, offset) < offset <= w.base:
                    return False
            elif w.pid >= 0:
                first.setdefault(w.pid, w.base)
        return all(f >= offset for f in first.values())

    # -- what consumers see -------------------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        firsts = [min(offsets) for offsets in self.open_txn.values() if offsets]
        return min(firsts) if firsts else self.log_end

    def expected(self, *, committed: bool, start: int = 0, end: int | None = None) -> list[tuple]:
        """(offset, key, value) a consumer sees from ``start`` to ``end`` (exclusive)."""
        if committed:
            end = self.last_stable_offset if end is None else min(end, self.last_stable_offset)
        out = []
        for w in self.written:
            for off, k, v in w.values:
                if off < start or (end is not None and off >= end) or off in self.removed:
                    continue
                if committed and off in self.aborted:
                    continue
                out.append((off, k, v))
        return out


def rows_of(batches, topic: str, partition: int = 0) -> list[tuple]:
    """(offset, key, value) of Arrow batches (TaskReader's output) of one partition."""
    out = []
    for b in batches:
        d = b.to_pydict()
        for t, p, o, k, v in zip(d["topic"], d["partition"], d["offset"], d["key"], d["value"], strict=True):
            if (t, p) == (topic, partition):
                out.append((o, None if k is None else bytes(k), None if v is None else bytes(v)))
    return sorted(out)
