"""Kafka's LogCleaner on a partition's log (``cleanup.policy=compact``), for the tests of readers
that meet what compaction leaves: gaps inside and between batches, empty batches, empty
segments, copies in remote storage whose tail holds no record (KAFKA-15388's shape: a topic
compacted, then switched to ``delete`` and tiered).

Offsets never change: what is removed leaves gaps.  A rebuilt batch keeps its base offset and
last offset (MemoryRecords.filterTo overrides the rebuilt batch's last offset with the
original's) and its records keep their bytes (Kafka re-encodes them against the same base
timestamp: the same offsets and timestamps).  Kafka's delete horizon (KIP-534: a tombstone
survives the first round after delete.retention.ms starts) is the caller's ``remove_tombstones``.
"""
from __future__ import annotations

import gzip
import struct

import crc32c

from ..protocol.primitives import read_varint, read_varlong
from ..records.codecs import decompress
from ..records.header import (ATTRIBUTES_OFFSET, CODEC_GZIP, CODEC_LZ4, CODEC_MASK, CODEC_SNAPPY, CONTROL_MASK,
                              DELETE_HORIZON_MASK, HEADER_SIZE, TRANSACTIONAL_MASK, iter_headers)
from ..storage.indexes import TXN_ENTRY
from .log import PartitionLog


def _records(data: bytes, count: int) -> list[tuple[int, bytes | None, bool, bytes]]:
    """The records of a batch's (uncompressed) record bytes: (offset delta, key, is tombstone,
    raw bytes)."""
    out = []
    pos = 0
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
    if pos != len(data):
        raise ValueError("record bytes do not fill the batch")
    return out


def _compress(codec: int, data: bytes) -> bytes:
    """The retained records compressed again with the batch's own codec, as MemoryRecords.filterTo
    writes them (snappy as one raw block, which readers take as Kafka's unframed snappy)."""
    if codec == CODEC_GZIP:
        return gzip.compress(data)
    if codec == CODEC_SNAPPY:
        import cramjam
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == CODEC_LZ4:
        import lz4.frame
        return lz4.frame.compress(data)
    import zstandard
    return zstandard.ZstdCompressor().compress(data)


def _batch(head: bytes, body: bytes, count: int) -> bytes:
    """A batch with ``head``'s header fields, ``body`` as its records and ``count`` of them."""
    batch = bytearray(head[:HEADER_SIZE]) + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, count)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def _empty_batch(data: bytes, h) -> bytes:
    """DefaultRecordBatch.writeEmptyHeader, as filterTo writes a batch it retains empty: the
    batch's offsets, epoch, producer fields, transactional and control flags and timestamp type,
    no compression, both timestamps the batch's max timestamp, no record."""
    head = bytearray(data[h.position:h.position + HEADER_SIZE])
    struct.pack_into(">h", head, ATTRIBUTES_OFFSET, h.attributes & ~CODEC_MASK & ~DELETE_HORIZON_MASK)
    struct.pack_into(">q", head, 27, h.max_timestamp)
    return _batch(bytes(head), b"", 0)


def _aborted_ranges(log: PartitionLog) -> dict[int, list[tuple[int, int]]]:
    """Producer id -> [first offset, marker offset] of each aborted transaction of the log (its
    segments' transaction indexes), as CleanedTransactionMetadata learns them."""
    out: dict[int, list[tuple[int, int]]] = {}
    for seg in log.segments:
        for e in seg.txn_entries:
            out.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))
    return out


def _last_data_offsets(log: PartitionLog) -> dict[int, int]:
    """Producer id -> last offset of its last data batch in the log (ProducerStateManager's
    lastDataOffset: the batch LogCleaner keeps, emptied if need be, for the producer's state)."""
    out: dict[int, int] = {}
    for seg in log.segments:
        for h in seg.headers_from(0):
            if h.producer_id >= 0 and not h.attributes & CONTROL_MASK:
                out[h.producer_id] = h.last_offset
    return out


def compact(log: PartitionLog, *, remove_tombstones: bool = True, tiered_end: int = -1) -> int:
    """One LogCleaner round over ``log`` (Cleaner.doClean); returns the number of records removed.

    * What is cleaned: the closed segments wholly below the first uncleanable offset, the lower
      of the last stable offset and the active segment's base (LogCleanerManager.cleanableOffsets:
      never past the LSO; a segment the LSO falls inside waits for a later round).  On a tiered
      partition the segments holding offsets up to ``tiered_end`` (the highest tiered offset) are
      left alone: their copies in remote storage do not change, and a reader may be served
      either (Kafka refuses compaction on tiered topics; the embedded broker allows it so tests
      can clean between tiering steps).
    * A record stays if it has a key, no later record of the cleaned segments has that key, it
      is not in an aborted transaction (CleanedTransactionMetadata), and it is not a tombstone
      whose delete.retention.ms passed (``remove_tombstones``; Kafka's delete horizon).  Keyless
      records go (Cleaner.shouldRetainRecord counts them invalid).  Control batches stay.
    * A batch left without records goes, except (Cleaner.cleanInto's batch retention) the last
      data batch of a producer (its sequence state) and the last batch of the round (its last
      offset is the round's end): those stay as empty batches (writeEmptyHeader).  A rebuilt
      batch keeps its offsets, epoch, producer fields and timestamps.
    * Segments are cleaned in groups that fit ``segment.bytes`` (Cleaner.groupSegmentsBySize),
      each group into one segment with the group's first base offset; a cleaned segment left
      empty stays (Cleaner.cleanSegments swaps it in all the same).
    """
    segs = log.segments
    upper = min(log.last_stable_offset, log.active.base_offset)
    cleanable = [seg for seg, nxt in zip(segs, segs[1:], strict=False)
                 if nxt.base_offset <= upper and seg.base_offset > tiered_end]
    if not cleanable:
        return 0
    aborted = _aborted_ranges(log)
    last_data = _last_data_offsets(log)

    def is_aborted(h) -> bool:
        return h.producer_id >= 0 and bool(h.attributes & TRANSACTIONAL_MASK) and any(
            first <= h.base_offset <= marker for first, marker in aborted.get(h.producer_id, ()))

    files: dict[int, bytes] = {}
    latest: dict[bytes, int] = {}
    batches: dict[int, list] = {}
    for seg in cleanable:
        with open(seg.path, "rb") as src:
            data = files[seg.base_offset] = src.read()
        walked: list = []
        batches[seg.base_offset] = walked
        for h in iter_headers(data):
            records = None
            if not h.attributes & CONTROL_MASK and not is_aborted(h):
                body = data[h.position + HEADER_SIZE:h.end]
                codec = h.attributes & CODEC_MASK
                if codec:
                    body = decompress(codec, body, 1 << 30, position=h.position, base_offset=h.base_offset)
                records = _records(body, h.record_count)
                for delta, key, _, _ in records:
                    if key is not None:
                        latest[key] = h.base_offset + delta
            walked.append((h, records))
    removed = 0
    cleaned: dict[int, bytes] = {}
    for seg in cleanable:
        data, out = files[seg.base_offset], bytearray()
        for h, records in batches[seg.base_offset]:
            if h.attributes & CONTROL_MASK:
                out += data[h.position:h.end]
                continue
            kept = [] if records is None else [
                raw for delta, key, tomb, raw in records
                if key is not None and latest[key] == h.base_offset + delta and not (tomb and remove_tombstones)]
            removed += h.record_count - len(kept)
            if len(kept) == h.record_count:
                out += data[h.position:h.end]
            elif kept:
                codec = h.attributes & CODEC_MASK
                body = b"".join(kept)
                out += _batch(data[h.position:h.end], _compress(codec, body) if codec else body, len(kept))
            elif (h.producer_id >= 0 and last_data.get(h.producer_id) == h.last_offset) \
                    or h.last_offset + 1 == upper:
                out += _empty_batch(data, h)
        cleaned[seg.base_offset] = bytes(out)
    for group in _groups(cleanable, log.segment_bytes):
        first = group[0]
        body = b"".join(cleaned[s.base_offset] for s in group)
        if len(group) > 1 or body != files[first.base_offset]:
            entries = [e for s in group for e in s.txn_entries]
            with open(first.path, "wb") as f:
                f.write(body)
            with open(first.file(".txnindex"), "wb") as f:
                f.write(b"".join(TXN_ENTRY.pack(0, *e) for e in entries))
            for s in group[1:]:
                s.delete()
    log.load(log.local_start_offset)    # indexes and producer state rebuilt from the files
    return removed


def _groups(segs: list, max_size: int) -> list[list]:
    """Cleaner.groupSegmentsBySize: runs of consecutive segments whose sizes add up to at most
    ``max_size`` (each group becomes one cleaned segment)."""
    out: list[list] = []
    for seg in segs:
        if out and sum(s.size for s in out[-1]) + seg.size <= max_size:
            out[-1].append(seg)
        else:
            out.append([seg])
    return out


__all__ = ["compact"]
