"""The embedded broker's remote log manager: copy closed segments to remote storage, remember
them, and serve reads and KIP-1248 location answers for offsets that only remote storage holds.

Two object layouts (``layout``):

* ``"aiven"`` — Aiven's tiered-storage plugin: ``.log`` (optionally zstd chunk-compressed,
  optionally encrypted with the active key pair of ``encryption_key_pairs``), ``.indexes`` and
  ``.rsm-manifest``, written with :mod:`kafka_tiered_source.testing.aiven_writer`;
  custom metadata carries REMOTE_SIZE and OBJECT_KEY (and OBJECT_PREFIX when a prefix is set).
* ``"kafka-local-tiered"`` — Kafka's LocalTieredStorage: ``.log``, ``.index``, ``.timeindex``,
  ``.txnindex``, ``.snapshot`` and ``.leader_epoch_checkpoint`` per segment; no custom metadata.

A copy is made as RemoteLogManager.copyLogSegment makes it: its end offset is the next local
segment's base offset - 1 (consecutive copies are contiguous even where compaction or control
batches leave no record at a segment's tail), its leader epochs are the leader's epoch entries
of ``[base, next base)`` and the leader-epoch checkpoint uploaded with it holds the leader's
entries up to the next base.  Copies may overlap (a new leader copies from its own segment
holding the highest copied offset + 1); reads are served as Kafka serves them, through a
RemoteLogMetadataCache (:class:`~.rlmm.RemoteLogMetadataCache`), by :mod:`.remote_read`.

Every copy and deletion is one JSON line in the partition directory (appended: tiering n
segments writes O(n) bytes, not O(n^2), which matters for topics of 100k segments), replayed in
order on restart, next to local copies of each copy's offset, time and transaction indexes plus
its batch table: the broker answers location hints and aborted transactions from them without
fetching anything.
"""
from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import fields
from functools import cached_property
from typing import TYPE_CHECKING

from ..dataclass import dataclass, field
from ..ids import random_uuid, uuid_from_str, uuid_to_str
from ..records.header import iter_headers
from ..storage import aiven
from ..storage.segment import RemoteSegment
from ..storage.indexes import (AbortedTxn, lookup_position, lookup_time, parse_offset_index,
                               parse_time_index, parse_txn_index)
from . import aiven_writer
from .log import Segment, build_indexes, collect_aborted
from .remote import RemoteStore
from .rlmm import RemoteLogMetadataCache

if TYPE_CHECKING:
    from ..storage.aiven_crypto import KeyRing

LAYOUT_AIVEN = "aiven"
LAYOUT_KAFKA_LOCAL = "kafka-local-tiered"
LAYOUTS = (LAYOUT_AIVEN, LAYOUT_KAFKA_LOCAL)
STORAGE_FORMAT = "ApacheKafkaV1"
COPY_FINISHED = "COPY_FINISHED"
BATCH_ENTRY = struct.Struct(">qii")       # last offset, position, size
METADATA_FILE = "remote-log-events.jsonl"       # one copy or deletion per line, in order
INDEX_DIR = "remote-indexes"


@dataclass(frozen=True)
class TieringConfig:
    layout: str = LAYOUT_AIVEN
    key_prefix: str = ""
    chunk_size: int = 4 * 1024 * 1024        # Aiven's chunk.size default
    chunk_compression: bool = False
    presign: bool = False
    broker_id: int = 0
    # The plugin's encryption.key.pair.id (the active pair, None: no encryption) and
    # encryption.key.pairs (id -> private key PEM file; the public key is derived from it).
    encryption_key_pair_id: str | None = None
    encryption_key_pairs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        from ..errors import ConfigError
        if self.layout not in LAYOUTS:
            raise ConfigError(f"layout {self.layout!r} is not one of {', '.join(LAYOUTS)}", option="layout")
        pairs = dict(self.encryption_key_pairs)
        if self.encryption_key_pair_id is not None:
            if self.layout != LAYOUT_AIVEN:
                raise ConfigError("encryption is a feature of the aiven layout", option="encryption_key_pair_id")
            if self.encryption_key_pair_id not in pairs:
                raise ConfigError(f"encryption key '{self.encryption_key_pair_id}' must be provided in "
                                  f"encryption_key_pairs", option="encryption_key_pair_id")

    def keyring(self) -> KeyRing:
        """The broker's own reader of its encrypted segments."""
        from ..options.encryption import KeyPairSource
        from ..storage.aiven_crypto import KeyRing
        return KeyRing(tuple(KeyPairSource(k, "file", path) for k, path in self.encryption_key_pairs))


@dataclass
class RemoteSegmentMetadata:
    """What Kafka's RemoteLogSegmentMetadata holds, plus where the objects are."""
    segment_id: str                 # Kafka Uuid string
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    end_offset: int                 # inclusive
    size_bytes: int
    max_timestamp: int
    event_timestamp: int
    layout: str
    log_key: str                    # the .log object's key, relative to the store root
    custom_metadata: str | None = None   # hex of the bytes (JSON-safe)
    leader_epochs: dict = field(default_factory=dict)
    txn_index_empty: bool = True
    chunk_compression: bool = False
    state: str = COPY_FINISHED
    broker_id: int = 0
    encrypted: bool = False
    copy_epoch: int = 0             # the copying leader's epoch (KIP-1266's BrokerLeaderEpoch)

    @cached_property
    def segment_id_bytes(self) -> bytes:
        return uuid_from_str(self.segment_id)

    @property
    def custom_metadata_bytes(self) -> bytes | None:
        return bytes.fromhex(self.custom_metadata) if self.custom_metadata is not None else None

    def to_remote_segment(self, presigned_url: str | None = None) -> RemoteSegment:
        return RemoteSegment(self.topic, self.topic_id, self.partition, self.segment_id,
                             self.base_offset, self.end_offset, self.size_bytes,
                             self.custom_metadata_bytes, presigned_url, STORAGE_FORMAT)


def checkpoint_text(entries) -> bytes:
    """Kafka's leader-epoch checkpoint text (version 0, count, "epoch startOffset" lines)."""
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def batch_epochs(data: bytes) -> dict[int, int]:
    """The leader epochs the batches of ``data`` carry, each with its first offset."""
    epochs: dict[int, int] = {}
    for h in iter_headers(data):
        if h.partition_leader_epoch >= 0 and h.partition_leader_epoch not in epochs:
            epochs[h.partition_leader_epoch] = h.base_offset
    return epochs


@dataclass
class _CopyFiles:
    """What the broker has read of one copy's files (kept while the copy lives)."""
    offset_index: list[tuple[int, int]] | None = None
    time_index: list[tuple[int, int]] | None = None
    txn_entries: list[AbortedTxn] | None = None
    batches: list[tuple[int, int, int]] | None = None
    manifest: aiven.SegmentManifest | None = None


class RemotePartition:
    """The remote half of one partition: copies, local index copies, copy, delete and fetch.
    ``leader_log()`` is the partition leader's log (its leader-epoch cache decides which epoch
    wrote an offset, as the leader's RemoteLogManager asks it)."""

    def __init__(self, directory: str, *, topic: str, topic_id: str, partition: int,
                 store: RemoteStore, config: TieringConfig, events=None, leader_epoch=lambda: 0,
                 leader_log=None):
        # events: a RemoteLogMetadataWriter (or None); leader_epoch(): the partition's current epoch
        self.events = events
        self.leader_epoch = leader_epoch
        self.leader_log = leader_log
        self.dir = directory
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.store = store
        self.config = config
        self.copies: dict[str, RemoteSegmentMetadata] = {}   # finished, not being deleted
        self.cache = RemoteLogMetadataCache()
        self._files: dict[str, _CopyFiles] = {}      # by segment id
        self._keyring: KeyRing | None = None
        self.index_dir = os.path.join(directory, INDEX_DIR)
        self._load()

    # -- persistence
    @property
    def _meta_path(self) -> str:
        return os.path.join(self.dir, METADATA_FILE)

    def _load(self) -> None:
        if not os.path.exists(self._meta_path):
            return
        with open(self._meta_path) as f:
            for line in f:
                if line.strip():
                    self._replay(json.loads(line))

    def _replay(self, event: dict) -> None:
        if "copy" in event:
            d = dict(event["copy"])
            d["leader_epochs"] = {int(k): v for k, v in d["leader_epochs"].items()}   # JSON keys are strings
            meta = RemoteSegmentMetadata(**d)
            self.copies[meta.segment_id] = meta
            if event.get("live", True):
                self.cache.copy_finished(meta)
        else:
            gone = self.copies.pop(event["delete"], None)
            if gone is not None:
                self.cache.delete_started(gone)
                self.cache.delete_finished(gone)

    def _journal(self, event: dict) -> None:
        with open(self._meta_path, "a") as f:
            f.write(json.dumps(event) + "\n")

    @staticmethod
    def _fields(meta: RemoteSegmentMetadata) -> dict:
        # the fields are flat (leader_epochs a dict of ints): no deep copy as asdict makes
        return {f.name: getattr(meta, f.name) for f in fields(meta)}

    def _local(self, meta: RemoteSegmentMetadata, suffix: str) -> str:
        return os.path.join(self.index_dir, f"{meta.base_offset:020d}-{meta.segment_id}{suffix}")

    def _read_local(self, meta, suffix) -> bytes:
        with open(self._local(meta, suffix), "rb") as f:
            return f.read()

    # -- queries
    @property
    def serves_any(self) -> bool:
        """Whether any finished copy may serve reads (RemoteLogManager reads remote storage)."""
        return bool(self.copies)

    @property
    def segments(self) -> list[RemoteSegmentMetadata]:
        """The finished copies, by base offset (overlapping ones included)."""
        return sorted(self.copies.values(), key=lambda s: (s.base_offset, s.end_offset))

    def epoch_for(self, offset: int) -> int:
        """The leader epoch that wrote ``offset``, from the leader's epoch cache."""
        log = self.leader_log() if self.leader_log is not None else None
        return log.epochs.epoch_for(offset) if log is not None else 0

    @property
    def highest_offset(self) -> int:
        """The highest offset in remote storage, as RemoteLogManager.findHighestRemoteOffset
        finds it: from the leader's latest epoch back, the first epoch some finished copy holds,
        its highest copied offset (capped at the epoch's end on the lineage); -1 when none."""
        log = self.leader_log() if self.leader_log is not None else None
        if log is None:
            return max((s.end_offset for s in self.copies.values()), default=-1)
        for epoch, _ in reversed(log.epochs.entries):
            highest = self.cache.highest_offset_for_epoch(epoch)
            if highest is not None:
                _, end = log.epochs.end_offset_for(epoch, log.log_end_offset)
                return end - 1 if end <= highest else highest
        return -1

    def _copy_files(self, meta: RemoteSegmentMetadata) -> _CopyFiles:
        return self._files.setdefault(meta.segment_id, _CopyFiles())

    def offset_index(self, meta: RemoteSegmentMetadata) -> list[tuple[int, int]]:
        files = self._copy_files(meta)
        if files.offset_index is None:
            files.offset_index = parse_offset_index(self._read_local(meta, ".index"))
        return files.offset_index

    def time_index(self, meta: RemoteSegmentMetadata) -> list[tuple[int, int]]:
        files = self._copy_files(meta)
        if files.time_index is None:
            files.time_index = parse_time_index(self._read_local(meta, ".timeindex"))
        return files.time_index

    def txn_entries(self, meta: RemoteSegmentMetadata) -> list[AbortedTxn]:
        files = self._copy_files(meta)
        if files.txn_entries is None:
            files.txn_entries = parse_txn_index(self._read_local(meta, ".txnindex"),
                                                location=self._local(meta, ".txnindex"))
        return files.txn_entries

    def batches(self, meta: RemoteSegmentMetadata) -> list[tuple[int, int, int]]:
        files = self._copy_files(meta)
        if files.batches is None:
            raw = self._read_local(meta, ".batches")
            files.batches = [BATCH_ENTRY.unpack_from(raw, i) for i in range(0, len(raw), BATCH_ENTRY.size)]
        return files.batches

    def lookup(self, offset: int) -> RemoteSegmentMetadata | None:
        """RemoteLogManager.fetchRemoteLogSegmentMetadata: the copy the cache maps for the
        offset's leader epoch (from the leader's epoch cache), or None."""
        return self.cache.lookup(self.epoch_for(offset), offset)

    def next_copy(self, meta) -> RemoteSegmentMetadata | None:
        """RemoteLogManager.findNextSegmentMetadata: the copy serving the offset after ``meta``."""
        return self.lookup(meta.end_offset + 1)

    def chain(self, offset: int):
        """The copies serving ``offset`` and on, in offset order, while one does."""
        meta = self.lookup(offset)
        while meta is not None:
            yield meta
            meta = self.next_copy(meta)

    def aborted(self, fetch_offset: int, upper_bound: int, start_meta) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions from the txn indexes of ``start_meta`` and the copies serving
        the offsets after it (RemoteLogManager.collectAbortedTransactions)."""
        out = []
        meta = start_meta
        while meta is not None:
            got, complete = collect_aborted(self.txn_entries(meta), fetch_offset, upper_bound)
            out.extend(got)
            if complete:
                return out, True
            meta = self.next_copy(meta)
        return out, False

    # -- copy
    def copy(self, seg: Segment, next_base: int, epochs) -> RemoteSegmentMetadata:
        """Upload one closed segment as RemoteLogManager.copyLogSegment does: its end offset is
        ``next_base`` - 1, its leader epochs the leader's of ``[base, next base)`` and the
        uploaded checkpoint the leader's entries up to ``next_base`` (``epochs``: the leader's
        LeaderEpochCache)."""
        with open(seg.file(".txnindex"), "rb") as f:
            txn = f.read()
        return self.upload(seg.data(), seg.base_offset, txn, interval=seg.index.interval,
                           end_offset=next_base - 1,
                           leader_epochs=dict(epochs.entries_in_range(seg.base_offset, next_base)),
                           checkpoint=checkpoint_text(epochs.entries_in_range(-1, next_base)))

    def upload(self, data: bytes, base_offset: int, txn: bytes = b"", *, interval: int = 4096,
               event_ms: int | None = None, live: bool = True, end_offset: int | None = None,
               leader_epochs: dict | None = None, checkpoint: bytes | None = None) -> RemoteSegmentMetadata:
        """Upload segment bytes as a remote segment, announced in ``__remote_log_metadata``
        (COPY_SEGMENT_STARTED, then FINISHED with the custom metadata).  Without ``end_offset``
        and ``leader_epochs`` they come from the batches.  ``live=False``: only announced, this
        broker's own cache does not learn it (it serves nothing from it), as a broker whose
        metadata consumer has not caught up."""
        seg_id = uuid_to_str(random_uuid())
        offset_index, time_index = build_indexes(data, base_offset, interval)
        headers = list(iter_headers(data))
        last_offset = headers[-1].last_offset if headers else base_offset
        if end_offset is None:
            end_offset = last_offset
        epochs = leader_epochs if leader_epochs is not None else batch_epochs(data)
        if checkpoint is None:
            checkpoint = checkpoint_text(sorted(epochs.items()))
        max_ts = max((h.max_timestamp for h in headers), default=-1)
        cfg = self.config
        custom = None
        meta = RemoteSegmentMetadata(
            segment_id=seg_id, topic=self.topic, topic_id=self.topic_id, partition=self.partition,
            base_offset=base_offset, end_offset=end_offset, size_bytes=len(data),
            max_timestamp=max_ts, event_timestamp=event_ms or int(time.time() * 1000),
            layout=cfg.layout, log_key="", leader_epochs=epochs, txn_index_empty=not txn,
            chunk_compression=cfg.layout == LAYOUT_AIVEN and cfg.chunk_compression, broker_id=cfg.broker_id,
            encrypted=cfg.layout == LAYOUT_AIVEN and cfg.encryption_key_pair_id is not None,
            copy_epoch=self.leader_epoch())
        if self.events is not None:
            self.events.copy_started(meta, self.leader_epoch())
        if cfg.layout == LAYOUT_AIVEN:
            stem = aiven.main_path(self.topic, self.topic_id, self.partition, base_offset, seg_id)
            log_key = f"{cfg.key_prefix}{stem}.{aiven.SUFFIX_LOG}"
            key_id = cfg.encryption_key_pair_id
            enc = (aiven_writer.SegmentEncryption.new(key_id, dict(cfg.encryption_key_pairs)[key_id])
                   if key_id is not None else None)
            obj, chunk_index = aiven_writer.transform_chunks(data, cfg.chunk_size, cfg.chunk_compression, enc)
            blob, seg_indexes = aiven_writer.build_indexes(offset_index, time_index, b"", checkpoint,
                                                           txn if txn else None, enc)
            manifest = aiven.SegmentManifest(
                chunk_index, seg_indexes, cfg.chunk_compression, enc.metadata if enc else None,
                aiven_writer.remote_log_segment_metadata_json(
                    topic=self.topic, topic_id=self.topic_id, partition=self.partition,
                    segment_id=seg_id, start_offset=base_offset, end_offset=end_offset,
                    max_timestamp_ms=max_ts, broker_id=cfg.broker_id,
                    event_timestamp_ms=event_ms or int(time.time() * 1000),
                    segment_leader_epochs=epochs)).to_json()
            self.store.put(log_key, obj)
            self.store.put(f"{cfg.key_prefix}{stem}.{aiven.SUFFIX_INDEXES}", blob)
            self.store.put(f"{cfg.key_prefix}{stem}.{aiven.SUFFIX_MANIFEST}", manifest)
            custom = aiven_writer.encode_custom_metadata(
                remote_size=len(obj) + len(blob) + len(manifest),
                object_prefix=cfg.key_prefix or None, object_key=stem).hex()
        else:
            stem = f"{self.topic}-{self.partition}-{self.topic_id}/{base_offset:020d}-{seg_id}"
            log_key = f"{cfg.key_prefix}{stem}.log"
            for suffix, content in ((".log", data), (".index", offset_index), (".timeindex", time_index),
                                    (".txnindex", txn), (".snapshot", b""),
                                    (".leader_epoch_checkpoint", checkpoint)):
                self.store.put(f"{cfg.key_prefix}{stem}{suffix}", content)
        meta.log_key, meta.custom_metadata = log_key, custom
        os.makedirs(self.index_dir, exist_ok=True)
        table = b"".join(BATCH_ENTRY.pack(h.last_offset, h.position, h.size) for h in headers)
        for suffix, content in ((".index", offset_index), (".timeindex", time_index),
                                (".txnindex", txn), (".batches", table)):
            with open(self._local(meta, suffix), "wb") as f:
                f.write(content)
        self._journal({"copy": self._fields(meta), "live": live})
        self.copies[meta.segment_id] = meta
        if live:
            self.cache.copy_finished(meta)
        if self.events is not None:
            self.events.copy_finished(meta, self.leader_epoch())
        return meta

    def object_keys(self, meta: RemoteSegmentMetadata) -> list[str]:
        """Every object ``copy`` wrote for ``meta``."""
        if meta.layout == LAYOUT_AIVEN:
            stem = meta.log_key[: -len(aiven.SUFFIX_LOG)]
            return [stem + suffix for suffix in aiven.SUFFIXES]
        stem = meta.log_key[: -len(".log")]
        return [stem + suffix for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot",
                                             ".leader_epoch_checkpoint")]

    def delete(self, gone: list[RemoteSegmentMetadata]) -> list[RemoteSegmentMetadata]:
        """Delete copies as RemoteLogManager.deleteRemoteLogSegment does: DELETE_SEGMENT_STARTED
        (no reader is sent to them any more), the objects, DELETE_SEGMENT_FINISHED."""
        for meta in gone:
            if self.copies.pop(meta.segment_id, None) is None:
                continue
            self._journal({"delete": meta.segment_id})   # first: a crash leaves orphan objects
            self.cache.delete_started(meta)
            if self.events is not None:
                self.events.delete_started(meta, self.leader_epoch())
            for key in self.object_keys(meta):
                if self.store.exists(key):
                    self.store.delete(key)
            for suffix in (".index", ".timeindex", ".txnindex", ".batches"):
                try:
                    os.remove(self._local(meta, suffix))
                except FileNotFoundError:
                    pass
            self._files.pop(meta.segment_id, None)
            self.cache.delete_finished(meta)
            if self.events is not None:
                self.events.delete_finished(meta, self.leader_epoch())
        return gone

    def delete_below(self, offset: int) -> list[RemoteSegmentMetadata]:
        """Delete every copy that ends below ``offset``, as RemoteLogManager does once the log
        start offset passes them."""
        return self.delete([s for s in self.segments if s.end_offset < offset])

    # -- fetch
    def _manifest(self, meta: RemoteSegmentMetadata) -> aiven.SegmentManifest:
        files = self._copy_files(meta)
        if files.manifest is None:
            mkey = meta.log_key[: -len(aiven.SUFFIX_LOG)] + aiven.SUFFIX_MANIFEST
            m = aiven.SegmentManifest.from_json(self.store.get(mkey), location=self.store.location(mkey))
            if m.encryption is None or not self.config.encryption_key_pairs:
                aiven.require_readable(m, self.store.location(mkey))
            files.manifest = m
        return files.manifest

    def _cipher(self, manifest, location):
        if manifest.encryption is None:
            return None
        if self._keyring is None:
            self._keyring = self.config.keyring()
        return self._keyring.cipher(manifest.encryption, location)

    def fetch_range(self, meta, start: int, end: int) -> tuple[bytes, int]:
        """Original segment bytes [start, end) and the number of bytes fetched from the store."""
        if not meta.chunk_compression and not meta.encrypted:
            data = self.store.get(meta.log_key, start, end)
            return data, len(data)
        manifest = self._manifest(meta)
        ci = manifest.chunk_index
        chunks = ci.chunks_for_range(start, end)
        if not chunks:
            return b"", 0
        t0 = chunks[0].transformed_position
        t1 = chunks[-1].transformed_position + chunks[-1].transformed_size
        raw = self.store.get(meta.log_key, t0, t1)
        loc = self.store.location(meta.log_key)
        cipher = self._cipher(manifest, loc)

        def plain_chunk(c):
            data = raw[c.transformed_position - t0:c.transformed_position - t0 + c.transformed_size]
            if cipher is not None:
                return cipher.open_chunk(data, c, manifest.compression, loc)
            return aiven.decompress_chunk(data, c, loc)
        plain = b"".join(plain_chunk(c) for c in chunks)
        o0 = chunks[0].original_position
        return plain[start - o0:end - o0], len(raw)

    def offset_for_time(self, ts: int, start: int) -> tuple[RemoteSegmentMetadata, int, bytes] | None:
        """(copy, position, batch bytes) of the first remote batch from ``start`` on whose max
        timestamp >= ts, over the copies serving the offsets in turn."""
        for meta in self.chain(start):
            if meta.max_timestamp < ts:
                continue
            start_off = lookup_time(self.time_index(meta), meta.base_offset, ts)
            pos = lookup_position(self.offset_index(meta), meta.base_offset, start_off)
            for last, p, size in self.batches(meta):
                if p < pos or last < start:
                    continue
                data, _ = self.fetch_range(meta, p, p + size)
                if struct.unpack_from(">q", data, 35)[0] >= ts:
                    return meta, p, data
        return None

    def location_answer(self, part, offset: int, max_bytes: int):
        """A KIP-1248 answer written from copies held once (synthetic_tiers.py); None: this
        partition answers through BrokerStorage.locate."""
        return None

    def presign(self, meta) -> str | None:
        return self.store.presign(meta.log_key) if self.config.presign else None
