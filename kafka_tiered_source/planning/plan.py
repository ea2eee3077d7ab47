"""What planning produces: the resolved offsets of each partition and the read tasks."""
from __future__ import annotations


from ..dataclass import dataclass, field
from .tasks import BrokerRange, ReadTask, RemoteRange


@dataclass(frozen=True)
class PartitionRange:
    """The resolved offsets of one topic-partition: read ``[start, end)``.  ``log_start`` and
    ``latest`` are the lowest and highest offsets readable (latest is exclusive: the high
    watermark, the LSO for read_committed, or offline the end of the tiered range)."""
    topic: str
    partition: int
    topic_id: str
    start: int
    end: int
    log_start: int
    latest: int


@dataclass
class Plan:
    """What planning found, for the reader and for estimates.  ``locators`` names, per
    (topic, partition), how its tiered segments were found (``kip1248``, ``listing``) or
    ``broker`` when everything is fetched through the brokers."""
    tasks: list[ReadTask]
    partitions: list[PartitionRange]
    remote_segments: int = 0
    locators: dict = field(default_factory=dict)           # (topic, partition) -> locator name
    # read_committed: (topic, partition) -> txn_ends.MarkerCost, what finding the markers of
    # transactions open at the range's end cost (later transaction indexes, broker fetches)
    marker_costs: dict = field(default_factory=dict)

    @property
    def remote_ranges(self) -> list[RemoteRange]:
        return [r for t in self.tasks for r in t.ranges if isinstance(r, RemoteRange)]

    @property
    def broker_ranges(self) -> list[BrokerRange]:
        return [r for t in self.tasks for r in t.ranges if isinstance(r, BrokerRange)]
