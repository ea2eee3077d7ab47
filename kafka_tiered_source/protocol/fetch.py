"""Fetch requests, built in one place (:class:`FetchBuilder`), and their answers
(:class:`FetchResult`): for one partition (:meth:`~.client.BrokerClient.fetch`) or many
(:func:`~.rounds.fetch_rounds`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..dataclass import dataclass
from ..errors import BrokerError
from . import kip1248, messages as m
from .connection import BrokerConnection
from .errors import broker_error

if TYPE_CHECKING:
    from .cluster import TopicInfo

ZERO_UUID = bytes(16)     # a topic id Kafka has not assigned (or a broker did not send)


@dataclass(frozen=True)
class FetchResult:
    """One partition's fetch answer.  ``partition`` is the decoded
    ``FetchResponse.PartitionData`` (``records`` is a memoryview into the response frame,
    KIP-1248 fields included); ``kip1248_requested`` says whether the tags were sent."""

    topic: str
    partition_index: int
    partition: Any                # FetchResponse.PartitionData
    version: int
    broker: str
    kip1248_requested: bool
    throttle_time_ms: int = 0     # the broker's quota throttle (KIP-13); already waited out
    node_id: int | None = None    # the broker that answered (BrokerClient.fetch)
    leader_epoch: int = -1        # the current_leader_epoch the request was fenced with (-1: none)

    @property
    def records(self):
        return self.partition.records

    @property
    def has_remote_location(self) -> bool:
        return kip1248.has_remote_location(self.partition)

    @property
    def error(self) -> BrokerError | None:
        """The partition's error code as an exception (None when it has none)."""
        code = self.partition.error_code
        if not code:
            return None
        return broker_error(code, broker=self.broker, api="Fetch", topic=self.topic,
                            partition=self.partition_index)


@dataclass(frozen=True)
class FetchAsk:
    """One partition of a Fetch request: where to read and how much at most."""
    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int = -1


class FetchBuilder:
    """The Fetch requests to one broker and their answers.

    The version is the highest both sides speak, at most 12 when a topic's id is unknown (v13+
    name topics by id only); the KIP-1248 tags go along when asked for and the version is
    flexible (12+).  Requests are sessionless (session 0, epoch -1), as a consumer without fetch
    sessions sends them.  Build one with :meth:`BrokerClient.fetch_builder`."""

    def __init__(self, conn: BrokerConnection, topics: dict[str, TopicInfo], *, rack: str,
                 request_remote_location: bool = False,
                 storage_formats: tuple[str, ...] = (kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1,)):
        at_most = 12 if any(info.topic_id == ZERO_UUID for info in topics.values()) else None
        self.version: int = conn.pick_version(m.FetchRequest, at_most=at_most)
        self.send_tags: bool = request_remote_location and self.version >= kip1248.MIN_FETCH_VERSION
        self.broker: str = conn.address
        self._topics = topics
        self._names = {info.topic_id: name for name, info in topics.items()}
        self._rack = rack
        self._storage_formats = list(storage_formats)

    @property
    def topics(self) -> dict[str, TopicInfo]:
        """The topics asked about, by name."""
        return self._topics

    def name_of(self, topic_id: bytes) -> str | None:
        """The name of an asked topic, by id (None: not one of them)."""
        return self._names.get(topic_id)

    def request(self, asks: Iterable[FetchAsk], *, max_wait_ms: int, min_bytes: int, max_bytes: int,
                isolation_level: int) -> Any:
        """A ``FetchRequest`` for ``asks`` (topics in the order they first appear)."""
        F = m.FetchRequest
        by_topic: dict[str, list] = {}
        for a in asks:
            by_topic.setdefault(a.topic, []).append(F.FetchPartition(
                partition=a.partition, fetch_offset=a.offset, current_leader_epoch=a.leader_epoch,
                partition_max_bytes=a.max_bytes))
        topics = []
        for name, parts in by_topic.items():
            ft = F.FetchTopic(partitions=parts)
            if self.version >= 13:
                ft.topic_id = self._topics[name].topic_id
            else:
                ft.topic = name
            topics.append(ft)
        req = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=topics,
                rack_id=self._rack)
        if self.send_tags:
            req.remote_log_segment_location_requested = True
            req.supported_storage_format_versions = list(self._storage_formats)
        return req

    def results(self, resp: Any) -> Iterator[FetchResult]:
        """Each partition of ``resp`` of a topic this builder asks about, errors included
        (:attr:`FetchResult.error`); an error of the whole response raises."""
        if resp.error_code:
            raise broker_error(resp.error_code, broker=self.broker, api="Fetch")
        throttle = resp.throttle_time_ms or 0
        for t in resp.responses:
            topic = self._names.get(t.topic_id) if self.version >= 13 else t.topic
            if topic is None or topic not in self._topics:
                continue
            for p in t.partitions:
                yield FetchResult(topic, p.partition_index, p, self.version, self.broker, self.send_tags,
                                  throttle)
