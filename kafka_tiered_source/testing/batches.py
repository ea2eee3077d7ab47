"""Record batches as the embedded broker checks and writes them: a Produce request's batches
validated (whole v2 batches, CRC-32C), END_TXN control batches as WriteTxnMarkers makes the
leader write them, and the type of a replicated control batch."""
from __future__ import annotations

import struct

import crc32c

from ..protocol.primitives import read_varint, write_varlong
from ..records.header import (ATTRIBUTES_OFFSET, CONTROL_MASK, HEADER_SIZE, LOG_OVERHEAD, TRANSACTIONAL_MASK,
                              BatchHeader, read_header)
from ..errors import KafkaTieredError
from ..protocol.errors import code_of


class StorageError(KafkaTieredError):
    """A request the log refuses; ``error_name``/``error_code`` are what the broker answers."""

    def __init__(self, error_name: str, message: str, *, topic: str | None = None,
                 partition: int | None = None):
        self.error_name = error_name
        self.error_code = code_of(error_name)     # the protocol layer's single error table
        self.topic = topic
        self.partition = partition
        where = f" (topic {topic} partition {partition})" if topic is not None else ""
        super().__init__(f"{error_name}: {message}{where}")




def validate_batches(buf: bytes, *, topic=None, partition=None) -> list[BatchHeader]:
    """Check that ``buf`` is whole v2 batches with valid CRCs; CORRUPT_MESSAGE otherwise."""
    headers = []
    pos, end = 0, len(buf)
    if end == 0:
        raise StorageError("CORRUPT_MESSAGE", "empty record set", topic=topic, partition=partition)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise StorageError("CORRUPT_MESSAGE", f"truncated batch header at byte position {pos}",
                               topic=topic, partition=partition)
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        if length + LOG_OVERHEAD < HEADER_SIZE or pos + LOG_OVERHEAD + length > end:
            raise StorageError("CORRUPT_MESSAGE", f"invalid batch length {length} at byte position {pos}",
                               topic=topic, partition=partition)
        magic = buf[pos + 16]
        if magic != 2:
            raise StorageError("UNSUPPORTED_FOR_MESSAGE_FORMAT",
                               f"record batch magic {magic} at byte position {pos} (only v2 is accepted)",
                               topic=topic, partition=partition)
        h = read_header(buf, pos)
        crc = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + length])
        if crc != h.crc:
            raise StorageError("CORRUPT_MESSAGE",
                               f"CRC32C mismatch at byte position {pos}: stored {h.crc:#010x}, computed {crc:#010x}",
                               topic=topic, partition=partition)
        headers.append(h)
        pos += LOG_OVERHEAD + length
    return headers


def _zigzag(n: int) -> bytes:
    out = bytearray()
    write_varlong(out, n)
    return bytes(out)


def control_batch(offset: int, producer_id: int, producer_epoch: int, commit: bool,
                  coordinator_epoch: int, timestamp_ms: int, leader_epoch: int = 0) -> bytes:
    """An END_TXN control batch as the coordinator's WriteTxnMarkers makes the leader write."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = (b"\x00" + _zigzag(0) + _zigzag(0) + _zigzag(len(key)) + key
            + _zigzag(len(value)) + value + _zigzag(0))
    record = _zigzag(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", TRANSACTIONAL_MASK | CONTROL_MASK, 0, timestamp_ms,
                            timestamp_ms, producer_id, producer_epoch, -1, 1) + record
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", offset, length, leader_epoch, 2, crc) + after_crc


def control_type(batch: bytes, h: BatchHeader) -> int:
    """The type of a control batch's record (0 ABORT, 1 COMMIT): its key is version int16 then
    type int16, after the record's length, attributes, timestamp and offset deltas and key length
    (varints).  Control batches are never compressed."""
    pos = h.position + HEADER_SIZE
    for _ in range(5):          # length, attributes (one byte, read as a varint: < 64), deltas, key length
        _, pos = read_varint(batch, pos)
    return struct.unpack_from(">h", batch, pos + 2)[0]


