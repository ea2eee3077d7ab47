"""Kafka's per-segment index files, as bytes: the offset index, the time index, the transaction
index and the producer state snapshot.

One parser per file, used by every reader of them: the online and offline planners (indexes
fetched from remote storage), and the embedded broker (its own log and the tiered copies).
Writing them is the broker's business and stays in :mod:`kafka_tiered_source.testing`.

Kafka's formats (``OffsetIndex``, ``TimeIndex``, ``TransactionIndex``, ``ProducerStateManager``):

* ``.index``: 8-byte entries, relative offset int32 + byte position int32, both increasing.
* ``.timeindex``: 12-byte entries, timestamp int64 + relative offset int32.
* ``.txnindex``: 34-byte entries, version int16 (0), producer id, first offset, last offset (the
  ABORT marker) and the last stable offset after it, all int64.
* producer snapshot (version 1): version int16, CRC-32C uint32 of everything after it, an
  int32-counted array of 42-byte entries.

Kafka preallocates ``.index`` and ``.timeindex`` files and trims them when a segment rolls; a
file that was copied untrimmed ends in zero entries.  An entry of all zeros can only be the
first one (relative offset 0 at position 0), so the parsers stop at the first all-zero entry
after it.
"""
from __future__ import annotations

import bisect
import struct
from typing import NamedTuple

from ..errors import SegmentFormatError

OFFSET_ENTRY = struct.Struct(">ii")     # relative offset, position
TIME_ENTRY = struct.Struct(">qi")       # timestamp, relative offset
TXN_ENTRY = struct.Struct(">hqqqq")     # version, producerId, firstOffset, lastOffset, lastStableOffset
SNAPSHOT_HEAD = struct.Struct(">hIi")   # version, crc, entry count
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")   # producerId, epoch, lastSequence, lastOffset,
#                                               offsetDelta, timestamp, coordinatorEpoch,
#                                               currentTxnFirstOffset (-1: none)


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` entry: an aborted transaction, stored with its ABORT marker."""
    producer_id: int
    first_offset: int
    last_offset: int           # the ABORT marker's offset
    last_stable_offset: int    # the partition's LSO right after the marker


def _entries(raw, entry: struct.Struct) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for e in entry.iter_unpack(memoryview(raw)[:len(raw) - len(raw) % entry.size]):
        if out and not e[0] and not e[1]:   # the preallocated, unused tail
            break
        out.append(e)
    return out


def parse_offset_index(raw) -> list[tuple[int, int]]:
    """``(relative offset, byte position)`` per entry, in file order."""
    return _entries(raw, OFFSET_ENTRY)


def parse_time_index(raw) -> list[tuple[int, int]]:
    """``(timestamp, relative offset)`` per entry, in file order."""
    return _entries(raw, TIME_ENTRY)


def parse_txn_index(raw, *, location: str | None = None) -> list[AbortedTxn]:
    """Every entry; a size that is not a whole number of entries or an unknown entry version is
    a :class:`SegmentFormatError` naming ``location`` and the byte position."""
    if len(raw) % TXN_ENTRY.size:
        raise SegmentFormatError(f"transaction index of {len(raw)} bytes is not a whole number of "
                                 f"{TXN_ENTRY.size}-byte entries", location=location)
    out = []
    for pos in range(0, len(raw), TXN_ENTRY.size):
        version, pid, first, last, lso = TXN_ENTRY.unpack_from(raw, pos)
        if version != 0:
            raise SegmentFormatError(f"transaction index entry at byte position {pos} has version "
                                     f"{version}, expected 0", location=location)
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def parse_producer_snapshot(raw, *, location: str | None = None) -> list[tuple[int, int]]:
    """``(producer id, current transaction's first offset or -1)`` per snapshot entry."""
    import crc32c   # the crc32c package (a dependency): no native build needed on the driver
    if len(raw) < SNAPSHOT_HEAD.size:
        raise SegmentFormatError(f"producer snapshot of {len(raw)} bytes is shorter than its "
                                 f"{SNAPSHOT_HEAD.size}-byte header", location=location)
    version, crc, count = SNAPSHOT_HEAD.unpack_from(raw, 0)
    if version != 1:
        raise SegmentFormatError(f"producer snapshot version {version}, expected 1", location=location)
    if crc32c.crc32c(memoryview(raw)[6:]) != crc:
        raise SegmentFormatError("producer snapshot CRC-32C mismatch (bytes [6, end))", location=location)
    if count < 0 or SNAPSHOT_HEAD.size + count * SNAPSHOT_ENTRY.size != len(raw):
        raise SegmentFormatError(f"producer snapshot claims {count} entries in {len(raw)} bytes",
                                 location=location)
    return [(e[0], e[7]) for e in SNAPSHOT_ENTRY.iter_unpack(memoryview(raw)[SNAPSHOT_HEAD.size:])]


def lookup_position(index: list[tuple[int, int]], base_offset: int, target: int) -> int:
    """Position of the largest offset-index entry whose offset is <= ``target``, else 0: where
    a read of ``target`` starts (Kafka's ``OffsetIndex.lookup``)."""
    i = bisect.bisect_right(index, (target - base_offset, 1 << 31)) - 1
    return index[i][1] if i >= 0 else 0


def lookup_time(time_index: list[tuple[int, int]], base_offset: int, ts: int) -> int:
    """Offset of the largest time-index entry with timestamp <= ``ts``, else the base offset:
    where a search for the first record at or after ``ts`` starts (``TimeIndex.lookup``)."""
    i = bisect.bisect_right(time_index, (ts, 1 << 31)) - 1
    return base_offset + time_index[i][1] if i >= 0 else base_offset
