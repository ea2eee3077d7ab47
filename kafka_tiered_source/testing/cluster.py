"""``EmbeddedCluster``: a one-node Kafka-protocol broker with tiered storage, in a background thread.

Real Kafka clients (kafka-python, confluent-kafka/librdkafka, this project's own client) talk to
it over TCP on 127.0.0.1; tests and tools drive the storage side directly (create topics, import
Kafka segment files, tier, look at remote segments and metrics)::

    with EmbeddedCluster(data_dir=d, remote_storage=f"file://{d}/remote", segment_bytes=1 << 16) as c:
        c.create_topic("t", partitions=2)
        ...produce with any client to c.bootstrap_servers...
        c.tier()                         # closed segments -> remote storage, local copies dropped
        ...consume: reads of tiered offsets now go to remote storage...

Everything lives in ``data_dir``: a new cluster on the same directory carries on (topics, logs,
remote segment metadata, producer ids, transactions, committed offsets).
"""
from __future__ import annotations

import asyncio
import os
import threading

from ..errors import ConfigError, KafkaTieredError
from ..ids import random_uuid, uuid_to_str
from .coordinator import Coordinator
from .partition import RLMM_TOPIC
from .rlm_tasks import RemoteLogManagerTasks
from .schema_registry import SchemaRegistry
from .server import BrokerServer, SaslConfig, ServerConfig, SslConfig, TelemetryPush
from .storage import BrokerStorage

CLUSTER_ID_FILE = "cluster-id"
SCHEMA_REGISTRY_FILE = "schema-registry.json"


class EmbeddedCluster:
    """One broker (node 0, leader of every partition) over :class:`BrokerStorage`.

    Storage options are :class:`BrokerStorage`'s.  ``sasl``: None, or ``{"mechanism":
    "SCRAM-SHA-256" (or "mechanisms": [...]), "users": {name: password}}`` (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with Kafka's ``sasl.oauthbearer.jwks.endpoint.url``,
    ``...expected.issuer``, ``...expected.audience`` keys; ``connections.max.reauth.ms``); then every
    connection must authenticate.  ``ssl``: None, ``{"certfile": ..., "keyfile": ...}``, or
    Kafka's broker ``ssl.keystore.*`` / ``ssl.truststore.*`` / ``ssl.client.auth`` settings
    (stores in JKS, PKCS12 or PEM; ``required`` makes it mutual TLS).  ``consumer_byte_rate``: a KIP-13 fetch quota in
    bytes/s per client-id (Fetch answers then carry ``throttle_time_ms``).  ``port=0`` picks a free port; ``metrics_port``
    (0 = any) serves Prometheus text at ``GET /metrics``.  ``telemetry_metrics``: the KIP-714
    metric prefixes clients are asked to push (``("",)`` = all, empty = no pushes).
    ``kip1248``: True answers the KIP-1248 location tags on Fetch; False is Apache Kafka 4.1
    (tags ignored, tiered data served through the broker).  ``remote_fetch_max_wait_ms`` is
    Kafka's ``remote.fetch.max.wait.ms``: a read of remote storage through the broker that takes
    longer is answered with empty records and no error (DelayedRemoteFetch);
    ``slow_remote_reads`` makes remote reads slow, as a slow object store would.  Either way, with remote storage the
    broker writes ``__remote_log_metadata`` (``remote_log_metadata_partitions`` partitions) as
    TopicBasedRemoteLogMetadataManager does (``kip1266=True``: keyed version-1 records and
    tombstones, as KIP-1266 proposes).  A partition has one replica unless ``add_replica`` adds
    followers that roll their segments at other offsets; ``move_leader`` moves leadership to one
    (a new leader epoch; its copies then start at its own segment holding the highest copied
    offset + 1, so copies overlap as on real clusters), ``bump_leader_epoch`` is a leadership
    change to the same replica, ``upload_segment_copy`` another replica's (off-lineage) upload,
    and ``expire`` remote retention (topics created with ``retention_ms`` / ``retention_bytes``).
    ``schema_registry_port`` (0 = any) starts a Schema Registry REST server beside the broker
    (:class:`~.schema_registry.SchemaRegistry`, at ``schema_registry_url``) for typed values.
    ``encryption_key_pair_id`` and ``encryption_key_pairs`` (``{id: private key PEM file}``) are
    the Aiven plugin's ``encryption.key.pair.id`` / ``encryption.key.pairs``: with them the aiven
    layout encrypts what it tiers with the active pair (chunk compression on or off) and reads
    back segments of every pair.

    ``remote_log_manager_task_interval_ms`` (Kafka's ``remote.log.manager.task.interval.ms``,
    30000 there): while the cluster runs, RemoteLogManager's copy task (then local retention)
    and expiration task run on every tiered partition at this interval (:mod:`.rlm_tasks`).
    None (the default) runs none: tests step with ``tier()`` and ``expire()``, whose answers
    (the copies made, the copies deleted) a background task would otherwise take part of.
    Either way one partition's tasks never run at once.  Segments roll by ``segment_bytes`` and,
    when set, by ``segment_ms`` of record time less a random ``segment_jitter_ms``, as Kafka's
    append does; None (the default) rolls by size only, as tests mix fixed 2023 timestamps with
    markers stamped now, which Kafka's 7 days would split (``kafka-tiered broker`` takes Kafka's
    defaults).  A topic may set its own at creation (``create_topic(..., segment_ms=...,
    local_retention_ms=..., local_retention_bytes=...)``).
    """

    def __init__(self, data_dir: str, *, remote_storage: str | None = None, layout: str = "aiven",
                 segment_bytes: int = 1 << 30, index_interval_bytes: int = 4096,
                 local_retention_bytes: int | None = None, local_retention_ms: int | None = None,
                 chunk_compression: bool = False, chunk_size: int = 4 * 1024 * 1024, key_prefix: str = "",
                 presign: bool = False, presign_expiry_s: int = 3600,
                 s3_endpoint_url: str | None = None, s3_region: str | None = None,
                 s3_access_key_id: str | None = None, s3_secret_access_key=None, s3_session_token=None,
                 sasl=None, ssl=None, host: str = "127.0.0.1", port: int = 0,
                 metrics_port: int | None = None, auto_create_topics: bool = False,
                 telemetry_metrics=(), telemetry_push_interval_ms: int = 5000,
                 consumer_byte_rate: int | None = None, kip1248: bool = True,
                 remote_log_metadata_partitions: int = 50, encryption_key_pair_id: str | None = None,
                 encryption_key_pairs=None, kip1266: bool = False, segment_ms: int | None = None,
                 segment_jitter_ms: int = 0, remote_log_manager_task_interval_ms: int | None = None,
                 schema_registry_port: int | None = None, remote_fetch_max_wait_ms: int = 500):
        self.data_dir = os.path.abspath(data_dir)
        self.storage = BrokerStorage(
            self.data_dir, remote_storage=remote_storage, layout=layout, segment_bytes=segment_bytes,
            index_interval_bytes=index_interval_bytes, local_retention_bytes=local_retention_bytes,
            local_retention_ms=local_retention_ms, chunk_compression=chunk_compression,
            chunk_size=chunk_size, key_prefix=key_prefix, presign=presign, presign_expiry_s=presign_expiry_s,
            s3_endpoint_url=s3_endpoint_url, s3_region=s3_region, s3_access_key_id=s3_access_key_id,
            s3_secret_access_key=s3_secret_access_key, s3_session_token=s3_session_token, broker_id=0,
            remote_log_metadata_partitions=remote_log_metadata_partitions,
            encryption_key_pair_id=encryption_key_pair_id, encryption_key_pairs=encryption_key_pairs,
            kip1266=kip1266, segment_ms=segment_ms, segment_jitter_ms=segment_jitter_ms)
        if remote_log_manager_task_interval_ms is not None and remote_log_manager_task_interval_ms <= 0:
            raise ConfigError(f"remote_log_manager_task_interval_ms must be > 0, got "
                              f"{remote_log_manager_task_interval_ms}", option="remote_log_manager_task_interval_ms")
        self.remote_log_manager_task_interval_ms = remote_log_manager_task_interval_ms
        if remote_fetch_max_wait_ms < 1:       # Kafka's valid values: [1, ...]
            raise ConfigError(f"remote_fetch_max_wait_ms must be >= 1, got {remote_fetch_max_wait_ms}",
                              option="remote_fetch_max_wait_ms")
        self.remote_log_manager: RemoteLogManagerTasks | None = None
        self.coordinator = Coordinator(self.data_dir)
        self.config = ServerConfig(
            host=host, port=port, sasl=SaslConfig.of(sasl), ssl=SslConfig.of(ssl), metrics_port=metrics_port,
            auto_create_topics=auto_create_topics, cluster_id=self._cluster_id(),
            telemetry_metrics=tuple(telemetry_metrics), telemetry_push_interval_ms=telemetry_push_interval_ms,
            consumer_byte_rate=consumer_byte_rate, kip1248=kip1248, remote_fetch_max_wait_ms=remote_fetch_max_wait_ms)
        self._server: BrokerServer | None = None
        # a Schema Registry REST server beside the broker (testing/schema_registry.py), its schemas
        # kept in data_dir as the broker's logs are
        self.schema_registry: SchemaRegistry | None = None
        if schema_registry_port is not None:
            self.schema_registry = SchemaRegistry(host, schema_registry_port,
                                                  path=os.path.join(self.data_dir, SCHEMA_REGISTRY_FILE))
        self._holds: list = []
        self._remote_delays: list = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _cluster_id(self) -> str:
        path = os.path.join(self.data_dir, CLUSTER_ID_FILE)
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
        cid = uuid_to_str(random_uuid())
        with open(path, "w") as f:
            f.write(cid)
        return cid

    def __repr__(self):
        state = self.bootstrap_servers if self.running else "stopped"
        return f"EmbeddedCluster({self.data_dir!r}, {state})"

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "EmbeddedCluster":
        if self.running:
            raise KafkaTieredError("EmbeddedCluster is already running")
        server = BrokerServer(self.storage, self.coordinator, self.config)
        server.holds = self._holds
        server.remote_read_delays = self._remote_delays
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run():
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(server.start())
            except BaseException as exc:   # reported to start()'s caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
                loop.run_until_complete(server.stop())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

        thread = threading.Thread(target=run, name="kafka-tiered-broker", daemon=True)
        thread.start()
        ready.wait()
        if failure:
            thread.join()
            raise KafkaTieredError(f"embedded broker failed to start on {self.config.host}:{self.config.port}: "
                                   f"{failure[0]}") from failure[0]
        self._server, self._loop, self._thread = server, loop, thread
        interval = self.remote_log_manager_task_interval_ms
        if interval is not None and self.storage.store is not None:
            self.remote_log_manager = RemoteLogManagerTasks(self.storage, interval, self._metadata_written).start()
        if self.schema_registry is not None:
            self.schema_registry.start()
        return self

    def _metadata_written(self) -> None:
        """Wake fetches waiting on ``__remote_log_metadata``, as a Produce to it would."""
        info = self.storage.topics.get(RLMM_TOPIC)
        for p in range(info.partitions if info is not None else 0):
            self._notify(RLMM_TOPIC, p)

    def stop(self) -> None:
        if self.remote_log_manager is not None:     # first: no copy is cut off by the listener's end
            self.remote_log_manager.stop()
            self.remote_log_manager = None
        if self.schema_registry is not None:
            self.schema_registry.stop()
        if self._thread is None:
            return
        loop = self._loop
        if self._thread.is_alive() and loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(60)
        self._thread = None

    def __enter__(self) -> "EmbeddedCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses
    def _running_server(self) -> BrokerServer:
        server = self._server
        if not self.running or server is None:
            raise KafkaTieredError("EmbeddedCluster is not running (call start() or use it as a context manager)")
        return server

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def port(self) -> int:
        port = self._running_server().port
        if port is None:        # pragma: no cover - start() returns once the listener is bound
            raise KafkaTieredError("the embedded broker has no listener yet")
        return port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.config.host}:{self.port}"

    @property
    def schema_registry_url(self) -> str:
        """The URL of the Schema Registry started beside the broker (``schema_registry_port``)."""
        if self.schema_registry is None:
            raise KafkaTieredError("this EmbeddedCluster has no schema registry (give schema_registry_port=0)")
        return self.schema_registry.url

    @property
    def metrics_port(self) -> int | None:
        return self._running_server().metrics_port

    @property
    def metrics_url(self) -> str | None:
        p = self.metrics_port
        return None if p is None else f"http://{self.config.host}:{p}/metrics"

    # ------------------------------------------------------------------ storage side
    def create_topic(self, name: str, partitions: int = 1, **kwargs):
        return self.storage.create_topic(name, partitions, **kwargs)

    def import_log_dir(self, topic: str, partition: int, path: str):
        return self.storage.import_log_dir(topic, partition, path)

    def tier(self, topic: str | None = None):
        return self.storage.tier(topic)

    def roll(self, topic: str, partition: int, replica: int | None = None) -> None:
        self.storage.roll(topic, partition, replica)

    def offsets(self, topic: str, partition: int):
        return self.storage.offsets(topic, partition)

    def remote_segments(self, topic: str, partition: int):
        return self.storage.remote_segments(topic, partition)

    def append(self, topic: str, partition: int, records: bytes):
        """Append batches as a Produce would, waking fetches that wait for data."""
        result = self.storage.append(topic, partition, records)
        self._notify(topic, partition)
        return result

    def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                         commit: bool, coordinator_epoch: int = 0) -> int:
        offset = self.storage.write_txn_marker(topic, partition, producer_id, producer_epoch, commit,
                                               coordinator_epoch)
        self._notify(topic, partition)
        return offset

    def _notify(self, topic, partition):
        loop, server = self._loop, self._server
        if self.running and loop is not None and server is not None:
            loop.call_soon_threadsafe(server.notify, topic, partition)

    @property
    def topics(self):
        return self.storage.topics

    def __getattr__(self, name):
        # the rest of BrokerStorage's API (read, locate, list_offsets, topic, topic_by_id, ...)
        if name.startswith("_") or name in ("storage", "coordinator", "config"):
            raise AttributeError(name)
        return getattr(self.storage, name)

    def set_topic_config(self, topic: str, **values) -> None:
        """Override topic configs as ``kafka-configs --alter`` does (``delete_retention_ms=...``
        for ``delete.retention.ms``; None removes the override); DescribeConfigs answers them."""
        from .topic_configs import set_overrides
        set_overrides(self.data_dir, self.storage.topic(topic).topic_id,
                      {k.replace("_", "."): None if v is None else str(v) for k, v in values.items()})

    def hold_answers(self, hold):
        """Make the broker slow: ``hold(api_key, request)`` is asked before each request is
        handled and returns None (go on), seconds to wait, or a ``threading.Event`` to wait for
        (at most a minute).  Only that request waits: others, on other connections, are served
        meanwhile.  Returns a function that removes the hold."""
        self._holds.append(hold)
        return lambda: self._holds.remove(hold) if hold in self._holds else None

    def slow_remote_reads(self, seconds: float):
        """Make every read of remote storage through the broker take ``seconds`` longer (a slow
        object store); one slower than ``remote_fetch_max_wait_ms`` is answered with nothing.
        Returns a function that lifts it (reads still waiting go on at once)."""
        hold = float(seconds)
        self._remote_delays.append(hold)
        return lambda: self._remote_delays.remove(hold) if hold in self._remote_delays else None

    # ------------------------------------------------------------------ operator side
    def metrics_text(self) -> str:
        """KIP-1267 operator metrics in Prometheus text format (remote fetch counters, bytes,
        errors, latency sum and histogram per client id and topic; KIP-1248 location grants)."""
        if self._server is not None:
            return self._server.metrics_text()
        return self.storage.metrics.prometheus_text()

    def security_stats(self) -> dict:
        """Who connected: ``authentications`` ``{(mechanism, or "SSL" for a client certificate on
        a listener without SASL; principal): count}``, ``reauthentications`` (KIP-368) and
        ``expired_sessions_closed`` (connections closed because their SASL session ended)."""
        server = self._running_server()
        return {"authentications": dict(server.authentications),
                "reauthentications": server.reauthentications,
                "expired_sessions_closed": server.expired_sessions_closed}

    def telemetry(self, client_id: str | None = None) -> list[TelemetryPush]:
        """Latest KIP-714 push of each client instance (optionally only those of ``client_id``)."""
        server = self._server
        if server is None:
            return []
        pushes = list(server.telemetry.values())
        return [p for p in pushes if client_id is None or p.client_id == client_id]


__all__ = ["EmbeddedCluster"]
