"""One topic-partition of the embedded broker: its replicas' logs, which replica leads, the
leader epoch, the log start offset and the remote half all replicas share."""
from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING

from ..protocol import remote_log_metadata as rlm
from .answers import PartitionOffsets, TopicInfo
from .log import PartitionLog, StorageError
from .tiering import RemotePartition

if TYPE_CHECKING:
    from .storage_view import StorageView

RLMM_TOPIC = rlm.TOPIC


class Partition:
    """One topic-partition: its replicas' logs (replica 0 in the partition directory, others in
    ``replica-N`` under it, each rolling at its own segment size), which one leads, the current
    leader epoch, the log start offset and the remote half shared by all replicas."""

    def __init__(self, storage: "StorageView", topic: TopicInfo, partition: int):
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.dir = os.path.join(storage.data_dir, f"{topic.name}-{partition}")
        self.lock = threading.RLock()
        # held for a whole RemoteLogManager task on this partition (copy or expiration, scheduled
        # or by hand), outside ``lock``: Kafka runs one partition's tasks one at a time
        self.tasks = threading.RLock()
        self.replicas: list[PartitionLog] = [self._replica_log(0, storage.segment_bytes)]
        self.replica_segment_bytes: list[int] = [storage.segment_bytes]
        self.leader = 0
        self._epoch = 0              # the controller's leader epoch of the partition
        # __remote_log_metadata itself is never tiered (as in Kafka)
        self.remote = (RemotePartition(self.dir, topic=topic.name, topic_id=topic.topic_id,
                                       partition=partition, store=storage.store, config=storage.tiering,
                                       events=storage.rlmm, leader_epoch=lambda: self.epoch,
                                       leader_log=lambda: self.log)
                       if storage.store is not None and topic.name != RLMM_TOPIC else None)
        self.log_start_offset = 0
        self._state_path = os.path.join(self.dir, "partition.json")

    def _replica_log(self, i: int, segment_bytes: int) -> PartitionLog:
        t, s = self.topic, self.storage
        return PartitionLog(self.dir if i == 0 else os.path.join(self.dir, f"replica-{i}"),
                            topic=t.name, partition=self.partition, segment_bytes=segment_bytes,
                            interval=s.index_interval_bytes, log_append_time=t.log_append_time,
                            segment_ms=s.segment_ms if t.segment_ms is None else t.segment_ms,
                            segment_jitter_ms=s.segment_jitter_ms if t.segment_jitter_ms is None else t.segment_jitter_ms)

    @property
    def log(self) -> PartitionLog:
        """The leader's log: what clients read and what is tiered."""
        return self.replicas[self.leader]

    @property
    def followers(self) -> list[PartitionLog]:
        return [r for i, r in enumerate(self.replicas) if i != self.leader]

    def load(self) -> None:
        state = {}
        if os.path.exists(self._state_path):
            with open(self._state_path) as f:
                state = json.load(f)
        start = state.get("log_start_offset", 0)
        for i, seg_bytes in enumerate(state.get("replicas", [])[1:], start=1):
            self.replicas.append(self._replica_log(i, seg_bytes))
            self.replica_segment_bytes.append(seg_bytes)
        self.leader = state.get("leader", 0)
        for r in self.replicas:
            r.load(start)
        self.log_start_offset = state.get("log_start_offset", self.log.local_start_offset)
        self._epoch = max([state.get("epoch", 0)] + [r.epochs.latest for r in self.replicas])
        self.save()

    @property
    def epoch(self) -> int:
        """The current leader epoch (an imported log brings its own)."""
        return max(self._epoch, self.log.epochs.latest)

    def save(self) -> None:
        tmp = self._state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"log_start_offset": self.log_start_offset, "leader": self.leader, "epoch": self.epoch,
                       "replicas": self.replica_segment_bytes}, f)
        os.replace(tmp, self._state_path)

    def offsets(self) -> PartitionOffsets:
        with self.lock:         # the RemoteLogManager's tasks change it from their threads
            leo = self.log.log_end_offset
            return PartitionOffsets(self.log_start_offset, self.log.local_start_offset, leo,
                                    self.log.last_stable_offset, leo,
                                    self.remote.highest_offset if self.remote else -1)

    # -- replicas
    def add_replica(self, segment_bytes: int) -> int:
        """A follower that has caught up: it starts at the leader's local log start (the older
        offsets are remote: Kafka's follower builds that state from the remote leader-epoch
        checkpoint, ReplicaFetcherTierStateMachine) and replicates the leader's local batches."""
        i = len(self.replicas)
        follower = self._replica_log(i, segment_bytes)
        leader = self.log
        follower.load(leader.local_start_offset)
        follower.epochs.entries = list(leader.epochs.entries)
        follower.epochs.truncate_from_start(leader.local_start_offset)
        follower.epochs.save()
        for seg in leader.segments:
            for h in seg.headers_from(0):
                follower.append_replicated(seg.read_bytes(h.position, h.end))
        self.replicas.append(follower)
        self.replica_segment_bytes.append(segment_bytes)
        self.save()
        return i

    def move_leader(self, replica: int) -> int:
        """A leadership change to ``replica`` (a follower in sync: a clean election) with a new
        leader epoch from its log end offset (Partition.makeLeader); returns the epoch."""
        if not 0 <= replica < len(self.replicas):
            raise StorageError("NOT_LEADER_OR_FOLLOWER", f"no replica {replica} (replicas 0-{len(self.replicas) - 1})",
                               topic=self.topic.name, partition=self.partition)
        new = self.replicas[replica]
        if new.log_end_offset != self.log.log_end_offset:
            raise StorageError("NOT_LEADER_OR_FOLLOWER", f"replica {replica} is not in sync (log end offset "
                               f"{new.log_end_offset}, leader's {self.log.log_end_offset})",
                               topic=self.topic.name, partition=self.partition)
        self._epoch = self.epoch + 1
        self.leader = replica
        if new.epochs.assign(self.epoch, new.log_end_offset):
            new.epochs.save()
        self.save()
        return self.epoch

    def set_leader(self, replica: int, epoch: int) -> None:
        """``replica`` leads from now on, in leader epoch ``epoch`` (an unclean election:
        :mod:`.election` has truncated the logs and assigned the epoch)."""
        self._epoch = epoch
        self.leader = replica
        self.save()

    def replicate(self, data: bytes | None) -> None:
        if data:
            for r in self.followers:
                r.append_replicated(data)

    def move_log_start(self, offset: int) -> None:
        """The log start offset moves up to ``offset``: local segments below it go on every
        replica, and their leader-epoch caches are truncated from the start (UnifiedLog.
        maybeIncrementLogStartOffset)."""
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.save()
        for r in self.replicas:
            r.delete_segments_before(offset)
            r.epochs.truncate_from_start(offset)
