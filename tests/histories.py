"""Driving one partition of an EmbeddedCluster through the histories real clusters write:
batches appended as a producer's Produce appends them (built with kafka-python's own record
batch builder, so the bytes are not this project's), transactions with their markers, rolls
per replica, leader moves, tiering, re-uploads of copies, retention.

:class:`History` keeps every batch as the broker wrote it (offset and leader epoch assigned), so
a test can re-upload the batches of any offset range as another copy, and knows which records a
consumer must see (:meth:`History.expected`), aborted transactions excluded under read_committed.
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
    values: list          # (offset, key, value) of the data records
    pid: int = -1         # producer id of a transactional batch, -1 otherwise
    control: bool = False


@dataclass
class History:
    cluster: object
    topic: str
    partition: int = 0
    written: list[Written] = field(default_factory=list)
    aborted: set = field(default_factory=set)     # (pid, first offset) of aborted transactions
    open_txn: dict = field(default_factory=dict)  # pid -> [offsets]
    sequences: dict = field(default_factory=dict)
    n: int = 0

    def batch(self, count: int, *, keyed: bool = False, pid: int = -1, codec: int = 0) -> bytes:
        txn = pid >= 0
        seq = self.sequences.get(pid, 0) if txn else -1
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=txn,
                                      producer_id=pid, producer_epoch=0 if txn else -1,
                                      base_sequence=seq, batch_size=1 << 20)
        for i in range(count):
            k = (b"k%d" % ((self.n + i) % 7)) if keyed else None
            b.append(i, timestamp=TS0 + self.n + i, key=k, value=b"v%d" % (self.n + i), headers=[])
        if txn:
            self.sequences[pid] = seq + count
        return bytes(b.build())

    def produce(self, count: int, *, per_batch: int = 10, keyed: bool = False, pid: int = -1,
                codec: int = 0) -> None:
        """``count`` records in batches of ``per_batch`` (one Produce each)."""
        done = 0
        while done < count:
            k = min(per_batch, count - done)
            data = self.batch(k, keyed=keyed, pid=pid, codec=codec)
            res = self.cluster.append(self.topic, self.partition, data)
            buf = bytearray(data)
            struct.pack_into(">q", buf, 0, res.base_offset)
            struct.pack_into(">i", buf, 12, self.cluster.leader_epoch(self.topic, self.partition))
            values = [(res.base_offset + i, (b"k%d" % ((self.n + i) % 7)) if keyed else None, b"v%d" % (self.n + i))
                      for i in range(k)]
            self.written.append(Written(res.base_offset, res.last_offset, bytes(buf), values, pid))
            if pid >= 0:
                self.open_txn.setdefault(pid, []).extend(o for o, _, _ in values)
            self.n += k
            done += k

    def end_txn(self, pid: int, commit: bool) -> int:
        from kafka_tiered_source.testing.log import control_batch
        offset = self.cluster.write_txn_marker(self.topic, self.partition, pid, 0, commit)
        offsets = self.open_txn.pop(pid, [])
        if not commit and offsets:
            self.aborted.update((pid, o) for o in offsets)
        # the marker as another replica holds it (the timestamp is the control record's own)
        data = control_batch(offset, pid, 0, commit, 0, TS0,
                             self.cluster.leader_epoch(self.topic, self.partition))
        self.written.append(Written(offset, offset, data, [], pid, control=True))
        return offset

    def data_between(self, start: int, end: int) -> bytes:
        """The written batches of offsets ``[start, end]`` (batch-aligned), as one segment."""
        parts = [w for w in self.written if start <= w.base and w.last <= end]
        if not parts or parts[0].base != start or parts[-1].last != end:
            raise ValueError(f"[{start}, {end}] is not batch-aligned")
        return b"".join(w.data for w in parts)

    def expected(self, *, committed: bool, start: int = 0, end: int | None = None) -> list[tuple]:
        """(offset, key, value) a consumer sees from ``start`` to ``end`` (exclusive); under
        read_committed, nothing from the first offset of a transaction still open (the LSO)."""
        if committed and self.open_txn:
            lso = min(min(offsets) for offsets in self.open_txn.values() if offsets)
            end = lso if end is None else min(end, lso)
        out = []
        for w in self.written:
            for off, k, v in w.values:
                if off < start or (end is not None and off >= end):
                    continue
                if committed and (w.pid, off) in self.aborted:
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
