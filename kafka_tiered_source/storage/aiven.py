"""The object layout of Aiven's tiered-storage plugin (tiered-storage-for-apache-kafka), read side
(the embedded broker writes it with :mod:`kafka_tiered_source.testing.aiven_writer`).

Checked against the plugin's source (``ObjectKeyFactory``, ``SegmentManifestV1``,
``FixedSizeChunkIndex``/``VariableSizeChunkIndex``, ``ChunkSizesBinaryCodec``,
``TransformedChunksSerializer``, ``SegmentIndexesV1Builder``, ``SegmentCustomMetadataField``).

Per segment the plugin writes three objects under one key stem::

    {prefix}{topic}-{topicId}/{partition}/{%020d startOffset}-{segmentId}.log           the data
    {prefix}{topic}-{topicId}/{partition}/{%020d startOffset}-{segmentId}.indexes       all indexes, concatenated
    {prefix}{topic}-{topicId}/{partition}/{%020d startOffset}-{segmentId}.rsm-manifest  JSON, see SegmentManifest

The ``.log`` object is the segment cut into chunks of ``originalChunkSize`` bytes, each chunk
transformed on its own (zstd-compressed, then AES-GCM encrypted, when enabled).  The manifest's
chunk index tells where each transformed chunk lives, so a byte range of the original segment
maps to a byte range of the object.  With neither transform the object *is* the segment.

Custom metadata (optional, returned to the broker by ``copyLogSegmentData``) is a Kafka
tagged-fields block: tag 0 REMOTE_SIZE (varlong, total bytes of the three objects), tag 1
OBJECT_PREFIX (compact string), tag 2 OBJECT_KEY (compact string: the key stem *without* prefix
and suffix).  When present they win over the reader's configured prefix.
"""
from __future__ import annotations

import base64
import json
import struct
from bisect import bisect_right
from typing import Mapping

from ..dataclass import dataclass, field
from ..errors import SegmentFormatError
from ..options.values import INT32_MAX
from .aiven_keys import (SUFFIX_INDEXES, SUFFIX_LOG, SUFFIX_MANIFEST, SUFFIXES, TAG_OBJECT_KEY,
                         TAG_OBJECT_PREFIX, TAG_REMOTE_SIZE, decode_custom_metadata, main_path, object_key,
                         segment_object_key)

# The keys and custom metadata are aiven_keys'; re-exported: they are this layout's interface.
__all__ = ["SUFFIX_INDEXES", "SUFFIX_LOG", "SUFFIX_MANIFEST", "SUFFIXES", "TAG_OBJECT_KEY", "TAG_OBJECT_PREFIX",
           "TAG_REMOTE_SIZE", "Chunk", "ChunkIndex", "EncryptionMetadata", "INDEX_NAMES", "ManifestInfo",
           "SegmentIndex", "SegmentIndexes", "SegmentManifest", "decode_custom_metadata", "decompress_chunk",
           "main_path", "object_key", "require_readable", "segment_object_key"]

# Order in which the plugin concatenates indexes into the .indexes object.
INDEX_NAMES = ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction")

# TransformedChunksDeserializer refuses a binary chunk-size table larger than this.
MAX_CHUNK_TABLE_SIZE = 10 * 1024 * 1024
# A chunk index is held in memory as one size per chunk, so a manifest claiming billions of
# chunks (originalChunkSize 1, originalFileSize 2^31-1) must be refused before it is built.
# 2^20 chunks covers a 2 GiB segment (Kafka's int32 limit) with 2 KiB chunks; the plugin's
# default is 4 MiB.
MAX_CHUNK_COUNT = 1 << 20


# --------------------------------------------------------------------------------------------
# chunk index

def _encode_chunk_sizes(values: list[int]) -> bytes:
    """ChunkSizesBinaryCodec.encode: count, base, bytes-per-value, de-based values, last in full."""
    count = len(values)
    if count == 0:
        return struct.pack(">i", 0)
    last = values[-1]
    if any(v < 0 for v in values):
        raise ValueError("chunk sizes cannot be negative")
    if count == 1:
        return struct.pack(">ii", 1, last)
    base = min(values[:-1])
    width = max(_bytes_needed(v - base) for v in values[:-1])
    out = bytearray(struct.pack(">iib", count, base, width))
    for v in values[:-1]:
        out += (v - base).to_bytes(4, "big")[4 - width:]
    out += struct.pack(">i", last)
    return bytes(out)


def _bytes_needed(v: int) -> int:
    return 1 if v <= 0xFF else 2 if v <= 0xFFFF else 3 if v <= 0xFFFFFF else 4


def _decode_chunk_sizes(data: bytes, where: str | None) -> list[int]:
    def need(n, pos, what):
        if pos + n > len(data):
            raise SegmentFormatError(
                f"manifest transformedChunks: truncated reading {what} at byte position {pos} "
                f"of the decompressed table", location=where)
    need(4, 0, "count")
    (count,) = struct.unpack_from(">i", data, 0)
    if count < 0:
        raise SegmentFormatError(f"manifest transformedChunks: negative count {count}", location=where)
    if count == 0:
        return []
    if count == 1:
        need(4, 4, "value")
        return [struct.unpack_from(">i", data, 4)[0]]
    need(9, 0, "header")
    base, width = struct.unpack_from(">ib", data, 4)
    if not 1 <= width <= 4:
        raise SegmentFormatError(
            f"manifest transformedChunks: bytes per value {width} at byte position 8 is not 1-4",
            location=where)
    pos = 9
    need((count - 1) * width + 4, pos, f"{count} values")
    values = []
    for _ in range(count - 1):
        values.append(int.from_bytes(data[pos:pos + width], "big") + base)
        pos += width
    values.append(struct.unpack_from(">i", data, pos)[0])
    return values


@dataclass(frozen=True)
class Chunk:
    """One chunk: where it is in the original segment and in the transformed ``.log`` object."""
    id: int
    original_position: int
    original_size: int
    transformed_position: int
    transformed_size: int


@dataclass(frozen=True)
class ChunkIndex:
    """Aiven's chunk index.  ``kind`` is ``"fixed"`` (every transformed chunk the same size except
    the last: no transform, or encryption only) or ``"variable"`` (compression)."""
    kind: str
    original_chunk_size: int
    original_file_size: int
    transformed_sizes: tuple[int, ...]
    # "fixed" only: the size every transformed chunk but the last has (JSON transformedChunkSize).
    fixed_transformed_chunk_size: int | None = None
    _positions: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.kind not in ("fixed", "variable"):
            raise ValueError(f"chunk index kind must be 'fixed' or 'variable', got {self.kind!r}")
        if self.kind == "fixed" and self.fixed_transformed_chunk_size is None:
            sizes = self.transformed_sizes
            object.__setattr__(self, "fixed_transformed_chunk_size",
                               sizes[0] if len(sizes) > 1 else self.original_chunk_size)
        pos = [0]
        for s in self.transformed_sizes:
            pos.append(pos[-1] + s)
        object.__setattr__(self, "_positions", tuple(pos))

    @classmethod
    def fixed(cls, original_chunk_size: int, original_file_size: int, transformed_chunk_size: int,
              final_transformed_chunk_size: int) -> "ChunkIndex":
        n = -(-original_file_size // original_chunk_size)
        sizes = [transformed_chunk_size] * n
        if n:
            sizes[-1] = final_transformed_chunk_size
        return cls("fixed", original_chunk_size, original_file_size, tuple(sizes),
                   transformed_chunk_size)

    @property
    def chunk_count(self) -> int:
        return len(self.transformed_sizes)

    @property
    def transformed_file_size(self) -> int:
        return self._positions[-1]

    def chunk(self, i: int) -> Chunk:
        ocs = self.original_chunk_size
        last = i == self.chunk_count - 1
        osize = self.original_file_size - i * ocs if last else ocs
        return Chunk(i, i * ocs, osize, self._positions[i], self.transformed_sizes[i])

    def chunks_for_range(self, start: int, end: int) -> list[Chunk]:
        """Chunks covering original bytes [start, end) (clipped at the file's end)."""
        end = min(end, self.original_file_size)
        if start >= end:
            return []
        first = start // self.original_chunk_size
        last = (end - 1) // self.original_chunk_size
        return [self.chunk(i) for i in range(first, min(last, self.chunk_count - 1) + 1)]

    def chunk_for_transformed_position(self, position: int) -> int:
        return bisect_right(self._positions, position) - 1

    def to_dict(self) -> dict:
        d = {"type": self.kind, "originalChunkSize": self.original_chunk_size,
             "originalFileSize": self.original_file_size}
        if self.kind == "fixed":
            d["transformedChunkSize"] = self.fixed_transformed_chunk_size
            d["finalTransformedChunkSize"] = self.transformed_sizes[-1] if self.transformed_sizes else 0
        else:
            table = _encode_chunk_sizes(list(self.transformed_sizes))
            import zstandard
            comp = zstandard.ZstdCompressor(write_content_size=True).compress(table)
            d["transformedChunks"] = base64.b64encode(comp).decode("ascii")
        return d

    @classmethod
    def from_dict(cls, d: Mapping, location: str | None = None) -> "ChunkIndex":
        def req(name, typ=int):
            if name not in d:
                raise SegmentFormatError(f"manifest chunkIndex misses required field {name!r}",
                                         location=location)
            v = d[name]
            if typ is int and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= INT32_MAX):
                raise SegmentFormatError(
                    f"manifest chunkIndex field {name!r} must be a non-negative int32, got {v!r}",
                    location=location)
            if typ is str and not isinstance(v, str):
                raise SegmentFormatError(f"manifest chunkIndex field {name!r} must be a string",
                                         location=location)
            return v
        kind = d.get("type")
        ocs = req("originalChunkSize")
        ofs = req("originalFileSize")
        if ocs <= 0:
            raise SegmentFormatError("manifest chunkIndex originalChunkSize must be positive",
                                     location=location)
        if -(-ofs // ocs) > MAX_CHUNK_COUNT:
            raise SegmentFormatError(
                f"manifest chunkIndex originalFileSize {ofs} / originalChunkSize {ocs} gives "
                f"{-(-ofs // ocs)} chunks, more than the {MAX_CHUNK_COUNT} this reader accepts",
                location=location)
        if kind == "fixed":
            return cls.fixed(ocs, ofs, req("transformedChunkSize"), req("finalTransformedChunkSize"))
        if kind == "variable":
            text = req("transformedChunks", str)
            try:
                comp = base64.b64decode(text, validate=True)
            except ValueError:
                raise SegmentFormatError("manifest transformedChunks is not valid base64",
                                         location=location) from None
            # The plugin writes the content size; the cap mirrors its sanity limit.
            table = _zstd_capped(comp, MAX_CHUNK_TABLE_SIZE, "manifest transformedChunks", location)
            sizes = _decode_chunk_sizes(table, location)
            expected = max(1, -(-ofs // ocs))
            if len(sizes) != expected:
                raise SegmentFormatError(
                    f"manifest transformedChunks has {len(sizes)} chunks, expected {expected} for "
                    f"originalFileSize {ofs} / originalChunkSize {ocs}", location=location)
            if any(s < 0 for s in sizes):
                raise SegmentFormatError("manifest transformedChunks holds a negative size",
                                         location=location)
            return cls("variable", ocs, ofs, tuple(sizes))
        raise SegmentFormatError(
            f"manifest chunkIndex type {kind!r} is not 'fixed' or 'variable'", location=location)


# --------------------------------------------------------------------------------------------
# segment indexes and manifest

@dataclass(frozen=True)
class SegmentIndex:
    position: int
    size: int

    @property
    def range(self) -> tuple[int, int]:
        """Half-open byte range inside the ``.indexes`` object."""
        return self.position, self.position + self.size


@dataclass(frozen=True)
class SegmentIndexes:
    offset: SegmentIndex
    timestamp: SegmentIndex
    producer_snapshot: SegmentIndex
    leader_epoch: SegmentIndex
    transaction: SegmentIndex | None = None

    _JSON = (("offset", "offset"), ("timestamp", "timestamp"),
             ("producerSnapshot", "producer_snapshot"), ("leaderEpoch", "leader_epoch"),
             ("transaction", "transaction"))

    def get(self, name: str) -> SegmentIndex | None:
        """By JSON name (``offset``, ``timestamp``, ``producerSnapshot``, ``leaderEpoch``,
        ``transaction``) or attribute name."""
        for jname, attr in self._JSON:
            if name in (jname, attr):
                return getattr(self, attr)
        raise KeyError(f"unknown index {name!r}; valid: {', '.join(j for j, _ in self._JSON)}")

    def to_dict(self) -> dict:
        out = {}
        for jname, attr in self._JSON:
            idx = getattr(self, attr)
            out[jname] = None if idx is None else {"position": idx.position, "size": idx.size}
        return out

    @classmethod
    def from_dict(cls, d: Mapping, location: str | None = None) -> "SegmentIndexes":
        if not isinstance(d, Mapping):
            raise SegmentFormatError("manifest segmentIndexes is not an object", location=location)
        vals: dict[str, SegmentIndex | None] = {}
        for jname, attr in cls._JSON:
            v = d.get(jname)
            if v is None:
                if jname != "transaction":
                    raise SegmentFormatError(f"manifest segmentIndexes misses {jname!r}",
                                             location=location)
                vals[attr] = None
                continue
            try:
                pos, size = v["position"], v["size"]
            except (TypeError, KeyError):
                raise SegmentFormatError(
                    f"manifest segmentIndexes.{jname} needs 'position' and 'size'",
                    location=location) from None
            for n, x in (("position", pos), ("size", size)):
                if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x <= INT32_MAX:
                    raise SegmentFormatError(
                        f"manifest segmentIndexes.{jname}.{n} must be a non-negative int32, got {x!r}",
                        location=location)
            vals[attr] = SegmentIndex(pos, size)

        def index(attr: str) -> SegmentIndex:
            got = vals[attr]
            if got is None:    # refused above: only the transaction index may be missing
                raise SegmentFormatError(f"manifest segmentIndexes misses {attr}", location=location)
            return got
        return cls(index("offset"), index("timestamp"), index("producer_snapshot"), index("leader_epoch"),
                   vals["transaction"])


@dataclass(frozen=True)
class EncryptionMetadata:
    """``encryption`` of the manifest: the data key, RSA-encrypted as ``{keyPairId}:{base64}``,
    and the AES-GCM AAD.  ``repr`` shows only the key pair id."""
    data_key: str = field(repr=False)
    aad: bytes = field(repr=False)

    @property
    def key_id(self) -> str:
        return self.data_key.split(":", 1)[0] if ":" in self.data_key else "<malformed>"

    def __repr__(self) -> str:
        return f"EncryptionMetadata(key_id={self.key_id!r})"


@dataclass(frozen=True)
class SegmentManifest:
    chunk_index: ChunkIndex
    segment_indexes: SegmentIndexes
    compression: bool
    encryption: EncryptionMetadata | None = None
    # Written by the plugin for humans (READ_ONLY in Jackson); kept as-is when read.
    remote_log_segment_metadata: dict | None = field(default=None, compare=False)

    def to_json(self) -> bytes:
        d = {"chunkIndex": self.chunk_index.to_dict(),
             "segmentIndexes": self.segment_indexes.to_dict(),
             "compression": self.compression}
        if self.encryption is not None:
            d["encryption"] = {"dataKey": self.encryption.data_key,
                               "aad": base64.b64encode(self.encryption.aad).decode("ascii")}
        if self.remote_log_segment_metadata is not None:
            d["remoteLogSegmentMetadata"] = self.remote_log_segment_metadata
        return json.dumps(d, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, location: str | None = None) -> "SegmentManifest":
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            # RecursionError: nesting deeper than the interpreter's JSON decoder recursion
            pos = getattr(exc, "pos", None)
            raise SegmentFormatError(
                "manifest is not valid JSON" + (f" (byte position {pos})" if pos is not None else ""),
                location=location) from None
        if not isinstance(d, dict):
            raise SegmentFormatError("manifest is not a JSON object", location=location)
        for req in ("chunkIndex", "segmentIndexes", "compression"):
            if req not in d:
                raise SegmentFormatError(f"manifest misses required field {req!r}", location=location)
        if not isinstance(d["compression"], bool):
            raise SegmentFormatError("manifest field 'compression' must be a boolean", location=location)
        if not isinstance(d["chunkIndex"], dict):
            raise SegmentFormatError("manifest chunkIndex is not an object", location=location)
        enc = d.get("encryption")
        encryption = None
        if enc is not None:
            if not isinstance(enc, dict) or not isinstance(enc.get("dataKey"), str) \
                    or not isinstance(enc.get("aad"), str):
                raise SegmentFormatError("manifest encryption needs string 'dataKey' and 'aad'",
                                         location=location)
            try:
                aad = base64.b64decode(enc["aad"], validate=True)
            except ValueError:
                raise SegmentFormatError("manifest encryption.aad is not base64", location=location) from None
            encryption = EncryptionMetadata(enc["dataKey"], aad)
        return cls(ChunkIndex.from_dict(d["chunkIndex"], location),
                   SegmentIndexes.from_dict(d["segmentIndexes"], location),
                   d["compression"], encryption, d.get("remoteLogSegmentMetadata"))




# --------------------------------------------------------------------------------------------
# reader side

# A compressed segment's chunk table travels with every task that reads the segment; larger
# tables (tiny chunks in a big segment) are left to the executor's own manifest GET.
MAX_SHIPPED_CHUNK_TABLE = 16 * 1024


@dataclass(frozen=True)
class ManifestInfo:
    """What reading a segment's ``.log`` object needs from its manifest, small enough to travel
    with each read task, so that a planner that has read the manifest spares every executor the
    GET.  ``chunk_table`` is None when the object is the segment itself (no compression, no
    encryption); otherwise the transformed chunk sizes in the plugin's own binary table encoding
    (``ChunkSizesBinaryCodec``: a few bytes per chunk).  ``encryption`` is the manifest's (the
    RSA-wrapped data key and the AAD: useless without the key pair's private key, which never
    travels); ``compression`` whether chunks are zstd frames (under the encryption)."""
    original_file_size: int
    original_chunk_size: int
    chunk_table: bytes | None = None
    encryption: EncryptionMetadata | None = None
    compression: bool = True

    @classmethod
    def of(cls, manifest: SegmentManifest) -> "ManifestInfo | None":
        """The info of a manifest; None when its chunk table is larger than
        :data:`MAX_SHIPPED_CHUNK_TABLE` (the executor then reads the manifest)."""
        ci = manifest.chunk_index
        table = None
        if manifest.compression or manifest.encryption is not None:
            try:
                table = _encode_chunk_sizes(list(ci.transformed_sizes))
            except (ValueError, struct.error):   # sizes no valid manifest holds: the reader names them
                return None
            if len(table) > MAX_SHIPPED_CHUNK_TABLE:
                return None
        return cls(ci.original_file_size, ci.original_chunk_size, table, manifest.encryption,
                   manifest.compression)

    def chunk_index(self, location: str | None = None) -> ChunkIndex | None:
        """The chunk index to detransform with; None when there is nothing to detransform."""
        if self.chunk_table is None:
            return None
        return ChunkIndex("variable", self.original_chunk_size, self.original_file_size,
                          tuple(_decode_chunk_sizes(self.chunk_table, location)))


def require_readable(manifest: SegmentManifest, location: str | None = None) -> None:
    """Refuse an encrypted manifest where no key ring is at hand, naming its key pair."""
    if manifest.encryption is not None:
        raise SegmentFormatError(
            f"segment is encrypted with key pair id {manifest.encryption.key_id!r}; reading it needs "
            "that key pair's private key (remote.storage.aiven.encryption.key.pairs; the plugin's "
            "encryption.key.pairs)", location=location)


def _zstd_capped(data, cap: int, what: str, location) -> bytes:
    """zstd-decompress one frame of at most ``cap`` bytes.  A frame that declares or yields
    more is refused before anything of that size is allocated (zstandard would otherwise
    allocate a declared content size up front, however absurd)."""
    import zstandard
    try:
        declared = zstandard.frame_content_size(data)
        if declared > cap:
            raise SegmentFormatError(f"{what}: zstd frame declares {declared} bytes, more than the "
                                     f"{cap} it may hold", location=location)
        out = bytearray()
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            while len(out) <= cap:
                piece = reader.read(min(1 << 20, cap + 1 - len(out)))
                if not piece:
                    break
                out += piece
    except zstandard.ZstdError as exc:
        raise SegmentFormatError(f"{what}: zstd error {exc}", location=location) from None
    if len(out) > cap:
        raise SegmentFormatError(f"{what}: zstd frame decompresses to more than {cap} bytes",
                                 location=location)
    return bytes(out)


def decompress_chunk(data: bytes, chunk: Chunk, location: str | None = None, *,
                     size: int | None = None) -> bytes:
    """zstd-decompress one transformed chunk, checking it is exactly one complete frame that
    yields exactly its original size.  ``size``: the length the frame must have when it is not
    the chunk's transformed size (it was decrypted first).

    One pass, bounded by the chunk's original size: a frame that declares another size is
    refused before anything is allocated, and one that declares none is decompressed into at
    most the original size (libzstd stops there; a declared size it also enforces per block)."""
    import zstandard
    where = f"chunk {chunk.id} at transformed byte position {chunk.transformed_position}"
    expected = chunk.transformed_size if size is None else size
    if len(data) != expected:
        raise SegmentFormatError(f"{where}: got {len(data)} bytes, the chunk index says {expected}",
                                 location=location)
    try:
        declared = zstandard.frame_content_size(data)
        if declared >= 0 and declared != chunk.original_size:
            raise SegmentFormatError(f"{where}: zstd frame declares {declared} bytes, the chunk index says "
                                     f"{chunk.original_size}", location=location)
        out = zstandard.ZstdDecompressor().decompress(data, max_output_size=max(chunk.original_size, 1),
                                                      allow_extra_data=False)
    except zstandard.ZstdError as exc:
        text = str(exc)
        if "full frame" in text or "unused data" in text:
            raise SegmentFormatError(f"{where}: not exactly one complete zstd frame of at most "
                                     f"{chunk.original_size} bytes ({text})", location=location) from None
        raise SegmentFormatError(f"{where}: zstd error {text}", location=location) from None
    if len(out) != chunk.original_size:
        raise SegmentFormatError(f"{where}: decompressed to {len(out)} bytes, expected {chunk.original_size}",
                                 location=location)
    return out
