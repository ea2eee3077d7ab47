"""The reader's metrics, exported: Prometheus text exposition and KIP-714 pushes.

* :func:`prometheus_text` renders a :class:`~kafka_tiered_source.metrics.reader.ReadTotals`
  (one task's or a whole read's) in the Prometheus text format with ``prometheus-client`` —
  no server; serve or write the text as you like.
* :func:`push_telemetry` is the client side of KIP-714: ``GetTelemetrySubscriptions``, then,
  when the broker asks for metrics (a non-empty subscription), one ``PushTelemetry`` with the
  metrics the subscription's prefixes select, encoded as OTLP ``MetricsData`` protobuf
  (compression none), cumulative, ``Terminating=true`` — a reader pushes once, when its task
  ends.  :func:`push_task` is how a task does it (unless ``telemetry.push.enabled=false``):
  over a connection the task already has, else over its process's one telemetry connection to
  the cluster, never one of its own.
* :func:`decode_otlp` and :func:`pushed_metrics_text` read pushes back (the embedded broker
  stores them: ``EmbeddedCluster.telemetry()``), and :func:`broker_metrics_with_clients` shows
  the clients' pushed figures next to the broker's own KIP-1267 metrics.

The metrics are declared once, in :data:`COUNTERS`; names are dotted for OTLP
(``kafka.tiered.reader.remote.requests``) and underscored for Prometheus
(``kafka_tiered_reader_remote_requests_total``).  Attributes: ``client_id``, ``topic``,
``partition``, ``backend`` (plus ``error_type`` and ``kind`` where said).

Needs the ``telemetry`` extra (``prometheus-client``, ``opentelemetry-proto``).
"""
from __future__ import annotations

import atexit
import hashlib
import logging
import threading
import time
from collections import OrderedDict

from .version import package_version

log = logging.getLogger(__name__)

PREFIX = "kafka.tiered.reader."

# (name after PREFIX, ReadStats field, unit, help) — monotonic counters.
COUNTERS = (
    ("remote.requests", "remote_requests", "1", "GET requests sent to remote storage, failed ones included"),
    ("remote.bytes", "remote_bytes", "By", "bytes received from remote storage"),
    ("broker.fetches", "broker_fetches", "1", "Fetch requests answered by brokers"),
    ("broker.bytes", "broker_bytes", "By", "record bytes received from brokers"),
    ("fallbacks", "fallbacks", "1", "direct reads that fell back to broker fetch"),
    ("fallback.bytes", "fallback_bytes", "By", "record bytes fetched from brokers after a fallback"),
    ("records", "records", "1", "rows produced"),
    ("broker.equivalent.bytes", "broker_equivalent_bytes", "By",
     "record-batch bytes brokers would have sent for the same offsets"),
)
ERRORS = ("remote.errors", "1", "failed GET requests by error type (attribute error_type)")
THROTTLED = ("throttled.time", "s", "seconds slept: kind=storage (storage back-off), kind=quota "
                                    "(client-side quotas)")
LATENCY = ("remote.request.latency", "s", "GET request latency")

KIP714_COMPRESSION_NONE = 0


def _prom(name: str) -> str:
    return (PREFIX + name).replace(".", "_")


# ---------------------------------------------------------------------------------------------
# Prometheus
# ---------------------------------------------------------------------------------------------
class _Collector:
    def __init__(self, totals):
        self.totals = totals

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
        from .metrics.reader import LATENCY_BOUNDS_S, TAG_NAMES
        items = sorted(self.totals.by_tags.items(), key=lambda kv: tuple(map(str, kv[0])))
        labels = list(TAG_NAMES)
        for name, attr, _unit, doc in COUNTERS:
            fam = CounterMetricFamily(_prom(name), doc, labels=labels)
            for tags, s in items:
                fam.add_metric([str(t) for t in tags], getattr(s, attr))
            yield fam
        fam = CounterMetricFamily(_prom(ERRORS[0]), ERRORS[2], labels=labels + ["error_type"])
        for tags, s in items:
            for err, n in sorted(s.remote_errors.items()):
                fam.add_metric([str(t) for t in tags] + [err], n)
        yield fam
        fam = CounterMetricFamily(_prom(THROTTLED[0]) + "_seconds", THROTTLED[2], labels=labels + ["kind"])
        for tags, s in items:
            fam.add_metric([str(t) for t in tags] + ["storage"], s.storage_throttled_s)
            fam.add_metric([str(t) for t in tags] + ["quota"], s.quota_throttled_s)
            fam.add_metric([str(t) for t in tags] + ["broker"], s.broker_throttled_s)
        yield fam
        hist = HistogramMetricFamily(_prom(LATENCY[0]) + "_seconds", LATENCY[2], labels=labels)
        for tags, s in items:
            h = s.remote_latency
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for bound, c in zip(list(LATENCY_BOUNDS_S) + [float("inf")], h.counts, strict=True):
                cumulative += c
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
            hist.add_metric([str(t) for t in tags], buckets, h.sum)
        yield hist


def prometheus_text(totals) -> str:
    """The counters of ``totals`` (a ``ReadTotals``) in the Prometheus text format."""
    from prometheus_client import CollectorRegistry, generate_latest
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(totals))
    return generate_latest(registry).decode()


# ---------------------------------------------------------------------------------------------
# OTLP (KIP-714 payload)
# ---------------------------------------------------------------------------------------------
def _selected(name: str, prefixes) -> bool:
    return any(name.startswith(p) for p in prefixes)


def otlp_metrics(totals, *, resource: dict | None = None, prefixes=("",),
                 start_time_ns: int | None = None, time_ns: int | None = None) -> bytes:
    """``totals`` as a serialized OTLP ``MetricsData`` (cumulative sums and a histogram);
    only metrics whose full name starts with one of ``prefixes`` (KIP-714's subscription
    semantics; ``""`` selects all)."""
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
    from .metrics.reader import LATENCY_BOUNDS_S
    now = time_ns if time_ns is not None else time.time_ns()
    start = start_time_ns if start_time_ns is not None else now
    cumulative = pb.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE

    def attrs(kv: dict):
        out = []
        for k, v in kv.items():
            if isinstance(v, int) and not isinstance(v, bool):
                out.append(common_pb2.KeyValue(key=k, value=common_pb2.AnyValue(int_value=v)))
            else:
                out.append(common_pb2.KeyValue(key=k, value=common_pb2.AnyValue(string_value=str(v))))
        return out

    items = sorted(totals.by_tags.items(), key=lambda kv: tuple(map(str, kv[0])))
    from .metrics.reader import TAG_NAMES
    metrics = []

    def sum_metric(name, unit, doc, points):
        m = pb.Metric(name=PREFIX + name, unit=unit, description=doc)
        m.sum.aggregation_temporality = cumulative
        m.sum.is_monotonic = True
        for labels, value in points:
            dp = m.sum.data_points.add(start_time_unix_nano=start, time_unix_nano=now)
            dp.attributes.extend(attrs(labels))
            if isinstance(value, float):
                dp.as_double = value
            else:
                dp.as_int = int(value)
        return m

    for name, attr, unit, doc in COUNTERS:
        if _selected(PREFIX + name, prefixes):
            metrics.append(sum_metric(name, unit, doc, [(dict(zip(TAG_NAMES, tags, strict=True)), getattr(s, attr))
                                                        for tags, s in items]))
    if _selected(PREFIX + ERRORS[0], prefixes):
        metrics.append(sum_metric(ERRORS[0], ERRORS[1], ERRORS[2], [
            ({**dict(zip(TAG_NAMES, tags, strict=True)), "error_type": err}, n)
            for tags, s in items for err, n in sorted(s.remote_errors.items())]))
    if _selected(PREFIX + THROTTLED[0], prefixes):
        metrics.append(sum_metric(THROTTLED[0], THROTTLED[1], THROTTLED[2], [
            ({**dict(zip(TAG_NAMES, tags, strict=True)), "kind": kind}, float(v))
            for tags, s in items for kind, v in (("storage", s.storage_throttled_s),
                                                 ("quota", s.quota_throttled_s),
                                                 ("broker", s.broker_throttled_s))]))
    if _selected(PREFIX + LATENCY[0], prefixes):
        m = pb.Metric(name=PREFIX + LATENCY[0], unit=LATENCY[1], description=LATENCY[2])
        m.histogram.aggregation_temporality = cumulative
        for tags, s in items:
            h = s.remote_latency
            dp = m.histogram.data_points.add(start_time_unix_nano=start, time_unix_nano=now,
                                             count=h.count, sum=h.sum)
            dp.attributes.extend(attrs(dict(zip(TAG_NAMES, tags, strict=True))))
            dp.explicit_bounds.extend(LATENCY_BOUNDS_S)
            dp.bucket_counts.extend(h.counts)
        metrics.append(m)
    data = pb.MetricsData()
    rm = data.resource_metrics.add()
    rm.resource.attributes.extend(attrs(resource or {}))
    sm = rm.scope_metrics.add()
    sm.scope.name = "kafka_tiered_source"
    sm.scope.version = package_version()
    sm.metrics.extend(metrics)
    return data.SerializeToString()


def decode_otlp(payload: bytes) -> list[dict]:
    """Data points of an OTLP ``MetricsData`` payload: dicts with ``name``, ``attributes``,
    ``resource`` and ``value`` (a number) or, for histograms, ``count``, ``sum``, ``bounds``,
    ``bucket_counts``.  Raises ``ValueError`` on bytes that are not a MetricsData message."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
    data = pb.MetricsData()
    try:
        data.ParseFromString(bytes(payload))
    except DecodeError as exc:
        raise ValueError(f"not an OTLP MetricsData payload ({len(payload)} bytes): {exc}") from None

    def value_of(v):
        kind = v.WhichOneof("value")
        return getattr(v, kind) if kind else None

    out = []
    for rm in data.resource_metrics:
        resource = {a.key: value_of(a.value) for a in rm.resource.attributes}
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind in ("sum", "gauge"):
                    for dp in getattr(m, kind).data_points:
                        out.append({"name": m.name, "resource": resource,
                                    "attributes": {a.key: value_of(a.value) for a in dp.attributes},
                                    "value": dp.as_int if dp.WhichOneof("value") == "as_int" else dp.as_double})
                elif kind == "histogram":
                    for dp in m.histogram.data_points:
                        out.append({"name": m.name, "resource": resource,
                                    "attributes": {a.key: value_of(a.value) for a in dp.attributes},
                                    "count": dp.count, "sum": dp.sum, "bounds": list(dp.explicit_bounds),
                                    "bucket_counts": list(dp.bucket_counts)})
    return out


def pushed_metrics_text(pushes) -> str:
    """Prometheus-style text of the KIP-714 pushes a broker stored (``EmbeddedCluster.
    telemetry()``): every sum data point as ``<name>{client_id=..,client_instance_id=..,...}``
    and histograms as ``_count`` / ``_sum``.  Lines are sorted; names are the OTLP names with
    dots as underscores, under the ``kafka_client_`` prefix so they cannot clash with the
    broker's own families."""
    lines = []
    for p in pushes:
        if p.compression_type != KIP714_COMPRESSION_NONE:
            lines.append(f"# push of {p.client_instance_id}: compression {p.compression_type} not decoded")
            continue
        for point in decode_otlp(p.metrics):
            labels = {"client_id": p.client_id or "", "client_instance_id": p.client_instance_id,
                      **{k: v for k, v in point["attributes"].items() if k != "client_id"}}
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            name = "kafka_client_" + point["name"].replace(".", "_")
            if "value" in point:
                lines.append(f"{name}{{{lab}}} {point['value']}")
            else:
                lines.append(f"{name}_count{{{lab}}} {point['count']}")
                lines.append(f"{name}_sum{{{lab}}} {point['sum']}")
    return "\n".join(sorted(lines)) + ("\n" if lines else "")


def _escape(v) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def broker_metrics_with_clients(cluster) -> str:
    """The embedded broker's KIP-1267 metrics followed by its clients' pushed KIP-714 metrics."""
    return (cluster.metrics_text().rstrip("\n") + "\n# KIP-714 client metrics pushed to this broker\n"
            + pushed_metrics_text(cluster.telemetry()))


# ---------------------------------------------------------------------------------------------
# KIP-714 push
# ---------------------------------------------------------------------------------------------
def push_telemetry(conn, totals, *, resource: dict | None = None, start_time_ns: int | None = None,
                   terminating: bool = True) -> bool:
    """Push ``totals`` to the broker behind ``conn`` (a ``BrokerConnection``) if it subscribes
    to any of them.  Returns True when a push was accepted; False when the broker does not
    support KIP-714, asks for no metrics, or accepts no uncompressed payload.  Errors in the
    broker's answers are logged, never raised: telemetry must not fail a read."""
    from .protocol import messages as m
    conn.ensure_connected()
    if m.GetTelemetrySubscriptionsRequest.API_KEY not in conn.api_versions or \
            m.PushTelemetryRequest.API_KEY not in conn.api_versions:
        return False
    sub = conn.request(m.GetTelemetrySubscriptionsRequest(client_instance_id=bytes(16)))
    if sub.error_code:
        log.info("GetTelemetrySubscriptions refused by %s (error %d)", conn.address, sub.error_code)
        return False
    prefixes = list(sub.requested_metrics or ())
    if not prefixes:
        return False
    accepted = list(sub.accepted_compression_types or ())
    if accepted and KIP714_COMPRESSION_NONE not in accepted:
        log.info("broker %s accepts only compressed telemetry %s; not pushing", conn.address, accepted)
        return False
    payload = otlp_metrics(totals, resource=resource, prefixes=prefixes, start_time_ns=start_time_ns)
    if sub.telemetry_max_bytes and len(payload) > sub.telemetry_max_bytes:
        log.info("telemetry payload of %d bytes exceeds the broker's %d; not pushing", len(payload),
                 sub.telemetry_max_bytes)
        return False
    resp = conn.request(m.PushTelemetryRequest(
        client_instance_id=sub.client_instance_id, subscription_id=sub.subscription_id,
        terminating=terminating, compression_type=KIP714_COMPRESSION_NONE, metrics=payload))
    if resp.error_code:
        log.info("PushTelemetry refused by %s (error %d)", conn.address, resp.error_code)
        return False
    return True


# ---------------------------------------------------------------------------------------------
# one telemetry connection per process and cluster
# ---------------------------------------------------------------------------------------------
#: telemetry connections kept per process (one per cluster and client configuration)
CHANNELS = 4
_channels: OrderedDict = OrderedDict()
_channels_lock = threading.Lock()


class _Channel:
    """This process's connection for pushes to one cluster: opened at the first push that has
    no connection of its own to use, then reused by every task the process runs (Spark reuses
    its Python workers), so a read of many storage-only tasks opens a few, not one per task."""

    def __init__(self, config):
        self.config = config
        self.lock = threading.Lock()
        self.conn = None

    def connection(self):
        from .protocol.connection import BrokerConnection
        if self.conn is not None and self.conn.connected:
            return self.conn
        last: Exception | None = None
        for host, port in self.config.bootstrap_servers:
            conn = BrokerConnection(host, port, self.config)
            try:
                conn.ensure_connected()
            except Exception as exc:   # the next bootstrap server may answer
                last = exc
                continue
            self.conn = conn
            return conn
        raise ConnectionError(f"no bootstrap server reachable for the telemetry push ({last})")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _channel(properties: dict) -> _Channel:
    from .protocol.client import ClientConfig
    # keyed by every property, secrets included (hashed): other credentials, another channel
    key = hashlib.sha256(repr(sorted(properties.items())).encode()).hexdigest()
    with _channels_lock:
        channel = _channels.get(key)
        if channel is None:
            channel = _channels[key] = _Channel(ClientConfig.from_properties(properties))
            while len(_channels) > CHANNELS:
                _channels.popitem(last=False)[1].close()
        _channels.move_to_end(key)
        return channel


@atexit.register
def close_channels() -> None:
    """Close this process's telemetry connections."""
    with _channels_lock:
        for channel in _channels.values():
            channel.close()
        _channels.clear()


def push_task(totals, properties: dict, *, connections=(), resource: dict | None = None,
              start_time_ns: int | None = None) -> bool:
    """Push one task's ``totals`` (a client instance of its own, ``Terminating``) if the broker
    subscribes: over one of ``connections`` (the task's own, already open) when there is one,
    else over this process's telemetry connection to the cluster ``properties`` (the Kafka
    client's) describe.  A connection that went stale is opened again once."""
    for conn in connections:
        if conn.connected:
            return push_telemetry(conn, totals, resource=resource, start_time_ns=start_time_ns)
    channel = _channel(properties)
    with channel.lock:
        for attempt in (1, 2):
            try:
                return push_telemetry(channel.connection(), totals, resource=resource,
                                      start_time_ns=start_time_ns)
            except Exception:
                channel.close()   # closed by the broker while idle, say: once more on a new one
                if attempt == 2:
                    raise
    return False
