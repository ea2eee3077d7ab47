"""The cluster as a client learns it from Metadata and ListOffsets answers: brokers, topics and
their partitions' leaders, and listed offsets (:class:`~.client.BrokerClient` returns them; the
fetch builder routes by them)."""
from __future__ import annotations

from ..dataclass import dataclass



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


__all__ = ["BrokerNode", "ListedOffset", "PartitionInfo", "TopicInfo"]
