"""What Kafka does to a partition's log besides appending to it, for the tests of readers that
follow a log from a position: compaction, and truncation by an unclean leader election.

* :func:`compact` is Kafka's LogCleaner on a ``cleanup.policy=compact`` topic: over the closed
  segments (the active one is never cleaned), a record is kept only if no later record of the
  log has its key; tombstones (null values) go as well once ``delete.retention.ms`` has passed
  (``remove_tombstones``).  Offsets never change: what is removed leaves gaps.  A batch keeps
  its base offset and last offset (MemoryRecords.filterTo overrides the rebuilt batch's last
  offset with the original's) and its records keep their bytes (Kafka re-encodes them against a
  new base timestamp and max timestamp: the same offsets and timestamps); a batch left empty goes
  (no producer state to keep: the records of ``__remote_log_metadata``'s producer carry no
  producer id).
* :func:`truncate` is what an unclean leader election does: a replica that was not in sync
  becomes leader, every other replica truncates its log to the new leader's log end offset
  (UnifiedLog.truncateTo; the leader-epoch cache by LeaderEpochFileCache.truncateFromEnd) and a
  new leader epoch starts there (Partition.makeLeader).  Records past that offset are gone, and
  the next ones written get their offsets again.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import crc32c

from ..protocol.primitives import read_varint, read_varlong
from ..records.header import ATTRIBUTES_OFFSET, CODEC_MASK, CONTROL_MASK, HEADER_SIZE, iter_headers
from ..storage.indexes import TXN_ENTRY
from .batches import StorageError
from .log import PartitionLog

if TYPE_CHECKING:
    from .partition import Partition


def _records(data: bytes, pos: int, end: int, count: int) -> list[tuple[int, bytes | None, bool, bytes]]:
    """The records of one uncompressed batch: (offset delta, key, is tombstone, raw bytes)."""
    out = []
    for _ in range(count):
        length, body = read_varint(data, pos)
        rec_end = body + length
        p = body + 1                                  # attributes
        _, p = read_varlong(data, p)                  # timestamp delta
        delta, p = read_varint(data, p)
        klen, p = read_varint(data, p)
        key = None if klen < 0 else bytes(data[p:p + klen])
        p += max(klen, 0)
        vlen, p = read_varint(data, p)
        out.append((delta, key, vlen < 0, bytes(data[pos:rec_end])))
        pos = rec_end
    if pos != end:
        raise ValueError("record bytes do not fill the batch")
    return out


def compact(log: PartitionLog, *, remove_tombstones: bool = True) -> int:
    """Clean the closed segments of ``log``; returns the number of records removed."""
    closed = log.segments[:-1]
    files = {}
    latest: dict[bytes, int] = {}
    for seg in closed:
        with open(seg.path, "rb") as f:
            data = files[seg.base_offset] = f.read()
        for h in iter_headers(data):
            if h.attributes & CONTROL_MASK:
                continue
            if h.attributes & CODEC_MASK:
                raise StorageError("INVALID_RECORD", f"the embedded cleaner reads uncompressed batches only "
                                   f"(batch at offset {h.base_offset})", topic=log.topic, partition=log.partition)
            for delta, key, _, _ in _records(data, h.position + HEADER_SIZE, h.end, h.record_count):
                if key is not None:
                    latest[key] = h.base_offset + delta
    removed = 0
    for seg in closed:
        data = files[seg.base_offset]
        out = bytearray()
        for h in iter_headers(data):
            if h.attributes & CONTROL_MASK:
                out += data[h.position:h.end]
                continue
            records = _records(data, h.position + HEADER_SIZE, h.end, h.record_count)
            kept = [raw for delta, key, tomb, raw in records
                    if key is None or (latest[key] == h.base_offset + delta and not (tomb and remove_tombstones))]
            removed += len(records) - len(kept)
            if not kept:
                continue
            if len(kept) == len(records):
                out += data[h.position:h.end]
                continue
            batch = bytearray(data[h.position:h.position + HEADER_SIZE]) + b"".join(kept)
            struct.pack_into(">i", batch, 8, len(batch) - 12)
            struct.pack_into(">i", batch, 57, len(kept))
            struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
            out += batch
        if bytes(out) != data:
            with open(seg.path, "wb") as f:
                f.write(out)
    log.load(log.local_start_offset)    # indexes rebuilt from the files
    return removed


def truncate(part: "Partition", offset: int) -> int:
    """An unclean leader election: every replica's log ends at ``offset`` (a batch boundary at
    or below the log end offset, not below the log start offset); returns the new leader epoch."""
    if not part.log_start_offset <= offset <= part.log.log_end_offset:
        raise StorageError("OFFSET_OUT_OF_RANGE", f"cannot truncate to {offset}: the log holds "
                           f"[{part.log_start_offset}, {part.log.log_end_offset})",
                           topic=part.topic.name, partition=part.partition)
    for log in part.replicas:
        _truncate_log(log, offset)
    return part.move_leader(part.leader)


def _truncate_log(log: PartitionLog, offset: int) -> None:
    kept = [s for s in log.segments if s.base_offset < offset]
    for seg in log.segments[len(kept):]:
        seg.delete()
    if kept:
        last = kept[-1]
        with open(last.path, "rb") as f:
            data = f.read()
        heads = list(iter_headers(data))
        cut = next((h.position for h in heads if h.base_offset >= offset), len(data))
        inside = [h for h in heads if h.base_offset < offset <= h.last_offset]
        if inside:
            raise StorageError("OFFSET_OUT_OF_RANGE", f"offset {offset} is inside the batch at offsets "
                               f"[{inside[0].base_offset}, {inside[0].last_offset}]: a log is truncated at "
                               f"batch boundaries", topic=log.topic, partition=log.partition)
        with open(last.path, "r+b") as f:
            f.truncate(cut)
        entries = [e for e in last.txn_entries if e.last_offset < offset]
        with open(last.file(".txnindex"), "wb") as f:
            f.write(b"".join(TXN_ENTRY.pack(0, *e) for e in entries))
    log.epochs.truncate_from_end(offset)
    log.load(kept[0].base_offset if kept else offset)    # indexes and producer state rebuilt


__all__ = ["compact", "truncate"]
