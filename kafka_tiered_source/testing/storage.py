"""The embedded broker's storage engine: topics, partition logs, tiering and the read paths.

``BrokerStorage`` is what the network server's handlers call; it does no networking.  Everything
it knows lives in ``data_dir`` (topic ids, partition logs, remote segment metadata and the local
copies of remote indexes), so a new ``BrokerStorage`` on the same directory carries on where the
last one stopped.

Layout of ``data_dir``::

    broker-topics.json                   topics: name, topic id, partition count, config
    {topic}-{partition}/                 Kafka segment files (%020d.log/.index/.timeindex/.txnindex)
    {topic}-{partition}/partition.json   log start offset, leader replica, leader epoch, replicas
    {topic}-{partition}/replica-N/       another replica's segment files (partition.py)
    {topic}-{partition}/remote-log-events.jsonl, remote-indexes/   (tiering.py)
"""
from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import asdict

from ..dataclass import replace
from ..errors import ConfigError, KafkaTieredError
from ..ids import random_uuid, uuid_to_str
# ListOffsets special timestamps: the shared model's constants, which the client sends
from ..model import (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD, LATEST, LATEST_TIERED,
                     MAX_TIMESTAMP)
from ..options.client import READ_COMMITTED
from ..protocol import remote_log_metadata as rlm
from ..records.header import iter_headers
from ..storage.indexes import TXN_ENTRY
from ..redact import Secret
from .answers import (AppendResult, BrokerMetrics, FetchResult, LocationAnswer, PartitionOffsets,
                      TopicInfo)
from .log import (
    NO_TIMESTAMP, AbortedTxn, StorageError,
)
from .remote import S3Options, open_remote_store
from . import copying
from .logconfig import check_broker, check_topic
from .partition import RLMM_TOPIC, Partition
from .rlmm import RemoteLogMetadataWriter
from . import remote_read
from .tiering import (
    LAYOUT_AIVEN, RemotePartition, RemoteSegmentMetadata, TieringConfig,
)

TOPICS_FILE = "broker-topics.json"


class BrokerStorage:
    """Topics and partitions of one single-node broker, on disk in ``data_dir``.

    ``remote_storage``: None (no tiering), ``file:///dir``, ``memory://name`` or
    ``s3://bucket/prefix`` (with ``s3_endpoint_url``, ``s3_region``, credentials).
    ``layout``: ``"aiven"`` or ``"kafka-local-tiered"``.  ``local_retention_bytes`` /
    ``local_retention_ms`` (``log.local.retention.*``; -2: the topic's retention): None for both
    (default) deletes every tiered segment's local copy right after tiering, so reads of tiered
    offsets go remote.  Segments roll by ``segment_bytes``, and ``segment_ms`` if set (:mod:`.logconfig`).
    With remote storage, every copy and deletion is also written to ``__remote_log_metadata``
    (``remote_log_metadata_partitions`` partitions) as today's Kafka does (:mod:`.rlmm`).
    """

    def __init__(self, data_dir: str, *, remote_storage: str | None = None,
                 layout: str = LAYOUT_AIVEN, segment_bytes: int = 1 << 30,
                 index_interval_bytes: int = 4096,
                 local_retention_bytes: int | None = None, local_retention_ms: int | None = None,
                 chunk_compression: bool = False, chunk_size: int = 4 * 1024 * 1024,
                 key_prefix: str = "", presign: bool = False, presign_expiry_s: int = 3600,
                 s3_endpoint_url: str | None = None, s3_region: str | None = None,
                 s3_access_key_id: str | None = None, s3_secret_access_key: str | Secret | None = None,
                 s3_session_token: str | Secret | None = None, broker_id: int = 0,
                 remote_log_metadata_partitions: int = rlm.DEFAULT_PARTITIONS,
                 encryption_key_pair_id: str | None = None, encryption_key_pairs=None,
                 kip1266: bool = False, segment_ms: int | None = None, segment_jitter_ms: int = 0):
        if segment_bytes < 14 + 61:
            raise ConfigError(f"segment_bytes {segment_bytes} is too small", option="segment_bytes")
        check_broker(segment_ms=segment_ms, segment_jitter_ms=segment_jitter_ms,
                     local_retention_ms=local_retention_ms, local_retention_bytes=local_retention_bytes)
        self.segment_ms, self.segment_jitter_ms = segment_ms, segment_jitter_ms
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.local_retention_bytes = local_retention_bytes
        self.local_retention_ms = local_retention_ms
        self.tiering = TieringConfig(layout=layout, key_prefix=key_prefix, chunk_size=chunk_size,
                                     chunk_compression=chunk_compression, presign=presign,
                                     broker_id=broker_id, encryption_key_pair_id=encryption_key_pair_id,
                                     encryption_key_pairs=tuple(dict(encryption_key_pairs or {}).items()))
        self.remote_storage = remote_storage

        def secret(v):
            return v if v is None or isinstance(v, Secret) else Secret(v)
        self.store = open_remote_store(remote_storage, S3Options(
            endpoint_url=s3_endpoint_url, region=s3_region, access_key_id=s3_access_key_id,
            secret_access_key=secret(s3_secret_access_key), session_token=secret(s3_session_token),
            presign_expiry_s=presign_expiry_s)) if remote_storage else None
        self.metrics = BrokerMetrics()
        self._lock = threading.RLock()
        self._topics: dict[str, TopicInfo] = {}
        self._partitions: dict[tuple[str, int], Partition] = {}
        self.rlmm = (RemoteLogMetadataWriter(self._append_metadata, remote_log_metadata_partitions,
                                             broker_id=broker_id, kip1266=kip1266)
                     if self.store is not None else None)
        self._load()
        if self.rlmm is not None and RLMM_TOPIC in self._topics:
            # a restart keeps the partition count the topic was made with
            self.rlmm.partitions = self._topics[RLMM_TOPIC].partitions

    def _append_metadata(self, partition: int, batch: bytes) -> None:
        """Append to ``__remote_log_metadata``, made on the first event (Kafka makes it when the
        broker starts with remote storage; made on demand here, a cluster that never tiers
        shows no extra topic)."""
        if self.rlmm is None:
            raise KafkaTieredError("no remote storage: this broker writes no __remote_log_metadata")
        with self._lock:
            if RLMM_TOPIC not in self._topics:
                self.create_topic(RLMM_TOPIC, self.rlmm.partitions)
        self.append(RLMM_TOPIC, partition, batch)

    # ---------------------------------------------------------------------------- topics
    def _load(self) -> None:
        path = os.path.join(self.data_dir, TOPICS_FILE)
        if not os.path.exists(path):
            return
        with open(path) as f:
            doc = json.load(f)
        for t in doc["topics"]:
            info = TopicInfo(**t)
            self._topics[info.name] = info
            for p in range(info.partitions):
                self._open_partition(info, p)

    def _save_topics(self) -> None:
        path = os.path.join(self.data_dir, TOPICS_FILE)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"version": 1, "topics": [asdict(t) for t in self._topics.values()]}, f, indent=1)
        os.replace(tmp, path)

    def _open_partition(self, info: TopicInfo, p: int) -> Partition:
        part = Partition(self, info, p)
        part.load()
        self._partitions[(info.name, p)] = part
        return part

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo:
        try:
            return self._topics[name]
        except KeyError:
            raise StorageError("UNKNOWN_TOPIC_OR_PARTITION", f"unknown topic {name!r}") from None

    def topic_by_id(self, topic_id: str | bytes) -> TopicInfo:
        tid = uuid_to_str(topic_id) if isinstance(topic_id, (bytes, bytearray)) else topic_id
        for t in self._topics.values():
            if t.topic_id == tid:
                return t
        raise StorageError("UNKNOWN_TOPIC_ID", f"unknown topic id {tid}")

    def create_topic(self, name: str, partitions: int = 1, *, topic_id: str | None = None,
                     log_append_time: bool = False, retention_ms: int | None = None,
                     retention_bytes: int | None = None, local_retention_ms: int | None = None,
                     local_retention_bytes: int | None = None, segment_ms: int | None = None,
                     segment_jitter_ms: int | None = None) -> TopicInfo:
        """A topic; ``retention_ms`` / ``retention_bytes`` are its retention.ms / retention.bytes,
        which :meth:`expire` applies to its tiered copies as RemoteLogManager does; the other
        settings are its local.retention.*, segment.ms and segment.jitter.ms (None: the broker's)."""
        if not name or len(name) > 249 or any(not (c.isalnum() or c in "._-") for c in name) \
                or name in (".", ".."):
            raise StorageError("INVALID_TOPIC", f"invalid topic name {name!r}")
        if partitions < 1:
            raise StorageError("INVALID_PARTITIONS", f"topic {name!r}: partitions must be >= 1, got {partitions}")
        config = dict(retention_ms=retention_ms, retention_bytes=retention_bytes, local_retention_ms=local_retention_ms,
                      local_retention_bytes=local_retention_bytes, segment_ms=segment_ms,
                      segment_jitter_ms=segment_jitter_ms)
        check_topic(name, **config)
        with self._lock:
            if name in self._topics:
                raise StorageError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
            info = TopicInfo(name, topic_id or uuid_to_str(random_uuid()), partitions, log_append_time, **config)
            self._topics[name] = info
            for p in range(partitions):
                self._open_partition(info, p)
            self._save_topics()
            return info

    def partition(self, topic: str, partition: int) -> Partition:
        """The partition's state (its replicas' logs, its tiered copies, its lock)."""
        try:
            return self._partitions[(topic, partition)]
        except KeyError:
            raise StorageError("UNKNOWN_TOPIC_OR_PARTITION", "no such partition",
                               topic=topic, partition=partition) from None

    def ensure_partition(self, topic: str, partition: int) -> Partition:
        """The partition, made first when its topic does not exist or has fewer partitions."""
        with self._lock:
            info = self._topics.get(topic)
            if info is None:
                self.create_topic(topic, partition + 1)
            elif partition >= info.partitions:
                grown = replace(info, partitions=partition + 1)
                self._topics[topic] = grown
                for p in range(info.partitions, partition + 1):
                    self._open_partition(grown, p)
                self._save_topics()
            return self.partition(topic, partition)

    def import_log_dir(self, topic: str, partition: int, path: str) -> PartitionOffsets:
        """Adopt Kafka segment files (``*.log`` with their ``.txnindex``) as the partition's log
        (see :func:`.importing.import_log_dir`)."""
        from .importing import import_log_dir
        return import_log_dir(self, topic, partition, path)

    def delete_topic(self, name: str) -> TopicInfo:
        """Delete a topic as Kafka's DeleteTopics does: it vanishes from metadata at once (later
        requests get UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID), its local logs are removed
        and its tiered segments are deleted from remote storage."""
        with self._lock:
            info = self.topic(name)
            parts = [self._partitions.pop((name, p)) for p in range(info.partitions)]
            del self._topics[name]
            self._save_topics()
        for part in parts:
            with part.tasks, part.lock:       # after a running RemoteLogManager task on it
                if part.remote is not None:
                    part.remote.delete(part.remote.segments)
                    if self.rlmm is not None:       # there is one wherever there is remote storage
                        self.rlmm.partition_deleted(name, info.topic_id, part.partition,
                                                    part.log.epochs.latest, part.log.log_end_offset)
                shutil.rmtree(part.dir, ignore_errors=True)
        return info

    # ---------------------------------------------------------------------------- writes
    def append(self, topic: str, partition: int, records: bytes) -> AppendResult:
        """Append a Produce request's record batches.  Raises :class:`StorageError`
        (CORRUPT_MESSAGE, UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_RECORD,
        OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION)."""
        part = self.partition(topic, partition)
        with part.lock:
            (base, last, lat), written = part.log.append_leader(records)
            part.replicate(written)
            return AppendResult(base, last, lat, part.log_start_offset)

    def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                         commit: bool, coordinator_epoch: int) -> int:
        """Write a COMMIT or ABORT marker (what EndTxn's WriteTxnMarkers does); returns its offset."""
        part = self.partition(topic, partition)
        with part.lock:
            offset, batch = part.log.write_txn_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch)
            part.replicate(batch)
            return offset

    def roll(self, topic: str, partition: int, replica: int | None = None) -> None:
        """Close the active segment now (if it holds data), so tier() may copy it: the leader's,
        or that of ``replica`` (replicas roll at offsets of their own)."""
        part = self.partition(topic, partition)
        with part.lock:
            (part.log if replica is None else part.replicas[replica]).roll()

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Kafka's DeleteRecords: advance the log start offset to ``before_offset`` (at most the
        high watermark) and drop the whole segments, local and tiered, that lie below it.
        Returns the new log start offset; reads below it get OFFSET_OUT_OF_RANGE."""
        part = self.partition(topic, partition)
        with part.lock:
            o = part.offsets()
            if not 0 <= before_offset <= o.high_watermark:
                raise StorageError("OFFSET_OUT_OF_RANGE",
                                   f"delete_records: offset {before_offset} is outside [0, "
                                   f"{o.high_watermark}]", topic=topic, partition=partition)
            if before_offset <= part.log_start_offset:
                return part.log_start_offset
            part.move_log_start(before_offset)
            if part.remote is not None:
                part.remote.delete_below(before_offset)
            return part.log_start_offset

    def compact(self, topic: str, partition: int, *, remove_tombstones: bool = True) -> int:
        """One LogCleaner round on every replica (:func:`.cleaner.compact`, ``remove_tombstones``:
        delete.retention.ms passed); tiered segments are left alone.  Returns the records removed."""
        from .cleaner import compact
        part = self.partition(topic, partition)
        with part.lock:
            tiered = part.remote.highest_offset if part.remote is not None else -1
            return max(compact(log, remove_tombstones=remove_tombstones, tiered_end=tiered)
                       for log in part.replicas)

    def unclean_leader_election(self, topic: str, partition: int, log_end_offset: int,
                                replica: int | None = None) -> int:
        """Replica ``replica`` (default: the leader), its log ending at ``log_end_offset``, becomes
        leader uncleanly (:func:`.election.unclean_election`; a refusal changes nothing).  Returns
        the new epoch."""
        from .election import unclean_election
        part = self.partition(topic, partition)
        with part.lock:
            return unclean_election(part, log_end_offset, replica)

    # ---------------------------------------------------------------------------- leader epochs
    def bump_leader_epoch(self, topic: str, partition: int) -> int:
        """A leadership change back to the same replica: a new leader epoch from the log end
        offset on, which every batch written afterwards carries.  Returns the new epoch."""
        part = self.partition(topic, partition)
        with part.lock:
            return part.move_leader(part.leader)

    def add_replica(self, topic: str, partition: int, *, segment_bytes: int | None = None) -> int:
        """Another replica of the partition, in sync, rolling its segments at ``segment_bytes``
        (default: the broker's) rather than where the leader rolls; returns its number."""
        part = self.partition(topic, partition)
        with part.lock:
            return part.add_replica(segment_bytes or self.segment_bytes)

    def move_leader(self, topic: str, partition: int, replica: int) -> int:
        """A clean leadership change to ``replica`` with a new leader epoch; from then on its log
        is read and tiered: its copies start at its own segment holding the highest copied
        offset + 1 (RemoteLogManager.copyLogSegmentsToRemote).  Returns the new epoch."""
        part = self.partition(topic, partition)
        with part.lock:
            return part.move_leader(replica)

    def leader(self, topic: str, partition: int) -> int:
        """The replica leading the partition."""
        return self.partition(topic, partition).leader

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.partition(topic, partition).epoch

    def epoch_for_offset(self, topic: str, partition: int, offset: int) -> int:
        return self.partition(topic, partition).log.epochs.epoch_for(offset)

    def end_offset_for_epoch(self, topic: str, partition: int, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: the largest epoch <= ``epoch`` and where it ends."""
        part = self.partition(topic, partition)
        with part.lock:
            return part.log.epochs.end_offset_for(epoch, part.log.log_end_offset)

    def upload_segment_copy(self, topic: str, partition: int, data: bytes, *, live: bool = False,
                            end_offset: int | None = None):
        """Upload ``data`` (consecutive batches) as another copy of a tiered segment, announced in
        ``__remote_log_metadata``; its leader epochs are those its batches carry, its end offset
        ``end_offset`` (default: its last batch's).  With ``live=False`` (the default) this
        broker's own cache does not learn it: it stands for an upload by a replica whose epochs
        are off the leader-epoch lineage (an unclean leader's re-upload).  With ``live=True``
        the broker serves from it where Kafka's RemoteLogMetadataCache would."""
        part = self.partition(topic, partition)
        if part.remote is None:
            raise ConfigError("upload_segment_copy needs remote_storage", option="remote_storage")
        with part.lock:
            headers = list(iter_headers(data))
            base, last = headers[0].base_offset, headers[-1].last_offset
            # its transaction index: the aborted transactions whose markers it holds, as the
            # uploading replica's own .txnindex has them
            known = {e for m in part.remote.copies.values() for e in part.remote.txn_entries(m)}
            known |= {e for seg in part.log.segments for e in seg.txn_entries}
            txn = b"".join(TXN_ENTRY.pack(0, *e) for e in sorted(known, key=lambda e: e.last_offset)
                           if base <= e.last_offset <= last)
            return part.remote.upload(data, base, txn, live=live, end_offset=end_offset)

    def open_transactions(self, topic: str, partition: int) -> dict[int, int]:
        """Producer id -> first offset of each open transaction."""
        return self.partition(topic, partition).log.open_transactions()

    # ---------------------------------------------------------------------------- reads
    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return self.partition(topic, partition).offsets()

    def read(self, topic: str, partition: int, offset: int, max_bytes: int,
             isolation_level: int = 0, *, client_id: str | None = None) -> FetchResult:
        """Whole batches from ``offset`` (at least one, then as many as fit ``max_bytes``),
        bounded by the HW (read_uncommitted) or the LSO (read_committed).  Offsets that only
        remote storage holds are fetched from it, as Kafka's RemoteLogManager does."""
        part = self.partition(topic, partition)
        committed = isolation_level == READ_COMMITTED
        with part.lock:
            o = part.offsets()
            bound = o.last_stable_offset if committed else o.high_watermark

            def answer(records=b"", aborted=None, error=None, remote=False, message=None):
                return FetchResult(records, o.high_watermark, o.last_stable_offset, o.log_start_offset,
                                   (aborted if aborted is not None else []) if committed and not error else None,
                                   error, remote, message)

            if offset < o.log_start_offset:
                return answer(error="OFFSET_OUT_OF_RANGE",
                              message=f"offset {offset} is below the log start offset {o.log_start_offset}")
            if offset > o.log_end_offset:
                return answer(error="OFFSET_OUT_OF_RANGE",
                              message=f"offset {offset} is past the log end offset {o.log_end_offset}")
            if offset >= bound:
                return answer()
            if offset < o.local_log_start_offset and part.remote is not None and part.remote.serves_any:
                t0 = time.perf_counter()
                try:
                    r = remote_read.read(part.remote, offset, max_bytes)
                except remote_read.RemoteNotFound as exc:
                    # RemoteLogManager.read: OffsetOutOfRangeException, "does not exist in remote tier"
                    return answer(error="OFFSET_OUT_OF_RANGE", message=str(exc))
                except KafkaTieredError as exc:
                    # Kafka answers a failed remote fetch with a storage error on that partition
                    self.metrics.add("remote_fetch_errors_total", client_id, topic)
                    return answer(error="KAFKA_STORAGE_ERROR", message=str(exc))
                finally:
                    self.metrics.add("remote_fetch_latency_seconds_sum", client_id, topic,
                                     time.perf_counter() - t0)
                self.metrics.add("remote_fetch_requests_total", client_id, topic)
                self.metrics.add("remote_fetch_bytes_total", client_id, topic, r.bytes_fetched)
                aborted = None          # no records (compacted away): an empty list, no error
                if committed and r.records:
                    aborted = self._aborted(part, part.remote, offset, r.next_offset, r.segment)
                return answer(r.records, aborted, remote=True)
            if offset < o.local_log_start_offset:
                return answer(error="OFFSET_OUT_OF_RANGE",
                              message=f"offset {offset} is neither in remote storage nor local "
                                      f"(local log starts at {o.local_log_start_offset})")
            lr = part.log.read(offset, max_bytes, bound)
            aborted = None
            if committed and lr.records:
                got, _ = part.log.aborted_local(offset, lr.upper_bound, part.log.segment_for(offset) or 0)
                aborted = [(a.producer_id, a.first_offset) for a in got]
            return answer(lr.records, aborted)

    def _aborted(self, part: Partition, remote: RemotePartition, offset: int, upper: int,
                 start_meta: RemoteSegmentMetadata) -> list[tuple[int, int]]:
        """Aborted transactions overlapping [offset, upper) from the txn indexes of the remote
        segment holding ``offset``, the copies serving later offsets, then local segments
        (Kafka's RemoteLogManager.collectAbortedTransactions)."""
        got, complete = remote.aborted(offset, upper, start_meta)
        if not complete:
            # local segments that overlap remote ones would repeat entries: skip those
            local_from = 0
            segs = part.log.segments
            highest = remote.highest_offset
            while local_from < len(segs) and segs[local_from].base_offset <= highest:
                local_from += 1
            more, _ = part.log.aborted_local(offset, upper, local_from)
            got = got + more
        return [(a.producer_id, a.first_offset) for a in got]

    def locate(self, topic: str, partition: int, offset: int, max_bytes: int,
               isolation_level: int = 0, *, client_id: str | None = None) -> LocationAnswer | None:
        """KIP-1248: the remote segment and byte range holding ``offset``, or None when the
        offset is not served only from remote storage (then answer with an ordinary fetch)."""
        part = self.partition(topic, partition)
        with part.lock:
            o = part.offsets()
            if part.remote is None or not part.remote.serves_any:
                return None
            if not (o.log_start_offset <= offset < o.local_log_start_offset):
                return None
            h = remote_read.location(part.remote, offset, max_bytes)
            if h is None:
                return None         # answered as a fetch: OFFSET_OUT_OF_RANGE (RemoteLogManager.read)
            meta, start, end = h.segment, h.start, h.end
            aborted = None
            if isolation_level == READ_COMMITTED:
                aborted = [] if h.next_offset is None else \
                    self._aborted(part, part.remote, offset, h.next_offset, meta)
            url = part.remote.presign(meta)
            self.metrics.granted(client_id, topic, 1, end - start)
            # the end offset: the copy's, unless an unclean election cut the lineage inside it
            return LocationAnswer(
                topic=topic, topic_id=part.topic.topic_id_bytes, partition=partition,
                segment_id=meta.segment_id_bytes, custom_metadata=meta.custom_metadata_bytes,
                start_position=start, end_position=end, base_offset=meta.base_offset,
                end_offset=h.lineage_end - 1, size_bytes=meta.size_bytes,
                high_watermark=o.high_watermark, last_stable_offset=o.last_stable_offset,
                log_start_offset=o.log_start_offset, aborted=aborted, object_key=meta.log_key,
                presigned_url=url)

    def remote_segments(self, topic: str, partition: int) -> list[RemoteSegmentMetadata]:
        part = self.partition(topic, partition)
        with part.lock:
            return list(part.remote.segments) if part.remote else []

    def list_offsets(self, topic: str, partition: int, timestamp: int,
                     isolation_level: int = 0) -> tuple[int, int]:
        """(offset, timestamp) for a ListOffsets query; (-1, -1) when there is no answer."""
        part = self.partition(topic, partition)
        with part.lock:
            o = part.offsets()
            if timestamp == LATEST:
                return (o.last_stable_offset if isolation_level == READ_COMMITTED else o.high_watermark,
                        NO_TIMESTAMP)
            if timestamp == EARLIEST:
                return o.log_start_offset, NO_TIMESTAMP
            if timestamp == EARLIEST_LOCAL:
                return max(o.local_log_start_offset, o.log_start_offset), NO_TIMESTAMP
            if timestamp == LATEST_TIERED:
                return o.highest_tiered_offset, NO_TIMESTAMP
            if timestamp == EARLIEST_PENDING_UPLOAD:
                if part.remote is None:
                    return -1, NO_TIMESTAMP
                first = o.highest_tiered_offset + 1 if o.highest_tiered_offset >= 0 else o.local_log_start_offset
                return (first, NO_TIMESTAMP) if first < o.log_end_offset else (-1, NO_TIMESTAMP)
            if timestamp == MAX_TIMESTAMP:
                return self._max_timestamp(part)
            if timestamp < 0:
                raise StorageError("INVALID_REQUEST",
                                   f"unknown ListOffsets timestamp {timestamp}", topic=topic, partition=partition)
            return self._offset_for_time(part, timestamp)

    def _batch_bytes_local(self, seg, h) -> bytes:
        return seg.read_bytes(h.position, h.end)

    def _offset_for_time(self, part: Partition, ts: int) -> tuple[int, int]:
        found = None
        if part.remote is not None:
            r = part.remote.offset_for_time(ts, part.log_start_offset)
            if r is not None:
                found = r[2]
        if found is None:
            hit = part.log.batch_at_or_after_time(ts)
            if hit is not None:
                found = self._batch_bytes_local(*hit)
        if found is None:
            return -1, NO_TIMESTAMP
        for off, rts in record_timestamps(found):
            if rts >= ts and off >= part.log_start_offset:
                return off, rts
        return -1, NO_TIMESTAMP

    def _max_timestamp(self, part: Partition) -> tuple[int, int]:
        best = None     # (max ts, batch bytes)
        highest = part.remote.highest_offset if part.remote is not None else -1
        if part.remote is not None:
            for meta in part.remote.chain(part.log_start_offset):
                if best is None or meta.max_timestamp > best[0]:
                    best = (meta.max_timestamp, ("remote", meta))
        for seg in part.log.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best[0]) \
                    and seg.base_offset > highest:
                best = (seg.max_timestamp, ("local", seg))
        if best is None or best[0] < 0:
            return -1, NO_TIMESTAMP
        ts, (kind, where) = best
        if kind == "remote":
            remote = part.remote      # a remote best means there is one
            hit = remote.offset_for_time(ts, part.log_start_offset) if remote is not None else None
            data = hit[2] if hit else None
        else:
            h = next((h for h in where.headers_from(0) if h.max_timestamp == ts), None)
            data = where.read_bytes(h.position, h.end) if h else None
        if data is None:
            return -1, NO_TIMESTAMP
        for off, rts in record_timestamps(data):
            if rts == ts:
                return off, rts
        return -1, NO_TIMESTAMP

    # ---------------------------------------------------------------------------- tiering
    def tiered_partitions(self, topic: str | None = None) -> list[Partition]:
        with self._lock:        # those with remote storage (all but __remote_log_metadata's)
            return [part for (name, _), part in sorted(self._partitions.items())
                    if (topic is None or name == topic) and part.remote is not None]

    def tier(self, topic: str | None = None) -> list[RemoteSegmentMetadata]:
        """Copy what RemoteLogManager.copyLogSegmentsToRemote copies, then apply local retention
        on every replica (:func:`.copying.tier`).  Returns the metadata of the copies made now."""
        if self.store is None:
            raise ConfigError("tier() needs remote_storage", option="remote_storage")
        return copying.tier(self, self.tiered_partitions(topic))

    def expire(self, topic: str | None = None, *, now_ms: int | None = None) -> list[RemoteSegmentMetadata]:
        """Remote retention as RemoteLogManager's expiration task applies it
        (:func:`.copying.expire`) to partitions whose topic sets ``retention_ms`` /
        ``retention_bytes``.  Returns the copies deleted."""
        return copying.expire(self, self.tiered_partitions(topic),
                              int(time.time() * 1000) if now_ms is None else now_ms)

    def close(self) -> None:
        """Nothing stays open between calls; kept so owners can treat storage as a resource."""


def record_timestamps(batch: bytes):
    """(offset, timestamp ms) of every record of one batch (any codec), control records included:
    Kafka's timestamp search iterates a control batch's record like any other
    (``FileRecords.searchForTimestamp``), so a marker can be ListOffsets' answer.  LogAppendTime
    batches give the batch's max timestamp, as Kafka does."""
    from ..records.timestamps import record_timestamps as _stamps
    yield from _stamps(batch)


__all__ = [
    "BrokerStorage", "TopicInfo", "AppendResult", "FetchResult", "LocationAnswer",
    "PartitionOffsets", "BrokerMetrics", "StorageError", "AbortedTxn",
    "LATEST", "EARLIEST", "MAX_TIMESTAMP", "EARLIEST_LOCAL", "LATEST_TIERED",
    "EARLIEST_PENDING_UPLOAD",
]
