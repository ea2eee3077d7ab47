"""Topic configurations, and the broker's own, as the embedded broker describes them
(DescribeConfigs, :mod:`.apis.configs`).  A topic's: Kafka's defaults, what a topic was made with (``retention_ms``,
``retention_bytes``, LogAppendTime, its log settings where it has them), the broker's own
settings (segment size and roll time), and overrides set with
:func:`set_overrides` (what ``kafka-configs --alter --entity-type topics`` sets), kept in
``data_dir/topic-configs.json`` by topic id, so a topic made again under its name starts from
the defaults, as a deleted topic's configs go with it in Kafka.

Only keys the broker describes but does not otherwise act on may be overridden here; the others
come from how the topic was made, so what DescribeConfigs answers is what the broker does.
"""
from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING

from ..dataclass import dataclass
from ..protocol import remote_log_metadata as rlm
from .log import StorageError

if TYPE_CHECKING:
    from .answers import TopicInfo
    from .storage import BrokerStorage

FILE = "topic-configs.json"

# DescribeConfigsResponse's ConfigSource and ConfigType (Kafka's DescribeConfigsResponse enums)
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7

# name -> (type, Kafka's default, doc); the defaults are TopicConfig's / LogConfig's
KEYS: dict[str, tuple[int, str, str]] = {
    "cleanup.policy": (LIST, "delete", "delete or compact the log's old segments"),
    "delete.retention.ms": (LONG, "86400000", "how long a compacted topic keeps tombstones after cleaning"),
    "local.retention.bytes": (LONG, "-2", "what a tiered partition keeps locally, in bytes (-2: as retention.bytes)"),
    "local.retention.ms": (LONG, "-2", "how long a tiered partition keeps segments locally (-2: as retention.ms)"),
    "message.timestamp.type": (STRING, "CreateTime", "CreateTime or LogAppendTime"),
    "remote.storage.enable": (BOOLEAN, "false", "whether the topic's closed segments are tiered"),
    "retention.bytes": (LONG, "-1", "the partition's size past which old segments are deleted"),
    "retention.ms": (LONG, "604800000", "the age past which old segments are deleted"),
    "segment.bytes": (INT, "1073741824", "the size at which a segment is rolled"),
    "segment.jitter.ms": (LONG, "0", "the most a segment's time-based roll is brought forward, at random"),
    "segment.ms": (LONG, "604800000", "the age at which a segment is rolled"),
}
# what a topic may be made with (TopicInfo's fields, where this broker has them) -> its config
_MADE_WITH = {"local_retention_ms": "local.retention.ms", "local_retention_bytes": "local.retention.bytes",
              "segment_ms": "segment.ms", "segment_jitter_ms": "segment.jitter.ms"}
SETTABLE = frozenset({"delete.retention.ms"})
# the broker's own keys (a BROKER resource): name -> (type, Kafka's default, doc), as KafkaConfig
# and RemoteLogManagerConfig define them
BROKER_KEYS: dict[str, tuple[int, str, str]] = {
    "log.segment.bytes": (INT, "1073741824", "the size at which a segment is rolled"),
    "remote.fetch.max.wait.ms": (INT, "500", "how long a Fetch waits for a read of remote storage (KIP-1018)"),
    "remote.log.storage.system.enable": (BOOLEAN, "false", "whether the broker tiers to remote storage"),
}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str
    source: int
    type: int
    doc: str


def _path(data_dir: str) -> str:
    return os.path.join(data_dir, FILE)


def _load(data_dir: str) -> dict:
    try:
        with open(_path(data_dir)) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def set_overrides(data_dir: str, topic_id: str, values: dict[str, str | None]) -> None:
    """Set (or, with None, remove) topic-level overrides of the topic with ``topic_id``."""
    for name in values:
        if name not in SETTABLE:
            raise StorageError("INVALID_CONFIG", f"{name!r} cannot be overridden on the embedded broker "
                                                 f"(settable: {sorted(SETTABLE)}; the rest follow from how "
                                                 f"the topic was made)")
    with _LOCK:
        doc = _load(data_dir)
        mine = doc.setdefault(topic_id, {})
        for name, value in values.items():
            if value is None:
                mine.pop(name, None)
            else:
                mine[name] = str(value)
        tmp = _path(data_dir) + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, _path(data_dir))


def describe(storage: "BrokerStorage", info: "TopicInfo") -> list[ConfigEntry]:
    """Every key of :data:`KEYS` for the topic ``info``, with where its value comes from."""
    broker = {"segment.bytes": str(storage.segment_bytes)}      # log.segment.bytes
    for field, name in (("segment_ms", "segment.ms"), ("segment_jitter_ms", "segment.jitter.ms")):
        if getattr(storage, field, None) is not None:          # log.roll.ms, log.roll.jitter.ms
            broker[name] = str(getattr(storage, field))
    made: dict[str, str] = {name: str(getattr(info, field)) for field, name in _MADE_WITH.items()
                            if getattr(info, field, None) is not None}
    if info.retention_ms is not None:
        made["retention.ms"] = str(info.retention_ms)
    if info.retention_bytes is not None:
        made["retention.bytes"] = str(info.retention_bytes)
    if info.log_append_time:
        made["message.timestamp.type"] = "LogAppendTime"
    if info.name == rlm.TOPIC:
        # TopicBasedRemoteLogMetadataManager makes it with remote.log.metadata.topic.retention.ms
        # (-1, kept for ever); KIP-1266 would make it compacted
        made["retention.ms"] = "-1"
        if storage.rlmm is not None and storage.rlmm.kip1266:
            made["cleanup.policy"] = "compact"
    elif storage.store is not None:
        made["remote.storage.enable"] = "true"
    made.update(_load(storage.data_dir).get(info.topic_id, {}))
    out = []
    for name, (kind, default, doc) in sorted(KEYS.items()):
        if name in made:
            value, source = made[name], DYNAMIC_TOPIC_CONFIG
        elif name in broker:
            value, source = broker[name], STATIC_BROKER_CONFIG
        else:
            value, source = default, DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, source, kind, doc))
    return out


def describe_broker(storage: "BrokerStorage", remote_fetch_max_wait_ms: int) -> list[ConfigEntry]:
    """Every key of :data:`BROKER_KEYS` for the broker, with where its value comes from (what
    the cluster was started with is its static configuration, as server.properties is)."""
    static = {"log.segment.bytes": str(storage.segment_bytes),
              "remote.fetch.max.wait.ms": str(remote_fetch_max_wait_ms),
              "remote.log.storage.system.enable": "true" if storage.store is not None else "false"}
    out = []
    for name, (kind, default, doc) in sorted(BROKER_KEYS.items()):
        value = static.get(name, default)
        out.append(ConfigEntry(name, value, DEFAULT_CONFIG if value == default else STATIC_BROKER_CONFIG, kind, doc))
    return out
