"""What a read costs: a cost model, list-price presets, :func:`cost_report` after a read and
:func:`estimate` before one.

    cost = bytes received × egress rate + GET requests × request rate

Failed GETs are requests too (object stores bill them); they carry no bytes.

Presets (public list prices, USD, as published on the providers' pricing pages; figures as of
2025, written down on 2026-11-21 without web access from this environment — check them against
the live pages before quoting a bill, and override any rate with the options below):

* ``aws-s3-standard`` (us-east-1): GET $0.0004 per 1,000 requests; egress same-region $0.00,
  inter-az $0.00 [1], inter-region $0.02/GB, internet $0.09/GB [2]; broker path $0.02/GB [3].
* ``gcs-standard`` (regional bucket): Class B operations $0.004 per 10,000 (= $0.0004 per
  1,000); egress same-region $0.00, inter-az $0.00 [4], inter-region $0.02/GB [5], internet
  $0.12/GB [6]; broker path $0.01/GB [7].
* ``azure-hot`` (Hot tier, LRS): read operations $0.004 per 10,000 (= $0.0004 per 1,000); egress
  same-region $0.00, inter-az $0.00 [8], inter-region $0.02/GB [5], internet $0.087/GB [9];
  broker path $0.00/GB [8].

Sources: https://aws.amazon.com/s3/pricing/ (requests & data transfer tabs),
https://aws.amazon.com/ec2/pricing/on-demand/ (data transfer within a region),
https://cloud.google.com/storage/pricing (operations, network), https://cloud.google.com/vpc/network-pricing,
https://azure.microsoft.com/pricing/details/storage/blobs/ and
https://azure.microsoft.com/pricing/details/bandwidth/.

[1] S3 is a regional service: AWS does not bill transfer between S3 and EC2 in the same region,
    whatever the availability zone.  [2] first 10 TB/month tier (the first 100 GB/month free
    across AWS are not modelled).  [3] EC2-to-EC2 across AZs: $0.01/GB out + $0.01/GB in.
[4] a regional bucket read from a VM in the same region.  [5] between regions within North
America.  [6] premium tier, 0–1 TB/month, worldwide destinations except China and Australia.
[7] Compute Engine VM-to-VM across zones of a region.  [8] Azure does not bill transfer between
availability zones of a region.  [9] Microsoft-network routing, 10 TB/month tier after the free
100 GB.

The "broker path" rate prices the alternative: a broker-mediated read moves the record bytes from a
broker to the consumer, and in a multi-AZ cluster most consumers sit in another zone than the
partition leader.  :func:`cost_report` shows what that path would have cost next to the
direct read.

Options: ``cost.preset`` (default ``aws-s3-standard``), ``cost.egress`` (``same-region``
(default), ``inter-az``, ``inter-region``, ``internet``), ``cost.rate.get.per.1000``,
``cost.rate.egress.per.gb``, ``cost.rate.broker.per.gb`` (override the preset's rates) and
``cost.budget.usd``: planning refuses a read whose estimate exceeds it
(:class:`BudgetExceededError`, raised where Spark plans the read, before any data is read).
"""
from __future__ import annotations


from .dataclass import dataclass
from .options.pricing import EGRESS_CLASSES, PRESETS, CostModel, Preset

__all__ = ["CostModel", "CostReport", "CostRow", "EGRESS_CLASSES", "PRESETS", "Preset", "cost_report"]


# ---------------------------------------------------------------------------------------------
# After a read
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CostRow:
    client_id: str
    topic: str
    remote_bytes: int
    remote_requests: int
    remote_failed: int
    dollars: float
    broker_bytes: int                # what actually came through brokers (tail, fallbacks)
    broker_equivalent_bytes: int     # what brokers would have sent for the whole read
    broker_path_dollars: float       # ... and what that would have cost across AZs
    records: int
    throttled_s: float
    latency_p50_s: float | None
    latency_p95_s: float | None
    latency_p99_s: float | None

    @property
    def bytes_per_get(self) -> float | None:
        return self.remote_bytes / self.remote_requests if self.remote_requests else None

    @property
    def error_rate(self) -> float:
        return self.remote_failed / self.remote_requests if self.remote_requests else 0.0


@dataclass(frozen=True)
class CostReport:
    model: CostModel
    rows: tuple[CostRow, ...]
    tasks: int = 0
    #: what went through the brokers because direct reads failed (or fetch.remote.fallback=always
    #: sent it there): ranges, bytes and why, in one line; None when nothing did
    fallback: str | None = None

    @property
    def dollars(self) -> float:
        return sum(r.dollars for r in self.rows)

    @property
    def remote_bytes(self) -> int:
        return sum(r.remote_bytes for r in self.rows)

    @property
    def remote_requests(self) -> int:
        return sum(r.remote_requests for r in self.rows)

    def __str__(self) -> str:
        head = (f"{'client.id':<24} {'topic':<16} {'GETs':>7} {'failed':>6} {'MB':>9} {'B/GET':>9} "
                f"{'$':>10} {'p50 ms':>7} {'p99 ms':>7} {'broker MB':>9} {'via brokers $':>13}")
        lines = [f"cost model: {self.model.describe()}", head]
        for r in self.rows:
            bpg = f"{r.bytes_per_get:,.0f}" if r.bytes_per_get is not None else "-"
            p50 = f"{r.latency_p50_s * 1000:.1f}" if r.latency_p50_s is not None else "-"
            p99 = f"{r.latency_p99_s * 1000:.1f}" if r.latency_p99_s is not None else "-"
            lines.append(f"{r.client_id[:24]:<24} {r.topic[:16]:<16} {r.remote_requests:>7,} "
                         f"{r.remote_failed:>6,} {r.remote_bytes / 1e6:>9.2f} {bpg:>9} "
                         f"{r.dollars:>10.6f} {p50:>7} {p99:>7} {r.broker_equivalent_bytes / 1e6:>9.2f} "
                         f"{r.broker_path_dollars:>13.6f}")
        if self.fallback:
            lines.append(self.fallback)
        return "\n".join(lines)


def cost_report(stats, model: CostModel | None = None, **rates) -> CostReport:
    """Cost per client id and topic of a finished read.

    ``stats``: a :class:`~kafka_tiered_source.metrics.reader.ReadTotals` (e.g.
    ``kafka_tiered_source.last_read_stats(spark)``; its own cost model, from the read's
    ``cost.*`` options, is used unless ``model`` or ``rates`` are given).  ``rates``:
    ``preset=``, ``egress=``, ``get_per_1000=``, ``egress_per_gb=``, ``broker_per_gb=`` as for
    :meth:`CostModel.of`."""
    from .metrics.reader import ReadTotals
    if not isinstance(stats, ReadTotals):
        raise TypeError(f"cost_report takes the ReadTotals of a read (kafka_tiered_source."
                        f"last_read_stats(spark)), got {type(stats).__name__}")
    if model is None:
        model = CostModel.of(**rates) if rates else (stats.cost or CostModel.of())
    elif rates:
        raise TypeError("give either model or rates, not both")
    rows = []
    for (client_id, topic), s in stats.grouped("client_id", "topic").items():
        if not topic:   # counters outside any range (none today): keep them out of the rows
            continue
        rows.append(CostRow(
            client_id, topic, s.remote_bytes, s.remote_requests, s.remote_failed,
            model.dollars(s.remote_requests, s.remote_bytes), s.broker_bytes,
            s.broker_equivalent_bytes, model.broker_dollars(s.broker_equivalent_bytes), s.records,
            s.throttled_s, s.remote_latency.quantile(0.5), s.remote_latency.quantile(0.95),
            s.remote_latency.quantile(0.99)))
    return CostReport(model, tuple(rows), stats.tasks, stats.fallback_line())
