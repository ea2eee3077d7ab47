"""A synchronous Kafka broker client: just what the tiered reader needs.

Bootstrap, ApiVersions negotiation (highest common version), a metadata cache with topic ids,
routing to partition leaders, ListOffsets and sessionless Fetch (optionally with the KIP-1248
tags), PLAINTEXT/SSL/SASL_PLAINTEXT/SASL_SSL with PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER
(TLS stores, tokens and re-authentication: ``tls.py``, ``oauth.py``, ``connection.py``).

Threading: one connection per broker, reused, with one request in flight at a time (the
connection lock is held from send to receive), so the client can be shared by threads.  The
correlation id of every response is checked; a mismatch or a closed socket drops the
connection and the request is retried on a fresh one.

Fetch requests are built in one place, :class:`~.fetch.FetchBuilder` (one partition for
:meth:`BrokerClient.fetch`, many for :func:`~.rounds.fetch_rounds`).  A read's own limits
(Spark's ``kafkaConsumer.pollTimeoutMs`` and ``fetchOffset.*`` options, which are not Kafka
properties) come in a :class:`ReadPolicy`; :meth:`BrokerClient.for_read` builds both from a
read's options.
"""
from __future__ import annotations

import random
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable, TypeVar

from ..dataclass import dataclass, replace
from ..errors import BrokerError
from ..logs import get_logger
from ..model import EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD, LATEST_TIERED, MAX_TIMESTAMP
from ..options.client import IGNORED_KEYS, READ_COMMITTED, READ_UNCOMMITTED, ClientConfig
from . import kip1248, messages as m
from .connection import BrokerConnection, ConnectionLost
from .cluster import BrokerNode, ListedOffset, PartitionInfo, TopicInfo
from .fetch import ZERO_UUID, FetchAsk, FetchBuilder, FetchResult
from .errors import (LEADER_NOT_AVAILABLE, NETWORK_EXCEPTION, REQUEST_TIMED_OUT, UNKNOWN_TOPIC_ID,
                     UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION, broker_error)

if TYPE_CHECKING:
    from ..options.read import ReadOptions

log = get_logger(__name__)

# The configuration is the options layer's (Kafka's property names are rows of the option table);
# it is re-exported because it is the client's public interface.
__all__ = ["BrokerClient", "BrokerConnection", "BrokerNode", "ClientConfig", "FetchAsk", "FetchBuilder",
           "FetchResult", "IGNORED_KEYS", "ListedOffset", "PartitionInfo", "READ_COMMITTED", "READ_UNCOMMITTED",
           "ReadPolicy", "TopicInfo"]

# ListOffsets version needed by each special timestamp (KIP-734, KIP-1005, KIP-1023).
_SPECIAL_TIMESTAMP_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                                  EARLIEST_PENDING_UPLOAD: 11}
T = TypeVar("T")


# --- results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadPolicy:
    """What a read asks of the client beyond Kafka's properties: Spark's Kafka source options.

    ``fetch_timeout_ms`` (``kafkaConsumer.pollTimeoutMs``): the longest one :meth:`BrokerClient.fetch`
    may take, retries included, before it fails, as Spark's consumer poll gives up on an offset
    (None: the client's retries alone bound it).  ``offset_attempts`` and
    ``offset_retry_interval_ms`` (``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``):
    how often an offset look-up (ListOffsets) is tried when it fails, and the wait between,
    with the metadata re-learnt, as Spark's ``KafkaOffsetReader.withRetries`` does."""
    fetch_timeout_ms: int | None = None
    offset_attempts: int = 1
    offset_retry_interval_ms: int = 0


TOPIC_RESOURCE = 2       # ConfigResource.Type.TOPIC, DescribeConfigs' resource type of a topic
BROKER_RESOURCE = 4      # ConfigResource.Type.BROKER: one broker's own configuration


class BrokerClient:
    """Synchronous client over a set of brokers.  ``BrokerClient(ClientConfig | dict)``."""

    def __init__(self, config: ClientConfig | dict, *, policy: ReadPolicy | None = None):
        if isinstance(config, dict):
            config = ClientConfig.from_properties(config)
        self.config = config
        self.policy = policy or ReadPolicy()
        self._lock = threading.RLock()
        self._conns: dict = {}         # node id -> BrokerConnection
        self._bootstrap: list = [BrokerConnection(h, p, config) for h, p in config.bootstrap_servers]
        self._brokers: dict = {}       # node id -> BrokerNode
        self._topics: dict = {}        # name -> TopicInfo
        self._ids: dict = {}           # topic id -> name
        self._metadata_at = 0.0
        self.cluster_id = None
        self.controller_id = None

    @classmethod
    def for_read(cls, options: "ReadOptions") -> "BrokerClient":
        """The client of a read: its ``kafka.*`` properties, and its poll timeout and offset
        look-up retries (:class:`ReadPolicy`)."""
        from ..options.read import client_properties
        return cls(client_properties(options), policy=ReadPolicy(
            fetch_timeout_ms=options.poll_timeout_ms, offset_attempts=options.fetch_offset_num_retries,
            offset_retry_interval_ms=options.fetch_offset_retry_interval_ms))

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

    def open_connections(self) -> list:
        """The connections open now, to any broker (none is opened here)."""
        with self._lock:
            # a bootstrap connection adopted as a broker's is in both lists: once here
            return list({id(c): c for c in list(self._conns.values()) + self._bootstrap if c.connected}.values())

    # -- plumbing

    def backoff(self, attempt: int) -> None:
        """Sleep before retry ``attempt`` (0-based): ``retry.backoff.ms`` doubling per attempt
        up to ``retry.backoff.max.ms``, with Kafka's +-20% jitter."""
        cfg = self.config
        delay = min(cfg.retry_backoff_ms * (2 ** attempt), cfg.retry_backoff_max_ms) / 1000
        time.sleep(delay * random.uniform(0.8, 1.2))

    def invalidate_metadata(self) -> None:
        """Route the next request with fresh metadata (after a leader moved or a connection was
        lost)."""
        self._metadata_at = 0.0

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
                    raise broker_error(LEADER_NOT_AVAILABLE, api="Metadata",
                                   detail=f"broker {node_id} is not in the metadata")
                # The bootstrap connection to this very address is this broker's connection: one
                # connection per broker, not a second handshake (and SASL exchange) to the same
                # listener before the first request of a plan.
                conn = next((c for c in self._bootstrap if c.node_id is None and c.connected
                             and (c.host, c.port) == (node.host, node.port)), None)
                if conn is not None:
                    conn.node_id = node_id
                else:
                    conn = BrokerConnection(node.host, node.port, self.config, node_id=node_id)
                self._conns[node_id] = conn
            return conn

    def _with_retries(self, api: str, fn: Callable[[], T], *, topic=None, partition=None,
                      deadline: float | None = None, gave_up: Callable[[BrokerError], BrokerError] | None = None) -> T:
        """Run ``fn()``; on retriable errors back off, refresh metadata when the error says it
        is stale, retry (``retries`` times).  Past ``deadline`` (monotonic seconds) no retry
        starts: ``gave_up(last error)`` is raised instead."""
        attempt = 0
        while True:
            err: BrokerError
            try:
                return fn()
            except ConnectionLost as exc:
                err = broker_error(NETWORK_EXCEPTION, api=api, topic=topic, partition=partition,
                                   detail=f"connection lost: {exc}")
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                err = exc
            if deadline is not None and gave_up is not None and time.monotonic() >= deadline:
                raise gave_up(err) from err
            if attempt >= self.config.retries:
                raise err
            log.debug("retrying %s after %s (attempt %d)", api, err, attempt + 1)
            self.backoff(attempt)
            attempt += 1
            # An error without a Kafka code (no broker reachable, no answer for a partition)
            # says nothing about the metadata either way: re-learn it, it costs one request.
            if err.refresh_metadata or err.error_code is None:
                self.invalidate_metadata()

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
                raise broker_error(UNKNOWN_TOPIC_ID if by_id else UNKNOWN_TOPIC_OR_PARTITION, api="Metadata",
                                   topic=str(name_or_id))
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
                raise broker_error(UNKNOWN_TOPIC_OR_PARTITION, api="Metadata", topic=topic, partition=partition,
                                   detail=f"topic has {len(info.partitions)} partitions")
        if p.error_code or p.leader < 0:
            raise broker_error(p.error_code or LEADER_NOT_AVAILABLE, api="Metadata", topic=topic,
                               partition=partition)
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
        return self.fetch_builder(conn, [topic]).version

    def fetch_builder(self, conn: BrokerConnection, topics: Iterable[str], *,
                      request_remote_location: bool = False,
                      storage_formats: tuple[str, ...] = (kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1,)) -> FetchBuilder:
        """A :class:`FetchBuilder` for requests to ``conn`` (connected) about ``topics``."""
        infos = {t: self.topic(t) for t in topics}
        return FetchBuilder(conn, infos, rack=self.config.client_rack,
                            request_remote_location=request_remote_location, storage_formats=storage_formats)

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

    # -- ListOffsets

    def list_offsets(self, topic, timestamps: dict, *, isolation_level: int | None = None) -> dict:
        """``{partition: timestamp}`` -> ``{partition: ListedOffset}``.  Timestamps: ms since the
        epoch, or EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), EARLIEST_LOCAL (-4),
        LATEST_TIERED (-5), EARLIEST_PENDING_UPLOAD (-6) where the broker's version allows.

        A look-up that fails (after the client's own retries of retriable errors) is tried
        again up to :attr:`ReadPolicy.offset_attempts` times in all, after
        :attr:`ReadPolicy.offset_retry_interval_ms` and with fresh metadata, as Spark's offset
        reader does; a version the broker lacks fails at once (asking again cannot help)."""
        attempts = self.policy.offset_attempts
        for attempt in range(1, attempts + 1):
            try:
                return self._list_offsets(topic, timestamps, isolation_level=isolation_level)
            except BrokerError as exc:
                if attempt >= attempts or exc.error_code == UNSUPPORTED_VERSION:
                    raise
                log.warning("offset look-up of %s failed (attempt %d of %d, fetchOffset.numRetries): %s",
                            topic, attempt, attempts, exc)
                time.sleep(self.policy.offset_retry_interval_ms / 1000)
                self.invalidate_metadata()
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _list_offsets(self, topic, timestamps: dict, *, isolation_level: int | None) -> dict:
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
                req = m.ListOffsetsRequest(replica_id=-1, isolation_level=iso, timeout_ms=self.config.request_timeout_ms,
                                           topics=[m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                                               m.ListOffsetsRequest.ListOffsetsPartition(
                                                   partition_index=p, timestamp=ts,
                                                   current_leader_epoch=self._leader_epoch(topic, p))
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

    def _leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch as this client's metadata has it (-1: unknown): sent as
        ``current_leader_epoch`` so that a leader this client knows under an older epoch answers
        FENCED_LEADER_EPOCH (and one that knows an older epoch than the client,
        UNKNOWN_LEADER_EPOCH) instead of answering as if current; both refresh the metadata and
        retry (KIP-320)."""
        info = self._topics.get(topic)
        p = info.partitions.get(partition) if info is not None else None
        return p.leader_epoch if p is not None else -1

    def offset_for_leader_epoch(self, topic, partition: int, epochs) -> dict[int, tuple[int, int]]:
        """``{epoch: (leader epoch, end offset)}`` from the partition's leader: for each epoch
        asked, the largest epoch of the leader's lineage at or below it and where that epoch
        ends (the next epoch's start, or the log end offset); ``(-1, -1)`` when there is none.
        One request per epoch: a partition appears once per request, as Kafka's own clients
        send it; each fenced with the leader epoch this client knows (:meth:`_leader_epoch`)."""
        topic = self._topic_name(topic)
        R = m.OffsetForLeaderEpochRequest
        out: dict[int, tuple[int, int]] = {}
        for epoch in epochs:
            def run(epoch=epoch):
                conn = self.leader(topic, partition)
                conn.ensure_connected()
                req = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=topic, partitions=[
                    R.OffsetForLeaderPartition(partition=partition, leader_epoch=epoch,
                                               current_leader_epoch=self._leader_epoch(topic, partition))])])
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

    def offset_for_leader_epochs(self, topic, asks: dict) -> dict:
        """``{partition: [epochs]}`` -> ``{partition: {epoch: (leader epoch, end offset)}}``, as
        :meth:`offset_for_leader_epoch` answers, for many partitions at once: each round asks
        every partition's next epoch in one request per leader (a partition appears once per
        request), so a plan costs as many rounds as its partition with the most epochs."""
        topic = self._topic_name(topic)
        R = m.OffsetForLeaderEpochRequest
        queues = {p: list(epochs) for p, epochs in asks.items() if epochs}
        out: dict = {p: {} for p in asks}
        while queues:
            wanted = {p: q.pop(0) for p, q in queues.items()}
            queues = {p: q for p, q in queues.items() if q}

            def run(wanted=wanted):
                by_leader: dict = {}
                for p, epoch in wanted.items():
                    by_leader.setdefault(self.leader(topic, p), {})[p] = epoch
                got = {}
                for conn, parts in by_leader.items():
                    conn.ensure_connected()
                    req = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=topic, partitions=[
                        R.OffsetForLeaderPartition(partition=p, leader_epoch=e, current_leader_epoch=self._leader_epoch(topic, p))
                        for p, e in sorted(parts.items())])])
                    resp = conn.request(req, conn.pick_version(R))
                    for t in resp.topics:
                        for p in t.partitions:
                            if p.partition not in parts:
                                continue
                            if p.error_code:
                                raise broker_error(p.error_code, broker=conn.address,
                                                   api="OffsetForLeaderEpoch", topic=topic, partition=p.partition)
                            got[p.partition] = (p.leader_epoch, p.end_offset)
                missing = sorted(set(wanted) - set(got))
                if missing:
                    raise BrokerError(f"no answer for partitions {missing}", api="OffsetForLeaderEpoch", topic=topic)
                return got
            for p, answer in self._with_retries("OffsetForLeaderEpoch", run, topic=topic).items():
                out[p][wanted[p]] = answer
        return out

    # -- DescribeConfigs

    def describe_topic_config(self, topic: str, keys: Iterable[str]) -> dict[str, str | None]:
        """``{key: value}`` of ``topic``'s configuration, asked of any broker (DescribeConfigs
        of a TOPIC resource): a key the answer leaves out is absent, a value it hides is None.
        A :class:`BrokerError` when the broker lacks the API or refuses (no DESCRIBE_CONFIGS on
        the topic: TOPIC_AUTHORIZATION_FAILED; an unknown topic).  As in Kafka's admin client,
        only the request is retried, not an error the answer gives for the topic."""
        return self._describe_configs(self._any_connection, TOPIC_RESOURCE, topic, keys, topic=topic)

    def describe_broker_config(self, node_id: int, keys: Iterable[str]) -> dict[str, str | None]:
        """``{key: value}`` of broker ``node_id``'s own configuration (DescribeConfigs of a
        BROKER resource), asked of that broker: Kafka's ConfigHelper describes only the broker
        that answers, as the admin client routes a BROKER resource to its node.  A key the
        broker does not know (an older version) is absent; a refusal (no DESCRIBE_CONFIGS on
        the cluster: CLUSTER_AUTHORIZATION_FAILED) raises :class:`BrokerError`."""
        def connect() -> BrokerConnection:
            if node_id not in self._brokers:
                self.metadata([])          # the brokers, no topic
            return self.connection(node_id)
        return self._describe_configs(connect, BROKER_RESOURCE, str(node_id), keys)

    def _describe_configs(self, connect: Callable[[], BrokerConnection], resource_type: int, name: str,
                          keys: Iterable[str], *, topic: str | None = None) -> dict[str, str | None]:
        R, wanted = m.DescribeConfigsRequest, list(keys)

        def run():
            conn = connect()
            conn.ensure_connected()
            req = R(resources=[R.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                          configuration_keys=wanted)])
            for res in conn.request(req, conn.pick_version(R)).results:
                if res.resource_type == resource_type and res.resource_name == name:
                    return conn.address, res
            raise BrokerError(f"no answer for the resource {name!r}", broker=conn.address, api="DescribeConfigs",
                              topic=topic)
        broker, res = self._with_retries("DescribeConfigs", run, topic=topic)
        if res.error_code:
            raise broker_error(res.error_code, broker=broker, api="DescribeConfigs", topic=topic,
                               detail=res.error_message)
        return {c.name: c.value for c in res.configs}

    # -- Fetch

    def fetch(self, topic, partition: int, offset: int, *, max_bytes: int | None = None,
              partition_max_bytes: int | None = None, max_wait_ms: int | None = None,
              min_bytes: int | None = None, isolation_level: int | None = None,
              current_leader_epoch: int = -1, request_remote_location: bool = False,
              storage_formats: tuple = (kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1,),
              fenced: bool = False) -> FetchResult:
        """Sessionless fetch of one partition from its leader (:class:`FetchBuilder`).

        With ``request_remote_location`` the KIP-1248 tags are sent when the version allows
        (12+); ``FetchResult.kip1248_requested`` says whether they were.  ``fenced`` sends the
        leader epoch this client's metadata knows as ``current_leader_epoch`` (KIP-320, as
        Kafka's consumer does), learnt again for each attempt: a leader that moved on answers
        FENCED_LEADER_EPOCH instead of answering as if current.  ``FetchResult.node_id`` and
        ``.leader_epoch`` say which broker answered and under which epoch.  Partition errors
        raise :class:`BrokerError`; retriable ones are retried after a metadata refresh, for at
        most :attr:`ReadPolicy.fetch_timeout_ms` in all when the read sets one."""
        topic = self._topic_name(topic)
        cfg = self.config
        iso = cfg.isolation_level if isolation_level is None else isolation_level
        wait = cfg.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms
        limit = cfg.max_partition_fetch_bytes if partition_max_bytes is None else partition_max_bytes
        poll_ms = self.policy.fetch_timeout_ms
        deadline = None if poll_ms is None else time.monotonic() + poll_ms / 1000

        def run() -> FetchResult:
            conn = self.leader(topic, partition)
            conn.ensure_connected()
            epoch = self._leader_epoch(topic, partition) if fenced else current_leader_epoch
            ask = FetchAsk(topic, partition, offset, limit, epoch)
            builder = self.fetch_builder(conn, [topic], request_remote_location=request_remote_location,
                                         storage_formats=storage_formats)
            req = builder.request([ask], max_wait_ms=wait,
                                  min_bytes=cfg.fetch_min_bytes if min_bytes is None else min_bytes,
                                  max_bytes=cfg.fetch_max_bytes if max_bytes is None else max_bytes,
                                  isolation_level=iso)
            # the broker may hold the request for max_wait_ms before answering; a poll timeout
            # cuts the wait for the answer short
            timeout_ms = cfg.request_timeout_ms + wait
            if deadline is not None:
                timeout_ms = max(1, min(timeout_ms, int((deadline - time.monotonic()) * 1000)))
            resp = conn.request(req, builder.version, timeout_ms=timeout_ms)
            for res in builder.results(resp):
                if res.partition_index == partition:
                    if res.error is not None:
                        raise res.error
                    return replace(res, node_id=conn.node_id, leader_epoch=epoch)
            raise BrokerError("the fetch response does not contain the partition", broker=conn.address,
                              api="Fetch", topic=topic, partition=partition)

        def gave_up(err: BrokerError) -> BrokerError:
            # Spark's consumer: "Cannot fetch record for offset ... in ... milliseconds"
            return broker_error(REQUEST_TIMED_OUT, broker=err.broker, api="Fetch", topic=topic, partition=partition,
                                detail=f"no answer for offset {offset} within kafkaConsumer.pollTimeoutMs="
                                       f"{poll_ms} ms (last error: {err})")

        return self._with_retries("Fetch", run, topic=topic, partition=partition, deadline=deadline,
                                  gave_up=gave_up)
