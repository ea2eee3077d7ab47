"""The Aiven plugin's layout, read side: keys, manifests, chunk indexes and the chunk transforms
(AES-GCM, then zstd), above any byte-range store.  The format itself is :mod:`.aiven`; the
encryption :mod:`.aiven_crypto`."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, cast

from ..errors import SegmentFormatError
from . import aiven
from .layout import Layout, ObjectReader
from .parts import Part, ReadPlan

if TYPE_CHECKING:
    from .aiven_crypto import ChunkCipher, KeyRing


class AivenLayout(Layout):
    """Aiven's tiered-storage plugin layout.  Holds what a fetcher learns once and reuses: the
    manifests it read (LRU, ``fetch.remote.manifest.cache.size``) and the key ring of
    ``remote.storage.aiven.encryption.key.pairs`` (data keys opened once)."""

    name = "aiven"
    reads_manifests = True

    def __init__(self, prefix: str = "", reader: ObjectReader | None = None):
        self.prefix = prefix
        self.reader = reader
        self._lock = threading.Lock()
        self._manifests: OrderedDict[str, aiven.SegmentManifest] = OrderedDict()
        self._keyring: KeyRing | None = None

    def bind(self, reader: ObjectReader) -> "AivenLayout":
        return AivenLayout(self.prefix, reader)

    def __repr__(self) -> str:
        return f"AivenLayout(prefix={self.prefix!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, AivenLayout) and other.prefix == self.prefix

    def __hash__(self) -> int:
        return hash(("aiven", self.prefix))

    # -- keys ------------------------------------------------------------------------------------
    def key(self, segment, suffix: str) -> str:
        return aiven.segment_object_key(segment, suffix, self.prefix)

    def log_key(self, segment) -> str:
        return self.key(segment, aiven.SUFFIX_LOG)

    def index_key(self, segment, index: str) -> str:
        return self.key(segment, aiven.SUFFIX_INDEXES)   # every index, at its manifest's position

    # -- manifests -------------------------------------------------------------------------------
    def manifest(self, segment) -> aiven.SegmentManifest:
        """The segment's manifest, read once per fetcher (LRU)."""
        key = self.key(segment, aiven.SUFFIX_MANIFEST)
        with self._lock:
            m = self._manifests.get(key)
            if m is not None:
                self._manifests.move_to_end(key)
                return m
        r = self.io
        m = aiven.SegmentManifest.from_json(bytes(r.get_object(key, 0, None)), location=r.location(key))
        with self._lock:
            self._manifests[key] = m
            while len(self._manifests) > r.config.manifest_cache_size:
                self._manifests.popitem(last=False)
        return m

    def cached_manifest(self, segment) -> aiven.SegmentManifest | None:
        key = self.key(segment, aiven.SUFFIX_MANIFEST)
        with self._lock:
            return self._manifests.get(key)

    def cipher(self, encryption, location: str | None = None) -> "ChunkCipher":
        """The chunk cipher of an encrypted manifest's ``encryption``, from the private keys of
        ``remote.storage.aiven.encryption.key.pairs`` (loaded once per fetcher)."""
        from .aiven_crypto import KeyRing
        with self._lock:
            if self._keyring is None:
                self._keyring = KeyRing.from_config(self.io.config)
            ring = self._keyring
        try:
            return ring.cipher(encryption, location)
        except SegmentFormatError as exc:
            exc.backend = exc.backend or self.io.backend
            raise

    # -- reading ---------------------------------------------------------------------------------
    def read_plan(self, segment) -> ReadPlan:
        key = self.log_key(segment)
        loc = self.io.location(key)
        info = segment.manifest_info
        if info is not None:   # the planner read the manifest: no GET of it here
            cipher = self.cipher(info.encryption, loc) if info.encryption is not None else None
            return ReadPlan(key, info.original_file_size, info.chunk_index(loc), info.compression, cipher)
        m = self.manifest(segment)
        ci = m.chunk_index
        cipher = self.cipher(m.encryption, loc) if m.encryption is not None else None
        chunked = m.compression or cipher is not None
        return ReadPlan(key, ci.original_file_size, ci if chunked else None, m.compression, cipher)

    def read_part(self, plan: ReadPlan, part: Part):
        """The GET of ``part``; its chunks decrypted and decompressed, checked against the
        chunk index."""
        r = self.io
        data = r.get_object(plan.key, part.obj_start, part.obj_end)
        if not part.chunks:
            return data
        location = r.location(plan.key)
        assert part.obj_end is not None           # chunked parts end at a chunk boundary
        if len(data) != part.obj_end - part.obj_start:
            message = (f"object ends at byte position {part.obj_start + len(data)}, the manifest's "
                       f"chunk index expects {part.obj_end}")
            if plan.cipher is not None:   # name the chunk cut short; none of it is decrypted
                from .aiven_crypto import truncated
                raise truncated(cast("ChunkCipher", plan.cipher), part.chunks, part.obj_start + len(data), message, location,
                                r.backend)
            raise SegmentFormatError(message, location=location, backend=r.backend)
        mv = memoryview(data)
        if len(part.chunks) == 1:   # one chunk: its plaintext is the part, no copy
            return self._open(plan, part.chunks[0], mv, location)
        out = bytearray(part.orig_len or 0)
        pos = 0
        for ch in part.chunks:
            rel = ch.transformed_position - part.obj_start
            out[pos:pos + ch.original_size] = self._open(plan, ch, mv[rel:rel + ch.transformed_size], location)
            pos += ch.original_size
        return out

    def _open(self, plan: ReadPlan, chunk, data, location: str):
        if plan.cipher is not None:
            return cast("ChunkCipher", plan.cipher).open_chunk(data, chunk, plan.compression, location, self.io.backend)
        return aiven.decompress_chunk(data, chunk, location)

    def fetch_index(self, segment, index: str) -> bytes | None:
        m = self.manifest(segment)
        entry = m.segment_indexes.get(index)
        if entry is None:
            return None
        r = self.io
        key = self.key(segment, aiven.SUFFIX_INDEXES)
        loc = r.location(key)
        cipher = self.cipher(m.encryption, loc) if m.encryption is not None else None
        data = bytes(r.get_object(key, entry.position, entry.position + entry.size))
        if cipher is not None:
            from .aiven_crypto import open_index
            return open_index(cipher, data, index, entry, loc, r.backend)
        if len(data) != entry.size:
            raise SegmentFormatError(
                f"index {index} at byte position {entry.position}: object holds {len(data)} of "
                f"its {entry.size} bytes", location=loc, backend=r.backend)
        return data
