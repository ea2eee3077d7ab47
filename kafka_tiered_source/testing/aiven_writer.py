"""The write side of Aiven's tiered-storage plugin layout, for the embedded broker's tiering:
custom metadata, chunked (optionally zstd-compressed, optionally encrypted) segment objects, the
``.indexes`` object and the manifest's ``remoteLogSegmentMetadata``.  The library only reads
these (:mod:`kafka_tiered_source.storage.aiven`, :mod:`~kafka_tiered_source.storage.aiven_crypto`);
a reader and a writer share the constants and the manifest classes, which stay on the read side.

Encryption is the plugin's (docs/aiven-encryption.md): a fresh AES-256 data key and 32-byte AAD
per segment, the data key wrapped with the active key pair's RSA public key (OAEP, SHA3-512 and
MGF1-SHA3-512), each chunk (after zstd) and each index ``IV || AES-GCM ciphertext || tag``."""
from __future__ import annotations

import base64
import os
from typing import Mapping

from ..dataclass import dataclass, field
from ..protocol.primitives import write_uvarint, write_varlong
from ..options.values import INT32_MAX
from ..storage.aiven import (TAG_OBJECT_KEY, TAG_OBJECT_PREFIX, TAG_REMOTE_SIZE, ChunkIndex,
                             EncryptionMetadata, SegmentIndex, SegmentIndexes)
from ..storage.aiven_crypto import IV_SIZE, OVERHEAD, oaep_sha3_512_encrypt


# --------------------------------------------------------------------------------------------
# encryption

def generate_key_pair(path: str, bits: int = 2048) -> str:
    """Write a new RSA private key as unencrypted PKCS#8 PEM (what the plugin's
    ``encryption.key.pairs.<id>.private.key.file`` holds) to ``path``; returns ``path``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return path


@dataclass(frozen=True)
class SegmentEncryption:
    """One segment's data key and AAD, and the key pair that wraps the data key."""
    key_id: str
    data_key: bytes = field(repr=False)
    aad: bytes = field(repr=False)
    wrapped: bytes = field(repr=False)

    @classmethod
    def new(cls, key_id: str, private_key_file: str) -> "SegmentEncryption":
        """A fresh data key and AAD (AesEncryptionProvider.createDataKeyAndAAD), wrapped for
        the key pair whose private key is in ``private_key_file``."""
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
        with open(private_key_file, "rb") as fh:
            key = load_pem_private_key(fh.read(), password=None)
        if not isinstance(key, RSAPrivateKey):
            raise ValueError(f"{private_key_file} holds a {type(key).__name__}; the plugin's key pairs are RSA")
        pub = key.public_key().public_numbers()
        data_key = os.urandom(32)
        return cls(key_id, data_key, os.urandom(32), oaep_sha3_512_encrypt(pub.n, pub.e, data_key))

    @property
    def metadata(self) -> EncryptionMetadata:
        """The manifest's ``encryption``: ``{keyPairId}:{base64}`` and the AAD."""
        return EncryptionMetadata(f"{self.key_id}:{base64.b64encode(self.wrapped).decode('ascii')}", self.aad)

    def encrypt(self, chunk: bytes | memoryview) -> bytes:
        """``IV || ciphertext || tag`` (EncryptionChunkEnumeration), a fresh random IV."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        iv = os.urandom(IV_SIZE)
        return iv + AESGCM(self.data_key).encrypt(iv, bytes(chunk), self.aad)


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
            prefixed = bytearray()
            write_uvarint(prefixed, len(raw) + 1)
            prefixed += raw
            fields.append((tag, bytes(prefixed)))
    if not fields:
        return b""
    out = bytearray()
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
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


def transform_chunks(data: bytes, chunk_size: int, compression: bool,
                     encryption: SegmentEncryption | None = None) -> tuple[bytes, ChunkIndex]:
    """Cut ``data`` into chunks of ``chunk_size`` and transform each as the plugin does.

    Without compression the index is ``fixed``: the object is the data itself, or with
    ``encryption`` each chunk encrypted (28 bytes longer: IV and tag).  With compression each
    chunk becomes its own zstd frame (content size recorded), encrypted after that when asked,
    and the index is ``variable``.
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    n = len(data)
    if n > INT32_MAX:
        raise ValueError(f"Aiven's format holds segments below 2 GiB, got {n} bytes")
    mv = memoryview(data)
    if not compression:
        last = n - (-(-n // chunk_size) - 1) * chunk_size if n else 0
        if encryption is None:
            return bytes(data), ChunkIndex.fixed(chunk_size, n, chunk_size, last)
        parts = [encryption.encrypt(mv[i:i + chunk_size]) for i in range(0, n, chunk_size)]
        return b"".join(parts), ChunkIndex.fixed(chunk_size, n, chunk_size + OVERHEAD, last + OVERHEAD)
    import zstandard
    cctx = zstandard.ZstdCompressor(write_content_size=True)
    parts = [cctx.compress(mv[i:i + chunk_size]) for i in range(0, n, chunk_size)] or [cctx.compress(b"")]
    if encryption is not None:
        parts = [encryption.encrypt(p) for p in parts]
    return b"".join(parts), ChunkIndex("variable", chunk_size, n, tuple(len(p) for p in parts))


def build_indexes(offset: bytes, timestamp: bytes, producer_snapshot: bytes, leader_epoch: bytes,
                  transaction: bytes | None,
                  encryption: SegmentEncryption | None = None) -> tuple[bytes, SegmentIndexes]:
    """Concatenate the indexes in the plugin's order into the ``.indexes`` blob.

    ``leader_epoch`` is the leader-epoch checkpoint text Kafka hands the RSM; ``transaction`` is
    None when the segment has no ``.txnindex``.  With ``encryption`` each index is one
    encrypted chunk, and an empty one stays empty (RemoteStorageManager.transformIndex).
    """
    blobs = [offset, timestamp, producer_snapshot, leader_epoch]
    if transaction is not None:
        blobs.append(transaction)
    if encryption is not None:
        blobs = [encryption.encrypt(b) if len(b) else b"" for b in blobs]
    pos = 0
    entries = []
    for b in blobs:
        entries.append(SegmentIndex(pos, len(b)))
        pos += len(b)
    return b"".join(bytes(b) for b in blobs), SegmentIndexes(*entries)
