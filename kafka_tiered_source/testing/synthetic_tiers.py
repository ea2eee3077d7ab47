"""Benchmark-scale tiered partitions: copies whose metadata the embedded broker synthesizes as
its copy task would have written it, without segment bytes.  **For benchmarks only.**

Planning a million tiered segments through the KIP-1248 locator needs a broker that answers a
million location Fetches, but tiering them for real writes a batch table and three indexes per
copy, plus the objects (~18 M files at 1M).  A partition made by :func:`synthesize` holds
``segments`` copies of equal shape from offset 0 (``batches_per_segment`` batches of
``records_per_batch`` records, each ``batch_bytes`` long, record ``o`` written at
``first_timestamp_ms + o * timestamp_step_ms``), tiered as ``tier()`` tiers the same appends:

* each copy's metadata as :meth:`~.tiering.RemotePartition.upload` makes it from the segment
  (RemoteLogManager.copyLogSegment): base offset, end offset = the next base - 1, the leader
  epochs of the partition's lineage in ``[base, next base)``, size, max timestamp, the object
  key of the layout and, in the aiven layout, the custom metadata (REMOTE_SIZE of the three
  objects, OBJECT_KEY, OBJECT_PREFIX) with the same manifest and index sizes;
* the batch table and offset index the broker keeps of each copy, computed from the shape (the
  index by Kafka's rule, ``IndexBuilder``), so remote reads are looked up by the same code
  (:mod:`.remote_read`, RemoteLogMetadataCache's look-up for the offset's leader epoch) and the
  KIP-1248 answers (segment id, custom metadata, byte hints, base and end offsets) are those of
  really tiered copies;
* a real local log from the tiered end on (the leader-epoch cache holds the lineage; appends go
  on after the copies), so Metadata, ListOffsets (-1, -2, -4, -5, -6) and OffsetForLeaderEpoch
  answer as for real tiered segments.

What it cannot answer without bytes is refused by name: a Fetch of tiered records without the
KIP-1248 tags (KAFKA_STORAGE_ERROR on the partition, as a failed remote read is answered), a
timestamp search among the copies, more copies, deletions.  Segment ids are derived from the
topic id, partition and copy number (stable across runs).  Nothing is written to
``__remote_log_metadata`` (the metadata-topic benchmark synthesizes that topic itself) nor kept
across a restart: the copies live in the broker process that made them.
"""
from __future__ import annotations

import hashlib
from array import array

from ..dataclass import dataclass
from ..errors import ConfigError, KafkaTieredError
from ..ids import uuid_from_str, uuid_to_str
from ..storage import aiven
from ..storage.indexes import OFFSET_ENTRY, TIME_ENTRY, AbortedTxn
from . import aiven_writer
from .apis import fetch_body
from .batches import StorageError
from .tiering import LAYOUT_AIVEN, RemotePartition, RemoteSegmentMetadata, checkpoint_text


@dataclass(frozen=True)
class SyntheticTiers:
    """The shape of a synthesized partition's tiered copies (see the module doc).
    ``leader_epochs``: the partition's lineage, ``(epoch, start offset)`` ascending from 0."""
    segments: int
    batches_per_segment: int = 1
    records_per_batch: int = 1
    batch_bytes: int = 1 << 20
    first_timestamp_ms: int = 1_760_000_000_000
    timestamp_step_ms: int = 1
    leader_epochs: tuple[tuple[int, int], ...] = ((0, 0),)

    def __post_init__(self):
        for name in ("segments", "batches_per_segment", "records_per_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}", option=name)
        if self.batch_bytes < 61 + self.records_per_batch * 7:
            raise ConfigError(f"batch_bytes {self.batch_bytes} cannot hold {self.records_per_batch} records",
                              option="batch_bytes")
        starts = [o for _, o in self.leader_epochs]
        epochs = [e for e, _ in self.leader_epochs]
        if not starts or starts[0] != 0 or starts != sorted(set(starts)) or epochs != sorted(set(epochs)) \
                or epochs[0] < 0:
            raise ConfigError(f"leader_epochs {self.leader_epochs} is not a lineage from offset 0 "
                              f"(epochs and start offsets ascending)", option="leader_epochs")

    @property
    def records_per_segment(self) -> int:
        return self.batches_per_segment * self.records_per_batch

    @property
    def tiered_end(self) -> int:
        """The first offset past the copies: where the local log starts."""
        return self.segments * self.records_per_segment

    def timestamp(self, offset: int) -> int:
        return self.first_timestamp_ms + offset * self.timestamp_step_ms


class _Cache:
    """RemoteLogMetadataCache (:class:`~.rlmm.RemoteLogMetadataCache`) as it stands after the
    copies were finished in order: per epoch of the lineage that some copy holds, each copy's
    part of it, found by arithmetic rather than kept per copy."""

    def __init__(self, remote: "SyntheticRemotePartition"):
        self.remote = remote

    def _epoch_span(self, epoch: int) -> tuple[int, int] | None:
        """[first, last] offsets the copies hold of ``epoch``, or None."""
        lineage, end = self.remote.tiers.leader_epochs, self.remote.tiers.tiered_end
        for i, (e, start) in enumerate(lineage):
            if e == epoch:
                nxt = lineage[i + 1][1] if i + 1 < len(lineage) else end
                last = min(nxt, end) - 1
                return (start, last) if start <= last else None
        return None

    def lookup(self, epoch: int, offset: int):
        """remoteLogSegmentMetadata(leaderEpoch, offset): the copies are contiguous, so the floor
        entry of the epoch's map is the copy holding the offset, if the epoch's part reaches it."""
        span = self._epoch_span(epoch)
        if span is None or not span[0] <= offset <= span[1]:
            return None
        return self.remote.meta(offset // self.remote.tiers.records_per_segment)

    def highest_offset_for_epoch(self, epoch: int) -> int | None:
        span = self._epoch_span(epoch)
        return None if span is None else span[1]


class SyntheticRemotePartition(RemotePartition):
    """The remote half of a synthesized partition (see the module doc): the copies' metadata,
    batch tables and indexes are made on demand from :class:`SyntheticTiers`."""

    def __init__(self, base: RemotePartition, tiers: SyntheticTiers, *, index_interval_bytes: int = 4096):
        cfg = base.config
        if cfg.chunk_compression or cfg.encryption_key_pair_id is not None:
            raise ConfigError("synthesized copies are plain segments: no chunk compression, no encryption",
                              option="layout")
        super().__init__(base.dir, topic=base.topic, topic_id=base.topic_id, partition=base.partition,
                         store=base.store, config=cfg, events=None, leader_epoch=base.leader_epoch,
                         leader_log=base.leader_log)
        self.tiers = tiers
        self.cache = _Cache(self)      # type: ignore[assignment]   # the same look-ups, by arithmetic
        self._index_entries = self._offset_entries(index_interval_bytes)
        self._manifest_sizes: dict[tuple, int] = {}
        self._hold_copies()

    @property
    def serves_any(self) -> bool:
        return True

    @property
    def segments(self) -> list[RemoteSegmentMetadata]:
        return [self.meta(i) for i in range(self.tiers.segments)]

    def _offset_entries(self, interval: int) -> list[tuple[int, int]]:
        """(relative offset, position) of the offset index of every copy (they share a shape):
        an entry before each batch once more than ``index.interval.bytes`` were appended since
        the last one (LogSegment.append; :class:`~.log.IndexBuilder`)."""
        t = self.tiers
        out: list[tuple[int, int]] = []
        since = 0
        for k in range(t.batches_per_segment):
            if since > interval:
                out.append(((k + 1) * t.records_per_batch - 1, k * t.batch_bytes))
                since = 0
            since += t.batch_bytes
        return out

    def segment_id(self, i: int) -> str:
        h = bytearray(hashlib.blake2b(f"{self.topic_id}/{self.partition}/{i}".encode(), digest_size=16).digest())
        h[0] &= 0x7F        # Uuid.randomUuid never makes an id whose string starts with "-"
        return uuid_to_str(bytes(h))

    # -- RemoteLogMetadataCache, held once
    def _hold_copies(self) -> None:
        """What a Kafka broker's RemoteLogMetadataCache holds of each copy, made once, as the
        copies finished (RemoteLogMetadataCache.handleSegmentWithCopySegmentFinishedState keeps
        the RemoteLogSegmentMetadata that RemoteLogManager.copyLogSegment wrote; a fetch reads
        it back through RemoteLogManager.fetchRemoteLogSegmentMetadata, it is not rebuilt per
        fetch).  Held as a column, not an object per copy (a million copies: ~110 bytes each,
        where a RemoteSegmentMetadata each took ~1 KB): each copy's location-answer tags that
        depend on the copy alone (segment id, custom metadata: fetch_body.location_tags), one
        blob, and where each copy's start in it.  They hold for the lineage they were made on
        (``_held_lineage``); :meth:`location_answer` answers from them only while the leader's
        lineage below the tiered end is that one."""
        log = self.leader_log() if self.leader_log is not None else None
        t = self.tiers
        end = t.tiered_end
        self._shape = (t.records_per_segment, t.records_per_batch, t.batches_per_segment, t.batch_bytes, end)
        self._held_lineage = None if log is None else [(e, o) for e, o in log.epochs.entries if o < end]
        blob, at = bytearray(), array("Q", [0])
        for i in range(self.tiers.segments):
            seg_id, _, _, custom = self._copy(i, log)
            blob += fetch_body.location_tags(uuid_from_str(seg_id), custom)
            at.append(len(blob))
        self._held, self._held_at = bytes(blob), at

    def location_answer(self, part, offset: int, max_bytes: int) -> fetch_body.EncodedPartition | None:
        """The read_uncommitted KIP-1248 answer for ``offset`` (``part``: the broker's partition,
        its lock held), written from the held copies: what BrokerStorage.locate and the
        handler's writer make of remote_read.location's hint, byte for byte; None where that
        path is to answer (the offset not only remote, the lineage changed since the copies
        were held, presigned URLs).  The copies are contiguous and of one shape, so the copy
        is the offset's quotient (RemoteLogMetadataCache's floor entry for the epoch) and the
        first batch the one holding it (RemoteLogManager.findFirstBatch from
        lookupPositionForOffset's position); then batches while the max bytes allow, at least
        one (RemoteLogManager.read reads on to the fetch size), all on the lineage."""
        log = part.log
        rps, rpb, bps, size, tiered_end = self._shape
        if self.config.presign or not part.log_start_offset <= offset < min(log.local_start_offset, tiered_end):
            return None
        lineage, entries = self._held_lineage, log.epochs.entries
        n = len(lineage) if lineage is not None else -1
        if n < 0 or entries[:n] != lineage or (len(entries) > n and entries[n][1] < tiered_end):
            return None
        i, rel = divmod(offset, rps)
        k = rel // rpb
        start = k * size
        end = start + max(1, min(bps - k, max_bytes // size)) * size
        base = i * rps
        at = self._held_at
        body = fetch_body.location_partition(self.partition, log.log_end_offset, log.last_stable_offset,
                                             part.log_start_offset, self._held[at[i]:at[i + 1]], start, end,
                                             base, base + rps - 1)
        return None if body is None else fetch_body.EncodedPartition(body, end - start)

    def _copy(self, i: int, log) -> tuple[str, list[tuple[int, int]], str, bytes | None]:
        """Copy ``i``'s segment id, leader epochs, ``.log`` key and custom metadata."""
        t = self.tiers
        base = i * t.records_per_segment
        nxt = base + t.records_per_segment
        entries = log.epochs.entries_in_range(base, nxt) if log is not None else [(0, base)]
        seg_id = self.segment_id(i)
        cfg = self.config
        custom = None
        if cfg.layout == LAYOUT_AIVEN:
            stem = aiven.main_path(self.topic, self.topic_id, self.partition, base, seg_id)
            log_key = f"{cfg.key_prefix}{stem}.{aiven.SUFFIX_LOG}"
            checkpoint = checkpoint_text(log.epochs.entries_in_range(-1, nxt) if log is not None else entries)
            custom = aiven_writer.encode_custom_metadata(
                remote_size=self._remote_size(seg_id, base, nxt - 1, t.timestamp(nxt - 1), entries, checkpoint),
                object_prefix=cfg.key_prefix or None,
                object_key=stem)
        else:
            log_key = f"{cfg.key_prefix}{self.topic}-{self.partition}-{self.topic_id}/{base:020d}-{seg_id}.log"
        return seg_id, entries, log_key, custom

    def meta(self, i: int) -> RemoteSegmentMetadata:
        """Copy ``i``'s metadata, as :meth:`RemotePartition.upload` makes it from the segment."""
        t = self.tiers
        base = i * t.records_per_segment
        nxt = base + t.records_per_segment
        log = self.leader_log() if self.leader_log is not None else None
        seg_id, entries, log_key, custom = self._copy(i, log)
        max_ts = t.timestamp(nxt - 1)
        return RemoteSegmentMetadata(
            segment_id=seg_id, topic=self.topic, topic_id=self.topic_id, partition=self.partition,
            base_offset=base, end_offset=nxt - 1, size_bytes=t.batches_per_segment * t.batch_bytes,
            max_timestamp=max_ts, event_timestamp=max_ts, layout=self.config.layout, log_key=log_key,
            custom_metadata=None if custom is None else custom.hex(), leader_epochs=dict(entries),
            txn_index_empty=True, broker_id=self.config.broker_id, copy_epoch=self.leader_epoch())

    def _remote_size(self, seg_id: str, base: int, end: int, max_ts: int, entries, checkpoint: bytes) -> int:
        """REMOTE_SIZE as the aiven layout's upload has it: the ``.log``, ``.indexes`` and
        ``.rsm-manifest`` objects' sizes.  The manifest's length depends only on how many digits
        its numbers have (every name, id and key is of a fixed length within a partition), so it
        is built once per such shape."""
        t, cfg = self.tiers, self.config
        size = t.batches_per_segment * t.batch_bytes
        n_off, n_time = len(self._index_entries), len(self.time_index_of(base))
        shape = (len(str(base)), len(str(end)), len(str(max_ts)), len(checkpoint), n_time,
                 tuple((len(str(e)), len(str(o))) for e, o in entries))
        manifest = self._manifest_sizes.get(shape)
        if manifest is None:
            _, seg_indexes = aiven_writer.build_indexes(b"\0" * (OFFSET_ENTRY.size * n_off),
                                                        b"\0" * (TIME_ENTRY.size * n_time), b"", checkpoint, None)
            last = size - (-(-size // cfg.chunk_size) - 1) * cfg.chunk_size
            manifest = self._manifest_sizes[shape] = len(aiven.SegmentManifest(
                aiven.ChunkIndex.fixed(cfg.chunk_size, size, cfg.chunk_size, last), seg_indexes, False, None,
                aiven_writer.remote_log_segment_metadata_json(
                    topic=self.topic, topic_id=self.topic_id, partition=self.partition, segment_id=seg_id,
                    start_offset=base, end_offset=end, max_timestamp_ms=max_ts, broker_id=cfg.broker_id,
                    event_timestamp_ms=max_ts, segment_leader_epochs=dict(entries))).to_json())
        return size + n_off * OFFSET_ENTRY.size + n_time * TIME_ENTRY.size + len(checkpoint) + manifest

    # -- what the broker keeps of each copy, from the shape
    def batches(self, meta: RemoteSegmentMetadata) -> list[tuple[int, int, int]]:
        t = self.tiers
        return [(meta.base_offset + (k + 1) * t.records_per_batch - 1, k * t.batch_bytes, t.batch_bytes)
                for k in range(t.batches_per_segment)]

    def offset_index(self, meta: RemoteSegmentMetadata) -> list[tuple[int, int]]:
        return self._index_entries

    def time_index(self, meta: RemoteSegmentMetadata) -> list[tuple[int, int]]:
        return self.time_index_of(meta.base_offset)

    def time_index_of(self, base: int) -> list[tuple[int, int]]:
        """With each offset entry, (the max timestamp so far, its offset) when it grew."""
        out: list[tuple[int, int]] = []
        for rel, _ in self._index_entries:
            ts = self.tiers.timestamp(base + rel)
            if not out or ts > out[-1][0]:
                out.append((ts, rel))
        return out

    def txn_entries(self, meta: RemoteSegmentMetadata) -> list[AbortedTxn]:
        return []           # the synthesized appends hold no transaction

    # -- what needs bytes, or changes the copies: refused by name
    def _no_bytes(self, what: str) -> KafkaTieredError:
        return KafkaTieredError(f"{self.topic}-{self.partition} is a synthesized benchmark partition "
                                f"(testing/synthetic_tiers.py): its copies hold no bytes, so {what}")

    def fetch_range(self, meta, start: int, end: int) -> tuple[bytes, int]:
        raise self._no_bytes("a fetch of tiered records cannot be served (ask for KIP-1248 locations)")

    def offset_for_time(self, ts: int, start: int):
        raise StorageError("KAFKA_STORAGE_ERROR", str(self._no_bytes("no timestamp is searched among them")),
                           topic=self.topic, partition=self.partition)

    def upload(self, *args, **kwargs) -> RemoteSegmentMetadata:
        raise self._no_bytes("no segment is tiered after them")

    def delete(self, gone: list[RemoteSegmentMetadata]) -> list[RemoteSegmentMetadata]:
        if gone:
            raise self._no_bytes("none of them is deleted")
        return []


def synthesize(storage, topic: str, tiers: SyntheticTiers, partitions: list[int] | None = None) -> None:
    """Make ``topic``'s partitions (all, or ``partitions``) synthesized ones: ``tiers.segments``
    copies each, the local log starting at the tiered end with the lineage's leader epochs.
    ``storage`` is a :class:`~.storage.BrokerStorage` (``EmbeddedCluster.storage``) with remote
    storage; the partitions must be empty (nothing appended yet)."""
    info = storage.topic(topic)
    end = tiers.tiered_end
    for p in (range(info.partitions) if partitions is None else partitions):
        part = storage.partition(topic, p)
        with part.tasks, part.lock:
            if part.remote is None:
                raise ConfigError("synthesized tiers need remote_storage", option="remote_storage")
            if len(part.replicas) != 1 or part.log.log_end_offset != 0 or part.remote.serves_any:
                raise ConfigError(f"{topic}-{p} is not empty: only a new partition is synthesized", option="topic")
            log = part.log
            # the local log as tier() and local retention leave it: from the tiered end on
            log.segments[0].delete()
            log.load(end)       # no segment file left: the log starts at the tiered end
            for epoch, start in tiers.leader_epochs:
                log.epochs.assign(epoch, start)
            log.epochs.save()
            part.remote = SyntheticRemotePartition(part.remote, tiers,
                                                   index_interval_bytes=storage.index_interval_bytes)
            part.save()
