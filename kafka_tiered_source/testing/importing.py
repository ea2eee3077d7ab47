"""Adopting a partition directory written by Apache Kafka itself (the fixtures in
tests/fixtures, or a real broker's log dir) as a partition of the embedded broker."""
from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from ..errors import KafkaTieredError
from .answers import PartitionOffsets
from .epochs import CHECKPOINT
from .log import StorageError

if TYPE_CHECKING:
    from .storage_view import StorageView


def import_log_dir(storage: StorageView, topic: str, partition: int, path: str) -> PartitionOffsets:
    """Adopt Kafka segment files (``*.log`` with their ``.txnindex``) as the partition's log,
    offsets and batches unchanged; missing or differing indexes are rebuilt.  Creates the
    topic (or adds partitions) as needed; the partition must be empty."""
    names = sorted(n for n in os.listdir(path) if n.endswith(".log") and n[:-4].isdigit())
    if not names:
        raise KafkaTieredError(f"import_log_dir: no %020d.log segment files in {path}")
    part = storage.ensure_partition(topic, partition)
    with part.lock:
        if part.log.log_end_offset != part.log.local_start_offset or \
                (part.remote and part.remote.segments):
            raise StorageError("INVALID_PARTITIONS", "import_log_dir needs an empty partition",
                               topic=topic, partition=partition)
        for seg in part.log.segments:
            seg.delete()
        for n in names:
            base = n[:-4]
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                src = os.path.join(path, base + suffix)
                if os.path.exists(src):
                    shutil.copyfile(src, os.path.join(part.dir, base + suffix))
        # the leader epochs: Kafka's own checkpoint when it came along, else the
        # epochs the imported batches carry (rebuilt by load)
        part.log.epochs.discard()
        theirs = os.path.join(path, CHECKPOINT)
        if os.path.exists(theirs):
            shutil.copyfile(theirs, part.log.epochs.path)
        part.log.load()
        first = part.log.segments[0]
        heads = next(first.headers_from(0), None)
        part.log_start_offset = heads.base_offset if heads else first.base_offset
        part.save()
        return part.offsets()
