"""The v2 RecordBatch header (magic 2), shared by the decoder, the dump CLI and the broker.

Layout (big-endian), see docs/DESIGN.md and Kafka's DefaultRecordBatch::

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 (CRC-32C of [21, end)) | 21 attributes int16 | 23 lastOffsetDelta int32
    27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64
    51 producerEpoch int16 | 53 baseSequence int32 | 57 recordCount int32 | 61 records
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

HEADER_SIZE = 61
LOG_OVERHEAD = 12          # baseOffset + batchLength: batchLength counts the bytes after these
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21     # the CRC covers [ATTRIBUTES_OFFSET, end of batch)

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = range(5)
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

NO_PRODUCER_ID = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")


class BatchHeader(NamedTuple):
    position: int              # where the batch starts in the buffer it was read from
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the fixed header at ``pos``; the caller has checked that 61 bytes are there."""
    return BatchHeader(pos, *_HEADER.unpack_from(buf, pos))


def iter_headers(buf, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
    """Yield the header of every complete batch in ``buf[start:end]``, in order.

    Stops quietly at a batch that does not fit in the buffer (a range cut from a segment may end
    inside a batch).  Does not check CRCs or magic: this is for walking a log whose batches were
    validated when they were written (index building, tiering, offset look-ups).  Raises
    ``ValueError`` on a batch length that cannot be right (< header size), since walking on would
    mean reading garbage.
    """
    if end is None:
        end = len(buf)
    pos = start
    while pos + LOG_OVERHEAD <= end:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        if length + LOG_OVERHEAD < HEADER_SIZE:
            raise ValueError(f"invalid batch length {length} at byte position {pos}")
        if pos + LOG_OVERHEAD + length > end:
            return
        yield read_header(buf, pos)
        pos += LOG_OVERHEAD + length
