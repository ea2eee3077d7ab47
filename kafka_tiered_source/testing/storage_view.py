"""What a partition, the RemoteLogManager tasks and the log-directory import use of the broker's
storage (:class:`~.storage.BrokerStorage`): its settings and the partitions it holds.  Named here
as a Protocol so that those modules, which the storage itself builds on, need not import it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .remote import RemoteStore
    from .rlmm import RemoteLogMetadataWriter
    from .tiering import TieringConfig


class StorageView(Protocol):
    """The broker storage as its parts see it."""

    data_dir: str
    segment_bytes: int
    segment_ms: int | None
    segment_jitter_ms: int
    index_interval_bytes: int
    local_retention_bytes: int | None
    local_retention_ms: int | None
    store: "RemoteStore | None"
    tiering: "TieringConfig"
    rlmm: "RemoteLogMetadataWriter | None"

    # Any: a Partition (``.partition``), which imports this module
    def partition(self, topic: str, partition: int) -> Any: ...

    def ensure_partition(self, topic: str, partition: int) -> Any: ...
