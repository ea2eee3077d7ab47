"""A synchronous Kafka broker client: just what the tiered reader needs.

Bootstrap, ApiVersions negotiation (highest common version), a metadata cache with topic ids,
routing to partition leaders, ListOffsets and sessionless Fetch (optionally with the KIP-1248
tags), PLAINTEXT/SSL/SASL_PLAINTEXT/SASL_SSL with PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER
(TLS stores, tokens and re-authentication: ``tls.py``, ``oauth.py``, ``connection.py``).

Threading: one connection per broker, reused, with one request in flight at a time (the
connection lock is held from send to receive), so the client can be shared by threads.  The
correlation id of every response is checked; a mismatch or a closed socket drops the
connection and the request is retried on a fresh one.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from ..errors import BrokerError
from ..model import EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD, LATEST_TIERED, MAX_TIMESTAMP
from ..options.client import IGNORED_KEYS, READ_COMMITTED, READ_UNCOMMITTED, ClientConfig
from . import kip1248, messages as m
from .errors import broker_error
from .connection import NETWORK_EXCEPTION, UNSUPPORTED_VERSION, BrokerConnection, ConnectionLost

log = logging.getLogger(__name__)

# The configuration is the options layer's (Kafka's property names are rows of the option table);
# it is re-exported because it is the client's public interface.
__all__ = ["BrokerClient", "BrokerConnection", "BrokerNode", "ClientConfig", "FetchResult", "IGNORED_KEYS",
           "ListedOffset", "PartitionInfo", "READ_COMMITTED", "READ_UNCOMMITTED", "TopicInfo"]

# ListOffsets version needed by each special timestamp (KIP-734, KIP-1005, KIP-1023).
_SPECIAL_TIMESTAMP_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                                  EARLIEST_PENDING_UPLOAD: 11}
ZERO_UUID = bytes(16)


# --- results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple
    isr: tuple
    error_code: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: bytes
    partitions: dict  # partition -> PartitionInfo
    error_code: int = 0


@dataclass(frozen=True)
class ListedOffset:
    partition: int
    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True)
class FetchResult:
    """One partition's fetch answer.  ``partition`` is the decoded
    ``FetchResponse.PartitionData`` (``records`` is a memoryview into the response frame,
    KIP-1248 fields included); ``kip1248_requested`` says whether the tags were sent."""

    topic: str
    partition_index: int
    partition: object
    version: int
    broker: str
    kip1248_requested: bool
    throttle_time_ms: int = 0     # the broker's quota throttle (KIP-13); already waited out

    @property
    def records(self):
        return self.partition.records

    @property
    def has_remote_location(self) -> bool:
        return kip1248.has_remote_location(self.partition)


class BrokerClient:
    """Synchronous client over a set of brokers.  ``BrokerClient(ClientConfig | dict)``."""

    def __init__(self, config):
        if isinstance(config, dict):
            config = ClientConfig.from_properties(config)
        self.config = config
        self._lock = threading.RLock()
        self._conns: dict = {}         # node id -> BrokerConnection
        self._bootstrap: list = [BrokerConnection(h, p, config) for h, p in config.bootstrap_servers]
        self._brokers: dict = {}       # node id -> BrokerNode
        self._topics: dict = {}        # name -> TopicInfo
        self._ids: dict = {}           # topic id -> name
        self._metadata_at = 0.0
        self.cluster_id = None
        self.controller_id = None

    def __repr__(self):
        return f"BrokerClient({[f'{h}:{p}' for h, p in self.config.bootstrap_servers]})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with self._lock:
            for c in list(self._conns.values()) + self._bootstrap:
                c.close()
            self._conns.clear()

    # -- plumbing

    def _backoff(self, attempt: int):
        cfg = self.config
        delay = min(cfg.retry_backoff_ms * (2 ** attempt), cfg.retry_backoff_max_ms) / 1000
        time.sleep(delay * random.uniform(0.8, 1.2))

    def _any_connection(self) -> BrokerConnection:
        """A connected broker: a known one first, else the bootstrap list in order."""
        with self._lock:
            candidates = [c for c in self._conns.values() if c.connected] + list(self._conns.values())
        candidates += self._bootstrap
        last = None
        for conn in candidates:
            try:
                conn.ensure_connected()
                return conn
            except (BrokerError, ConnectionLost) as exc:
                if isinstance(exc, BrokerError) and not exc.retriable:
                    raise
                last = exc
        raise BrokerError(f"no broker reachable ({last})", broker=",".join(c.address for c in self._bootstrap),
                          retriable=True)

    def connection(self, node_id: int) -> BrokerConnection:
        with self._lock:
            conn = self._conns.get(node_id)
            node = self._brokers.get(node_id)
            if conn is not None and node is not None and (conn.host, conn.port) != (node.host, node.port):
                conn.close()  # the broker moved
                conn = None
            if conn is None:
                if node is None:
                    raise BrokerError(f"broker {node_id} is not in the metadata", retriable=True,
                                      error_code=5, error_name="LEADER_NOT_AVAILABLE")
                conn = BrokerConnection(node.host, node.port, self.config, node_id=node_id)
                self._conns[node_id] = conn
            return conn

    def _with_retries(self, api: str, fn, *, topic=None, partition=None):
        """Run ``fn()``; on retriable errors back off, refresh metadata when it is stale, retry."""
        attempt = 0
        while True:
            try:
                return fn()
            except ConnectionLost as exc:
                err = BrokerError(f"connection lost: {exc}", error_code=NETWORK_EXCEPTION,
                                  error_name="NETWORK_EXCEPTION", retriable=True, api=api,
                                  topic=topic, partition=partition)
                err.refresh_metadata = True
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                err = exc
            if attempt >= self.config.retries:
                raise err
            log.debug("retrying %s after %s (attempt %d)", api, err, attempt + 1)
            self._backoff(attempt)
            attempt += 1
            if getattr(err, "refresh_metadata", False) or err.error_code in (None, NETWORK_EXCEPTION):
                self._metadata_at = 0.0  # force a refresh before the next routing decision

    # -- metadata

    def metadata(self, topics: Iterable[str] | None = None, *, topic_ids: Iterable[bytes] = ()):
        """Fetch metadata (all topics when ``topics`` is None and no ids are given), update the
        cache and return the decoded ``MetadataResponse``."""
        names = None if topics is None else list(topics)
        ids = list(topic_ids)

        def run():
            conn = self._any_connection()
            version = conn.pick_version(m.MetadataRequest, at_least=1)
            if ids and version < 12:
                raise broker_error(UNSUPPORTED_VERSION, broker=conn.address, api="Metadata",
                                   detail="look-up by topic id needs Metadata v12+")
            if names is None and not ids:
                req_topics = None
            else:
                req_topics = [m.MetadataRequest.MetadataRequestTopic(name=n) for n in names or ()]
                req_topics += [m.MetadataRequest.MetadataRequestTopic(topic_id=i, name=None) for i in ids]
            req = m.MetadataRequest(topics=req_topics, allow_auto_topic_creation=False)
            resp = conn.request(req, version)
            self._absorb_metadata(resp)
            return resp

        return self._with_retries("Metadata", run)

    def _absorb_metadata(self, resp):
        with self._lock:
            self._brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
            self.cluster_id = resp.cluster_id
            self.controller_id = resp.controller_id
            for t in resp.topics:
                name = t.name if t.name is not None else self._ids.get(t.topic_id)
                if name is None:
                    continue
                if t.error_code:
                    self._topics.pop(name, None)
                    continue
                parts = {p.partition_index: PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch,
                                                          tuple(p.replica_nodes), tuple(p.isr_nodes), p.error_code)
                         for p in t.partitions}
                self._topics[name] = TopicInfo(name, t.topic_id, parts)
                if t.topic_id != ZERO_UUID:
                    self._ids[t.topic_id] = name
            self._metadata_at = time.monotonic()

    def _stale(self) -> bool:
        return (not self._metadata_at or
                time.monotonic() - self._metadata_at > self.config.metadata_max_age_ms / 1000)

    def topic(self, name_or_id, *, refresh: bool = False) -> TopicInfo:
        """Cached topic metadata by name or by 16-byte topic id (fetched when missing/stale)."""
        by_id = isinstance(name_or_id, (bytes, bytearray))
        with self._lock:
            name = self._ids.get(bytes(name_or_id)) if by_id else name_or_id
            info = self._topics.get(name) if name else None
        if info is None or refresh or self._stale():
            resp = self.metadata(topic_ids=[bytes(name_or_id)]) if by_id else self.metadata([name_or_id])
            for t in resp.topics:
                if (by_id and t.topic_id == bytes(name_or_id)) or (not by_id and t.name == name_or_id):
                    if t.error_code:
                        raise broker_error(t.error_code, api="Metadata",
                                           topic=t.name or str(name_or_id))
            with self._lock:
                name = self._ids.get(bytes(name_or_id)) if by_id else name_or_id
                info = self._topics.get(name) if name else None
            if info is None:
                raise broker_error(3 if not by_id else 100, api="Metadata", topic=str(name_or_id))
        return info

    def _topic_name(self, topic) -> str:
        """Routing works by name or by 16-byte topic id."""
        if isinstance(topic, (bytes, bytearray)):
            return self.topic(bytes(topic)).name
        return topic

    def leader(self, topic, partition: int) -> BrokerConnection:
        topic = self._topic_name(topic)
        info = self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            info = self.topic(topic, refresh=True)
            p = info.partitions.get(partition)
            if p is None:
                raise broker_error(3, api="Metadata", topic=topic, partition=partition,
                                   detail=f"topic has {len(info.partitions)} partitions")
        if p.error_code or p.leader < 0:
            raise broker_error(p.error_code or 5, api="Metadata", topic=topic, partition=partition)
        return self.connection(p.leader)

    def supported_versions(self, node_id: int | None = None) -> dict:
        """Negotiated ``{api name: highest common version}`` for a broker (any when None)."""
        conn = self._any_connection() if node_id is None else self.connection(node_id)
        conn.ensure_connected()
        out = {}
        for key, req in m.REQUESTS.items():
            v = conn.max_version(req)
            if v is not None:
                out[m.api_name(key)] = v
        return out

    def fetch_version(self, topic, partition: int) -> int:
        """The Fetch version this client would use against the partition's leader."""
        topic = self._topic_name(topic)
        conn = self.leader(topic, partition)
        conn.ensure_connected()
        return self._fetch_version(conn, self.topic(topic))

    def advertises_kip1248(self, topic: str, partition: int) -> bool:
        """True when the leader advertises the KIP-1248 feature in ApiVersions: it answers the
        location tags (see :data:`kip1248.FEATURE`)."""
        conn = self.leader(topic, partition)
        conn.ensure_connected()
        lo, hi = conn.features.get(kip1248.FEATURE, (0, -1))
        return lo <= kip1248.FEATURE_VERSION <= hi and self.supports_kip1248(topic, partition)

    def supports_kip1248(self, topic: str, partition: int) -> bool:
        """False when the leader's highest common Fetch version is below 12: no tagged field can
        be sent, so direct reads of tiered segments cannot be asked for."""
        return self.fetch_version(topic, partition) >= kip1248.MIN_FETCH_VERSION

    @staticmethod
    def _fetch_version(conn: BrokerConnection, info: TopicInfo) -> int:
        at_most = None
        if info.topic_id == ZERO_UUID:
            at_most = 12  # v13+ address topics by id only
        return conn.pick_version(m.FetchRequest, at_most=at_most)

    # -- ListOffsets

    def list_offsets(self, topic, timestamps: dict, *, isolation_level: int | None = None) -> dict:
        """``{partition: timestamp}`` -> ``{partition: ListedOffset}``.  Timestamps: ms since the
        epoch, or EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), EARLIEST_LOCAL (-4),
        LATEST_TIERED (-5), EARLIEST_PENDING_UPLOAD (-6) where the broker's version allows."""
        topic = self._topic_name(topic)
        iso = self.config.isolation_level if isolation_level is None else isolation_level
        need = max([_SPECIAL_TIMESTAMP_MIN_VERSION.get(ts, 1) for ts in timestamps.values()] + [2 if iso else 1])
        result: dict = {}
        pending = dict(timestamps)

        def run():
            by_leader: dict = {}
            for p, ts in pending.items():
                by_leader.setdefault(self.leader(topic, p), {})[p] = ts
            for conn, parts in by_leader.items():
                conn.ensure_connected()
                top = conn.max_version(m.ListOffsetsRequest)
                if top is None or top < need:
                    raise broker_error(UNSUPPORTED_VERSION, broker=conn.address, api="ListOffsets",
                                       topic=topic, detail=f"needs ListOffsets v{need}+, broker offers "
                                                           f"{conn.api_versions.get(m.ListOffsetsRequest.API_KEY)}")
                version = conn.pick_version(m.ListOffsetsRequest, at_least=need)
                leader_epochs = self._topics.get(topic)
                req = m.ListOffsetsRequest(replica_id=-1, isolation_level=iso, timeout_ms=self.config.request_timeout_ms,
                                           topics=[m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                                               m.ListOffsetsRequest.ListOffsetsPartition(
                                                   partition_index=p, timestamp=ts,
                                                   current_leader_epoch=(leader_epochs.partitions[p].leader_epoch
                                                                         if leader_epochs and p in leader_epochs.partitions else -1))
                                               for p, ts in sorted(parts.items())])])
                resp = conn.request(req, version)
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise broker_error(p.error_code, broker=conn.address, api="ListOffsets",
                                               topic=topic, partition=p.partition_index)
                        result[p.partition_index] = ListedOffset(p.partition_index, p.offset, p.timestamp, p.leader_epoch)
                        pending.pop(p.partition_index, None)
            missing = [p for p in pending if p not in result]
            if missing:
                raise BrokerError(f"no answer for partitions {missing}", api="ListOffsets", topic=topic)
            return result

        return self._with_retries("ListOffsets", run, topic=topic)

    # -- OffsetForLeaderEpoch

    def offset_for_leader_epoch(self, topic, partition: int, epochs) -> dict[int, tuple[int, int]]:
        """``{epoch: (leader epoch, end offset)}`` from the partition's leader: for each epoch
        asked, the largest epoch of the leader's lineage at or below it and where that epoch
        ends (the next epoch's start, or the log end offset); ``(-1, -1)`` when there is none.
        One request per epoch: a partition appears once per request, as Kafka's own clients
        send it."""
        topic = self._topic_name(topic)
        R = m.OffsetForLeaderEpochRequest
        out: dict[int, tuple[int, int]] = {}
        for epoch in epochs:
            def run(epoch=epoch):
                conn = self.leader(topic, partition)
                conn.ensure_connected()
                req = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=topic, partitions=[
                    R.OffsetForLeaderPartition(partition=partition, leader_epoch=epoch)])])
                resp = conn.request(req, conn.pick_version(R))
                for t in resp.topics:
                    for p in t.partitions:
                        if p.partition == partition:
                            if p.error_code:
                                raise broker_error(p.error_code, broker=conn.address,
                                                   api="OffsetForLeaderEpoch", topic=topic, partition=partition)
                            return p.leader_epoch, p.end_offset
                raise BrokerError(f"no answer for epoch {epoch}", api="OffsetForLeaderEpoch", topic=topic,
                                  partition=partition)
            out[epoch] = self._with_retries("OffsetForLeaderEpoch", run, topic=topic, partition=partition)
        return out

    # -- Fetch

    def fetch(self, topic, partition: int, offset: int, *, max_bytes: int | None = None,
              partition_max_bytes: int | None = None, max_wait_ms: int | None = None,
              min_bytes: int | None = None, isolation_level: int | None = None,
              current_leader_epoch: int = -1, request_remote_location: bool = False,
              storage_formats: tuple = (kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1,)) -> FetchResult:
        """Sessionless fetch (session id 0, epoch -1) of one partition from its leader.

        With ``request_remote_location`` the KIP-1248 tags are sent when the version allows
        (12+); ``FetchResult.kip1248_requested`` says whether they were.  Partition errors
        raise :class:`BrokerError`; retriable ones are retried after a metadata refresh."""
        topic = self._topic_name(topic)
        cfg = self.config
        iso = cfg.isolation_level if isolation_level is None else isolation_level
        wait = cfg.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms

        def run():
            info = self.topic(topic)
            conn = self.leader(topic, partition)
            conn.ensure_connected()
            version = self._fetch_version(conn, info)
            send_tags = request_remote_location and version >= kip1248.MIN_FETCH_VERSION
            ftopic = m.FetchRequest.FetchTopic(partitions=[m.FetchRequest.FetchPartition(
                partition=partition, fetch_offset=offset, current_leader_epoch=current_leader_epoch,
                partition_max_bytes=cfg.max_partition_fetch_bytes if partition_max_bytes is None else partition_max_bytes)])
            if version >= 13:
                ftopic.topic_id = info.topic_id
            else:
                ftopic.topic = topic
            req = m.FetchRequest(
                replica_id=-1, max_wait_ms=wait, min_bytes=cfg.fetch_min_bytes if min_bytes is None else min_bytes,
                max_bytes=cfg.fetch_max_bytes if max_bytes is None else max_bytes, isolation_level=iso,
                session_id=0, session_epoch=-1, topics=[ftopic], rack_id=cfg.client_rack)
            if send_tags:
                req.remote_log_segment_location_requested = True
                req.supported_storage_format_versions = list(storage_formats)
            # the broker may hold the request for max_wait_ms before answering
            resp = conn.request(req, version, timeout_ms=cfg.request_timeout_ms + wait)
            if resp.error_code:
                raise broker_error(resp.error_code, broker=conn.address, api="Fetch", topic=topic,
                                   partition=partition)
            for t in resp.responses:
                if (version >= 13 and t.topic_id != info.topic_id) or (version < 13 and t.topic != topic):
                    continue
                for p in t.partitions:
                    if p.partition_index != partition:
                        continue
                    if p.error_code:
                        raise broker_error(p.error_code, broker=conn.address, api="Fetch", topic=topic,
                                           partition=partition)
                    return FetchResult(topic, partition, p, version, conn.address, send_tags,
                                       resp.throttle_time_ms or 0)
            raise BrokerError("the fetch response does not contain the partition", broker=conn.address,
                              api="Fetch", topic=topic, partition=partition)

        return self._with_retries("Fetch", run, topic=topic, partition=partition)
