"""The write side of Aiven's tiered-storage plugin layout, for the embedded broker's tiering:
custom metadata, chunked (optionally zstd-compressed) segment objects, the ``.indexes`` object
and the manifest's ``remoteLogSegmentMetadata``.  The library only reads these
(:mod:`kafka_tiered_source.storage.aiven`); a reader and a writer share the constants and the
manifest classes, which stay on the read side."""
from __future__ import annotations

from typing import Mapping

from ..protocol.primitives import write_uvarint, write_varlong
from ..storage.aiven import (_INT32_MAX, TAG_OBJECT_KEY, TAG_OBJECT_PREFIX, TAG_REMOTE_SIZE, ChunkIndex,
                             SegmentIndex, SegmentIndexes)


def encode_custom_metadata(*, remote_size: int | None = None, object_prefix: str | None = None,
                           object_key: str | None = None) -> bytes:
    """Encode the fields that are not None; no field at all gives ``b""`` (as the plugin does)."""
    fields: list[tuple[int, bytes]] = []
    if remote_size is not None:
        if not -(2**63) <= remote_size < 2**63:
            raise ValueError(f"remote_size out of int64 range: {remote_size}")
        body = bytearray()
        write_varlong(body, remote_size)
        fields.append((TAG_REMOTE_SIZE, bytes(body)))
    for tag, text in ((TAG_OBJECT_PREFIX, object_prefix), (TAG_OBJECT_KEY, object_key)):
        if text is not None:
            raw = text.encode("utf-8")
            body = bytearray()
            write_uvarint(body, len(raw) + 1)
            body += raw
            fields.append((tag, bytes(body)))
    if not fields:
        return b""
    out = bytearray()
    write_uvarint(out, len(fields))
    for tag, body in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(body))
        out += body
    return bytes(out)


def remote_log_segment_metadata_json(*, topic: str, topic_id: str, partition: int, segment_id: str,
                                     start_offset: int, end_offset: int, max_timestamp_ms: int,
                                     broker_id: int, event_timestamp_ms: int,
                                     segment_leader_epochs: Mapping[int, int]) -> dict:
    """The informational ``remoteLogSegmentMetadata`` block the plugin adds to its manifests."""
    return {
        "remoteLogSegmentId": {"topicIdPartition": {"topicId": topic_id,
                                                    "topicPartition": {"topic": topic, "partition": partition}},
                               "id": segment_id},
        "startOffset": start_offset, "endOffset": end_offset, "maxTimestampMs": max_timestamp_ms,
        "brokerId": broker_id, "eventTimestampMs": event_timestamp_ms,
        "segmentLeaderEpochs": {str(k): v for k, v in segment_leader_epochs.items()},
    }


def transform_chunks(data: bytes, chunk_size: int, compression: bool) -> tuple[bytes, ChunkIndex]:
    """Cut ``data`` into chunks of ``chunk_size`` and transform each as the plugin does.

    Without compression the object is the data itself and the index is ``fixed``; with it each
    chunk becomes its own zstd frame (content size recorded) and the index is ``variable``.
    Encryption is not written by this project.
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    n = len(data)
    if n > _INT32_MAX:
        raise ValueError(f"Aiven's format holds segments below 2 GiB, got {n} bytes")
    if not compression:
        last = n - (-(-n // chunk_size) - 1) * chunk_size if n else 0
        return bytes(data), ChunkIndex.fixed(chunk_size, n, chunk_size, last)
    import zstandard
    cctx = zstandard.ZstdCompressor(write_content_size=True)
    mv = memoryview(data)
    parts = [cctx.compress(mv[i:i + chunk_size]) for i in range(0, n, chunk_size)] or [cctx.compress(b"")]
    return b"".join(parts), ChunkIndex("variable", chunk_size, n, tuple(len(p) for p in parts))


def build_indexes(offset: bytes, timestamp: bytes, producer_snapshot: bytes, leader_epoch: bytes,
                  transaction: bytes | None) -> tuple[bytes, SegmentIndexes]:
    """Concatenate the indexes in the plugin's order into the ``.indexes`` blob.

    ``leader_epoch`` is the leader-epoch checkpoint text Kafka hands the RSM; ``transaction`` is
    None when the segment has no ``.txnindex``.
    """
    blobs = [offset, timestamp, producer_snapshot, leader_epoch]
    if transaction is not None:
        blobs.append(transaction)
    pos = 0
    entries = []
    for b in blobs:
        entries.append(SegmentIndex(pos, len(b)))
        pos += len(b)
    if transaction is None:
        entries.append(None)
    return b"".join(bytes(b) for b in blobs), SegmentIndexes(*entries)
