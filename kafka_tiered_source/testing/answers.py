"""What the embedded broker's storage answers (topics, appends, reads, KIP-1248 locations,
offsets) and the operator counters it keeps (KIP-1267 style, as Prometheus text)."""
from __future__ import annotations

import threading
from functools import cached_property

from ..dataclass import dataclass, field
from ..ids import uuid_from_str, uuid_to_str
from ..protocol.errors import code_of
from .tiering import STORAGE_FORMAT

@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str                # Kafka Uuid string
    partitions: int
    log_append_time: bool = False
    # remote retention (RemoteLogManager's expiration task): retention.ms / retention.bytes
    retention_ms: int | None = None
    retention_bytes: int | None = None
    # the topic's own log settings (None: the broker's; logconfig.py)
    local_retention_ms: int | None = None
    local_retention_bytes: int | None = None
    segment_ms: int | None = None
    segment_jitter_ms: int | None = None

    @cached_property
    def topic_id_bytes(self) -> bytes:
        return uuid_from_str(self.topic_id)


@dataclass(frozen=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int         # -1 unless the topic uses LogAppendTime
    log_start_offset: int


@dataclass(frozen=True)
class FetchResult:
    """One partition of a Fetch answer.  ``error_name`` None means success; ``aborted`` is None
    for read_uncommitted, else [(producer id, first offset)]."""
    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None
    error_name: str | None = None
    from_remote: bool = False
    error_message: str | None = None     # why, for logs: which bound was crossed, which object failed

    @property
    def error_code(self) -> int:
        return code_of(self.error_name) if self.error_name else 0


@dataclass(frozen=True)
class LocationAnswer:
    """KIP-1248: where a client may read ``offset`` directly.  Byte range is half-open."""
    topic: str
    topic_id: bytes
    partition: int
    segment_id: bytes            # RemoteLogSegmentId uuid (16 bytes)
    custom_metadata: bytes | None
    start_position: int
    end_position: int            # exclusive
    base_offset: int             # segment's first offset
    end_offset: int              # segment's last offset (inclusive, as Kafka's endOffset)
    size_bytes: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None
    object_key: str              # the .log object's key, relative to the remote storage URL
    presigned_url: str | None = field(default=None, repr=False)
    storage_format: str = STORAGE_FORMAT

    def to_remote_segment(self, topic_id: str | None = None):
        from ..storage.segment import RemoteSegment
        return RemoteSegment(self.topic, topic_id or uuid_to_str(self.topic_id), self.partition,
                             uuid_to_str(self.segment_id), self.base_offset, self.end_offset,
                             self.size_bytes, self.custom_metadata, self.presigned_url,
                             self.storage_format)


@dataclass(frozen=True)
class PartitionOffsets:
    log_start_offset: int
    local_log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int
    highest_tiered_offset: int   # -1 when nothing is tiered


class BrokerMetrics:
    """Operator-side counters (KIP-1267): remote fetches per client id and topic, and KIP-1248
    location grants.  ``prometheus_text()`` renders the exposition format."""

    COUNTERS = (
        ("remote_fetch_requests_total", "Fetches served by the broker from remote storage"),
        ("remote_fetch_bytes_total", "Bytes read from remote storage for broker-mediated fetches"),
        ("remote_fetch_errors_total", "Broker-mediated remote fetches that failed"),
        ("remote_fetch_latency_seconds_sum", "Total time spent in broker-mediated remote fetches"),
        ("location_grants_total", "KIP-1248 location answers given to clients"),
        ("location_granted_bytes_total", "Bytes of remote segments clients were told to read directly"),
    )
    PREFIX = "kafka_tiered_broker_"

    def __init__(self):
        self._lock = threading.Lock()
        self.values: dict[tuple[str, str, str], float] = {}

    def add(self, name: str, client_id: str | None, topic: str, amount: float = 1) -> None:
        key = (name, client_id or "", topic)
        with self._lock:
            self.values[key] = self.values.get(key, 0) + amount

    def granted(self, client_id: str | None, topic: str, answers: int, nbytes: int) -> None:
        """Count KIP-1248 location answers given for ``topic``: how many, and the bytes of
        remote segment they tell the client to read itself."""
        self.add("location_grants_total", client_id, topic, answers)
        self.add("location_granted_bytes_total", client_id, topic, nbytes)

    def get(self, name: str, client_id: str | None = None, topic: str | None = None) -> float:
        """Sum of ``name`` over the label values given (None = all)."""
        return sum(v for (n, c, t), v in self.values.items()
                   if n == name and (client_id is None or c == client_id) and (topic is None or t == topic))

    def prometheus_text(self) -> str:
        def esc(v):
            return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        lines = []
        with self._lock:
            items = sorted(self.values.items())
        for name, help_text in self.COUNTERS:
            full = self.PREFIX + name
            lines.append(f"# HELP {full} {help_text}")
            lines.append(f"# TYPE {full} {'counter' if name.endswith('_total') else 'untyped'}")
            for (n, c, t), v in items:
                if n == name:
                    lines.append(f'{full}{{client_id="{esc(c)}",topic="{esc(t)}"}} {v:g}')
        return "\n".join(lines) + "\n"
