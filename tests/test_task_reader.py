"""The executor-side reader on its own (no Spark): prefetching across the ranges of a task,
and that every GET is counted under the topic-partition it was made for."""
from __future__ import annotations

import glob
import math
import os

import pytest

from broker_fixtures import fixture_expected, fixture_segments

from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster

pytestmark = pytest.mark.decoder


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    base = tmp_path_factory.mktemp("task-reader")
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote") as c:
        for p in (0, 1):
            c.import_log_dir("orders", p, fixture_segments("orders", p))
        assert c.tier()
        c.remote_dir = str(base / "remote")
        yield c


def _object(root: str, segment_id: str, suffix: str) -> str:
    """The one object of the segment with that id and suffix under ``root``."""
    found = glob.glob(os.path.join(root, "**", f"*-{segment_id}{suffix}"), recursive=True)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("part_size", [4096, 8 << 20])
def test_one_task_over_two_partitions_counts_each_get_under_its_partition(tiered, part_size):
    options = ReadOptions.parse({
        "kafka.bootstrap.servers": tiered.bootstrap_servers, "subscribe": "orders",
        "remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{tiered.remote_dir}",
        "fetch.remote.part.size.bytes": str(part_size), "client.id": "attribution"})
    plan = planning.plan(options)
    tasks = [t for t in plan.tasks if t.ranges]
    assert len(tasks) == 1 and {r.partition for r in tasks[0].ranges} == {0, 1}
    reader = TaskReader(options)
    rows = {0: [], 1: []}
    for batch in reader.read(tasks[0]):
        for p, off in zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(), strict=True):
            rows[p].append(off)
    reader.close()
    for p in (0, 1):
        assert rows[p] == [r["offset"] for r in fixture_expected("orders", p, False)]
    totals = reader.metrics.snapshot()
    stats = {tags: s for tags, s in totals.by_tags.items() if s.remote_requests}
    # every GET is tagged with a topic and partition, none with an empty scope
    assert all(tags[1] == "orders" and tags[2] in (0, 1) for tags in stats)
    per_partition = {p: totals.total(partition=p) for p in (0, 1)}
    for p in (0, 1):
        segments = [r for r in tasks[0].ranges if r.partition == p and hasattr(r, "segment")]
        planned = sum(r.byte_end - r.byte_start for r in segments)
        # the Aiven layout: each segment's manifest object once (its size on disk), then the
        # planned byte ranges in GETs of at most fetch.remote.part.size.bytes
        manifests = [r for r in segments if r.segment.manifest_info is None]
        manifest_bytes = sum(os.path.getsize(_object(tiered.remote_dir, r.segment.segment_id, ".rsm-manifest"))
                             for r in manifests)
        assert per_partition[p].remote_bytes == planned + manifest_bytes
        assert per_partition[p].remote_requests == len(manifests) + sum(
            math.ceil((r.byte_end - r.byte_start) / part_size) for r in segments)
    assert sum(s.remote_requests for s in per_partition.values()) == totals.total().remote_requests


class _Range:
    def __init__(self, segment, start, end, partition):
        self.segment, self.byte_start, self.byte_end = segment, start, end
        self.topic, self.partition = "t", partition


def test_the_prefetcher_hands_over_every_byte_once_in_order():
    """Ranges of two partitions, in many small parts from a store fast enough that GETs (and
    the ranges' planning) are often done before their completion callbacks are added, which
    run at once then: each range's bytes arrive exactly once, in order, every time."""
    import random
    from kafka_tiered_source.executor.prefetch import RangePrefetcher
    from kafka_tiered_source.storage import create_fetcher
    from kafka_tiered_source.storage.segment import RemoteSegment
    from storage_servers import DictFetcher
    data = random.Random(5).randbytes(3_000_000)
    DictFetcher.STORES["prefetch"] = {"t/0.log": data, "t/1.log": data[::-1]}
    fetcher = create_fetcher({"remote.storage.fetcher.class": "storage_servers:DictStore",
                              "remote.storage.custom.store": "prefetch", "remote.storage.layout": "template",
                              "remote.storage.layout.template": "{topic}/{partition}.{suffix}",
                              "fetch.remote.part.size.bytes": str(100_000)})
    segs = {p: RemoteSegment("t", "MWJ6FHTfRYy67jzwZdeqSQ", p, "tqimKeZwStOEOwRzT3L5oQ", 0, 9) for p in (0, 1)}
    cuts = [0, 700_000, 1_500_000, 2_999_999, 3_000_000]
    ranges = [_Range(segs[p], a, b, p) for a, b in zip(cuts, cuts[1:], strict=False) for p in (0, 1)]
    for _ in range(20):
        prefetch = RangePrefetcher(fetcher, ranges, concurrency=4)
        try:
            for i, r in enumerate(ranges):
                source = data if r.partition == 0 else data[::-1]
                got = b"".join(bytes(p) for p in prefetch.pieces(i))
                assert got == source[r.byte_start:r.byte_end], (i, len(got))
        finally:
            prefetch.close()
