"""Reading without a broker (issue 6): segments found by listing the object store.

Kafka 3.9.1 fixture partitions are imported into the embedded broker, tiered (aiven with and
without chunk compression, kafka-local-tiered; file:// and S3 on a moto server), and the broker
is STOPPED.  Then ``plan_offline`` + ``TaskReader`` (and once ``spark.read``) must give exactly
the fixtures' expected records for the tiered offsets.  For read_committed the expected rows also
stop where remote storage stops being able to tell whether a transaction aborted: that point is
computed here independently, by walking every batch header of the fixture ``.log`` files that
were tiered (not the planner's shortcut through the transaction indexes).
"""
from __future__ import annotations

import logging
import os
import shutil
import struct

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, fixture_segments, import_and_tier
from spark_helpers import arrow_rows, collect_rows, expected_rows, first_difference, load
from storage_servers import S3_KEY_ID, S3_SECRET, MotoS3

from kafka_tiered_source.errors import ConfigError, DataLossError
from kafka_tiered_source.ids import random_uuid, uuid_to_str
from kafka_tiered_source.errors import OfflinePlanningError
from kafka_tiered_source.planning.offline import plan_offline
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.storage import aiven, layouts
from kafka_tiered_source.options import FetcherConfig
from kafka_tiered_source.errors import ListingNotSupported
from kafka_tiered_source.storage.registry import create_fetcher
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster


ISOLATION = ["read_uncommitted", "read_committed"]
ALL_TOPICS = "orders,payments,compacted"
S3_TOPICS = (("payments", 0), ("compacted", 0))


def _tier(base, remote_storage, partitions, **kwargs) -> dict:
    """Import, tier, record what was tiered, stop.  Returns {(topic, p): [(base, end), ...]}."""
    c = EmbeddedCluster(str(base / "data"), remote_storage=remote_storage, **kwargs).start()
    try:
        import_and_tier(c, partitions)
        return {(t, p): sorted((s.base_offset, s.end_offset) for s in c.remote_segments(t, p))
                for t, p in partitions}
    finally:
        c.stop()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """name -> (options for the store, {(topic, p): tiered (base, end) list}); brokers stopped."""
    out = {}
    for name, layout, compression in (("file-aiven-zstd", "aiven", True),
                                       ("file-local-tiered", "kafka-local-tiered", False)):
        base = tmp_path_factory.mktemp(name)
        tiered = _tier(base, f"file://{base}/remote", FIXTURE_PARTITIONS, layout=layout,
                       chunk_compression=compression, chunk_size=64 * 1024)
        out[name] = ({"remote.storage.uri": f"file://{base}/remote", "remote.storage.layout": layout},
                     tiered)
    moto = MotoS3().start()
    try:
        moto.client().create_bucket(Bucket="tiered")
        for name, layout in (("s3-aiven", "aiven"), ("s3-local-tiered", "kafka-local-tiered")):
            base = tmp_path_factory.mktemp(name)
            prefix = f"kt-{layout}"
            tiered = _tier(base, f"s3://tiered/{prefix}", S3_TOPICS, layout=layout,
                           s3_endpoint_url=moto.endpoint, s3_region="us-east-1",
                           s3_access_key_id=S3_KEY_ID, s3_secret_access_key=S3_SECRET)
            out[name] = ({"remote.storage.uri": f"s3://tiered/{prefix}", "remote.storage.layout": layout,
                          "remote.storage.s3.endpoint": moto.endpoint,
                          "remote.storage.s3.region": "us-east-1",
                          "remote.storage.s3.access.key.id": S3_KEY_ID,
                          "remote.storage.s3.secret.access.key": S3_SECRET}, tiered)
        yield out
    finally:
        moto.stop()


def _open_txn_start(topic: str, partition: int, tiered_end: int) -> int | None:
    """First offset of the earliest transaction with records below ``tiered_end`` and no control
    batch below it, from a full walk of the fixture's .log files (offset 0 on)."""
    folder = fixture_segments(topic, partition)
    open_first: dict = {}
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".log")):
        data = open(os.path.join(folder, name), "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            attrs, = struct.unpack_from(">h", data, pos + 21)
            pid, = struct.unpack_from(">q", data, pos + 43)
            pos += 12 + length
            if base_offset >= tiered_end:
                break
            if pid < 0:
                continue
            if attrs & 0x20:
                open_first.pop(pid, None)
            elif attrs & 0x10:
                open_first.setdefault(pid, base_offset)
    return min(open_first.values(), default=None)


def _readable_end(iso: str, topic: str, partition: int, tiered) -> int:
    end = tiered[-1][1] + 1
    if iso == "read_committed":
        first_open = _open_txn_start(topic, partition, end)
        if first_open is not None:
            end = min(end, first_open)
    return end


def _options(store_opts: dict, **extra) -> ReadOptions:
    return ReadOptions.parse({"includeHeaders": "true", **store_opts, **extra})


def _read(options: ReadOptions, plan) -> dict:
    reader = TaskReader(options)
    got: dict = {}
    try:
        for task in plan.tasks:
            for key, rows in arrow_rows(reader.read(task)).items():
                got.setdefault(key, []).extend(rows)
    finally:
        reader.close()
    return got


# ---------------------------------------------------------------------------------------------
# reading everything tiered
# ---------------------------------------------------------------------------------------------
@pytest.mark.decoder
@pytest.mark.parametrize("iso", ISOLATION)
@pytest.mark.parametrize("store", ["file-aiven-zstd", "file-local-tiered", "s3-aiven", "s3-local-tiered"])
def test_offline_read_equals_expected(stores, store, iso):
    store_opts, tiered = stores[store]
    topics = ",".join(sorted({t for t, _ in tiered}))
    options = _options(store_opts, subscribe=topics, **{"kafka.isolation.level": iso})
    assert options.offline
    plan = plan_offline(options)
    got = _read(options, plan)
    assert {(r.topic, r.partition) for r in plan.partitions} == set(tiered)
    for (topic, p), segs in tiered.items():
        end = _readable_end(iso, topic, p, segs)
        want = [r for r in expected_rows(topic, p, iso == "read_committed") if r["offset"] < end]
        rows = got.get((topic, p), [])
        assert rows == want, f"{store} {iso} {topic}-{p}: {first_difference(rows, want)}"
        pr = next(r for r in plan.partitions if (r.topic, r.partition) == (topic, p))
        assert (pr.log_start, pr.latest) == (segs[0][0], end)


@pytest.mark.decoder
def test_read_committed_stops_before_an_open_transaction_and_says_why(stores, caplog):
    store_opts, tiered = stores["file-aiven-zstd"]
    tiered_end = tiered[("payments", 0)][-1][1] + 1
    stable = _open_txn_start("payments", 0, tiered_end)
    # The fixture has transactions whose markers were not tiered: the interesting case.
    assert stable is not None and stable < tiered_end
    options = _options(store_opts, subscribe="payments", **{"kafka.isolation.level": "read_committed"})
    with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.offline"):
        plan = plan_offline(options)
    assert plan.partitions[0].end == stable
    assert any(f"stops at offset {stable}" in r.getMessage() for r in caplog.records)
    # asking for more is an error that names the partition and the transaction
    late = _options(store_opts, subscribe="payments", endingOffsets=f'{{"payments":{{"0":{stable + 1}}}}}',
                    **{"kafka.isolation.level": "read_committed"})
    with pytest.raises(ConfigError, match=rf"payments-0: ending offset {stable + 1} .*offset {stable}") as err:
        plan_offline(late)
    assert err.value.option == "endingOffsets" and "producer" in str(err.value)
    # read_uncommitted reads up to the last tiered offset
    plain = plan_offline(_options(store_opts, subscribe="payments"))
    assert plain.partitions[0].end == tiered_end


def test_tasks_carry_the_manifests_the_planner_read(stores):
    """Offline, the planner reads every Aiven manifest (sizes, end offsets) anyway; the tasks
    carry what the reader needs of it, so no executor GETs a manifest.  Before, each task GOT
    the manifest of every segment it read.  GETs counted on a proxy in front of the S3 server."""
    from dataclasses import replace
    from urllib.parse import urlsplit

    from spark_helpers import read_as_executors, without_manifest_info
    from storage_servers import FaultProxy

    from kafka_tiered_source.planning.estimate import estimate_plan
    store_opts, tiered = stores["s3-aiven"]
    proxy = FaultProxy(urlsplit(store_opts["remote.storage.s3.endpoint"]).port).start()
    try:
        options = _options({**store_opts, "remote.storage.s3.endpoint": proxy.endpoint},
                           subscribe="payments,compacted", **{"partition.target.bytes": "30000"})
        plan = plan_offline(options)
        segments = {r.segment.segment_id for r in plan.remote_ranges}
        assert len(proxy.gets(".rsm-manifest")) == len(segments)     # the planner's, one each
        assert all(r.segment.manifest_info is not None for r in plan.remote_ranges)
        assert estimate_plan(plan, options).manifest_gets == 0
        proxy.reset()
        rows = read_as_executors(options, plan.tasks)
        assert proxy.gets(".rsm-manifest") == []
        for (topic, p), segs in tiered.items():
            want = [r for r in expected_rows(topic, p, False) if r["offset"] <= segs[-1][1]]
            assert rows[(topic, p)] == want, first_difference(rows[(topic, p)], want)
        # the old path: one manifest GET per segment per task, the same rows
        bare = without_manifest_info(plan.tasks)
        before = estimate_plan(replace(plan, tasks=bare), options).manifest_gets
        assert before > len(segments)            # segments split over several tasks
        proxy.reset()
        assert read_as_executors(options, bare) == rows
        assert len(proxy.gets(".rsm-manifest")) == before
    finally:
        proxy.stop()


@pytest.mark.decoder
@pytest.mark.parametrize("store", ["file-aiven-zstd", "file-local-tiered"])
def test_split_tasks_read_committed(stores, store):
    """Many small tasks: each gets the aborted transactions valid at its own first offset."""
    store_opts, tiered = stores[store]
    options = _options(store_opts, subscribe="payments", minPartitions="9", maxRecordsPerPartition="150",
                       **{"kafka.isolation.level": "read_committed"})
    plan = plan_offline(options)
    assert len(plan.tasks) >= 9
    for task in plan.tasks:
        (info,) = task.txn
        assert info.last_stable_offset == plan.partitions[0].latest
    got = _read(options, plan)
    end = _readable_end("read_committed", "payments", 0, tiered[("payments", 0)])
    want = [r for r in expected_rows("payments", 0, True) if r["offset"] < end]
    assert got[("payments", 0)] == want, first_difference(got[("payments", 0)], want)


@pytest.mark.decoder
def test_offset_bounds_and_assign(stores):
    store_opts, tiered = stores["file-local-tiered"]
    options = _options(store_opts, assign='{"orders":[1],"compacted":[0]}',
                       startingOffsets='{"orders":{"1":1200},"compacted":{"0":-2}}',
                       endingOffsets='{"orders":{"1":1500},"compacted":{"0":2000}}')
    got = _read(options, plan_offline(options))
    want = [r for r in expected_rows("orders", 1, False) if 1200 <= r["offset"] < 1500]
    assert got[("orders", 1)] == want
    want = [r for r in expected_rows("compacted", 0, False) if r["offset"] < 2000]
    assert got[("compacted", 0)] == want


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------
def test_unknown_topic(stores):
    store_opts, _ = stores["file-aiven-zstd"]
    with pytest.raises(ConfigError, match=r"topic 'nope' has no tiered segments.*compacted, orders, payments") as err:
        plan_offline(_options(store_opts, subscribe="orders,nope"))
    assert err.value.option == "subscribe"


def test_subscribe_pattern(stores):
    store_opts, tiered = stores["file-local-tiered"]
    plan = plan_offline(_options(store_opts, subscribePattern="ord.*"))
    assert sorted((r.topic, r.partition) for r in plan.partitions) == [("orders", 0), ("orders", 1)]
    with pytest.raises(ConfigError, match="subscribePattern matches none of the topics") as err:
        plan_offline(_options(store_opts, subscribePattern="nothing.*"))
    assert err.value.option == "subscribePattern"


def test_assign_partition_without_tiered_segments(stores):
    store_opts, _ = stores["file-aiven-zstd"]
    with pytest.raises(ConfigError, match=r"orders-7, which has no tiered segments.*\[0, 1\]") as err:
        plan_offline(_options(store_opts, assign='{"orders":[7]}'))
    assert err.value.option == "assign"


@pytest.mark.decoder
def test_ending_offset_past_the_last_tiered_offset(stores):
    store_opts, tiered = stores["s3-aiven"]
    last = tiered[("payments", 0)][-1][1]
    options = _options(store_opts, subscribe="payments", endingOffsets=f'{{"payments":{{"0":{last + 2}}}}}')
    with pytest.raises(ConfigError, match=rf"payments-0: ending offset {last + 2} .*up to offset {last}\).*"
                                          rf"last tiered offset is {last}") as err:
        plan_offline(options)
    assert err.value.option == "endingOffsets"
    # exactly the end is fine
    ok = _options(store_opts, subscribe="payments", endingOffsets=f'{{"payments":{{"0":{last + 1}}}}}')
    assert plan_offline(ok).partitions[0].end == last + 1


@pytest.mark.decoder
def test_starting_offset_below_the_first_tiered_offset(stores):
    store_opts, _ = stores["file-aiven-zstd"]
    with pytest.raises(DataLossError, match="orders-1: starting offset 10 is below the first tiered offset 1000"):
        plan_offline(_options(store_opts, assign='{"orders":[1]}', startingOffsets='{"orders":{"1":10}}'))
    plan = plan_offline(_options(store_opts, assign='{"orders":[1]}', startingOffsets='{"orders":{"1":10}}',
                                 failOnDataLoss="false"))
    assert plan.partitions[0].start == 1000


@pytest.mark.decoder
def test_timestamps_are_resolved_offline(stores):
    """Resolved from the time indexes (issue 16; tests/test_offline_timestamps.py compares them
    with the broker's ListOffsets): 1700000000000 precedes every orders record."""
    store_opts, tiered = stores["file-aiven-zstd"]
    plan = plan_offline(_options(store_opts, subscribe="orders", startingTimestamp="1700000000000"))
    assert [(r.partition, r.start) for r in plan.partitions] == [(0, tiered[("orders", 0)][0][0]),
                                                                  (1, tiered[("orders", 1)][0][0])]


def test_presigned_fetcher_offline_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="'presigned' but no 'kafka.bootstrap.servers'") as err:
        ReadOptions.parse({"subscribe": "t", "remote.storage.layout": "aiven",
                           "remote.storage.fetcher": "presigned"})
    assert err.value.option == "remote.storage.fetcher"
    fetcher = create_fetcher({"remote.storage.fetcher": "presigned"})
    with pytest.raises(ListingNotSupported, match="cannot list"):
        list(fetcher.list_objects(""))


@pytest.mark.decoder
def test_other_offline_option_errors(tmp_path):
    with pytest.raises(ConfigError, match="remote.storage.uri") as err:
        ReadOptions.parse({"subscribe": "t"})
    assert err.value.option == "kafka.bootstrap.servers"
    with pytest.raises(ConfigError) as err:
        ReadOptions.parse({"subscribe": "t", "remote.storage.uri": f"file://{tmp_path}",
                           "fetch.remote.enabled": "false"})
    assert err.value.option == "fetch.remote.enabled"
    with pytest.raises(ConfigError) as err:
        ReadOptions.parse({"subscribe": "t", "remote.storage.uri": f"file://{tmp_path}",
                           "remote.storage.layout": "template",
                           "remote.storage.layout.template": "{topic}/{base_offset}.{suffix}"})
    assert err.value.option == "remote.storage.layout"
    # the URI alone selects offline mode (layout defaults to aiven)
    assert ReadOptions.parse({"subscribe": "t", "remote.storage.uri": f"file://{tmp_path}"}).offline


def _copy_store(stores, name, tmp_path) -> str:
    src = stores[name][0]["remote.storage.uri"][len("file://"):]
    dst = str(tmp_path / "remote")
    shutil.copytree(src, dst)
    return dst


@pytest.mark.decoder
def test_two_topic_ids_for_one_topic_are_refused(stores, tmp_path):
    root = _copy_store(stores, "file-aiven-zstd", tmp_path)
    old = next(d for d in os.listdir(root) if d.startswith("orders-"))
    stale_id = uuid_to_str(random_uuid())
    shutil.copytree(os.path.join(root, old), os.path.join(root, f"orders-{stale_id}"))
    current_id = old[len("orders-"):]
    opts = {"remote.storage.uri": f"file://{root}", "remote.storage.layout": "aiven"}
    with pytest.raises(OfflinePlanningError, match="two or more topic ids") as err:
        plan_offline(_options(opts, subscribe="orders"))
    assert current_id in str(err.value) and stale_id in str(err.value)
    # other topics are unaffected
    assert plan_offline(_options(opts, subscribe="payments")).partitions


@pytest.mark.decoder
def test_incomplete_copy_is_skipped_and_duplicate_copies_refused(stores, tmp_path, caplog):
    root = _copy_store(stores, "file-aiven-zstd", tmp_path)
    opts = {"remote.storage.uri": f"file://{root}", "remote.storage.layout": "aiven"}
    part_dir = os.path.join(root, next(d for d in os.listdir(root) if d.startswith("payments-")), "0")
    first_log = sorted(f for f in os.listdir(part_dir) if f.endswith(".log"))[0]
    stem = first_log[:-len(".log")]
    base = stem.split("-", 1)[0]
    other = f"{base}-{uuid_to_str(random_uuid())}"
    # a failed copy: .log uploaded, no manifest
    shutil.copy(os.path.join(part_dir, first_log), os.path.join(part_dir, other + ".log"))
    options = _options(opts, subscribe="payments")
    with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.offline"):
        plan = plan_offline(options)
    assert any("incomplete" in r.getMessage() and other.split("-", 1)[1] in r.getMessage()
               for r in caplog.records)
    _, tiered = stores["file-aiven-zstd"]
    end = tiered[("payments", 0)][-1][1] + 1
    got = _read(options, plan)
    assert got[("payments", 0)] == [r for r in expected_rows("payments", 0, False) if r["offset"] < end]
    # a second complete copy of the same segment: which one is live cannot be told offline
    for suffix in ("indexes", "rsm-manifest"):
        shutil.copy(os.path.join(part_dir, f"{stem}.{suffix}"), os.path.join(part_dir, f"{other}.{suffix}"))
    with pytest.raises(OfflinePlanningError, match=rf"2 complete copies of the segment at offset {int(base)}"):
        plan_offline(options)


# ---------------------------------------------------------------------------------------------
# the pieces: URI shortcut, key parsing, listing
# ---------------------------------------------------------------------------------------------
@pytest.mark.decoder
@pytest.mark.parametrize("uri, fetcher, prefix, backend", [
    ("s3://bucket/some/prefix", "s3", "some/prefix/", {"remote.storage.s3.bucket": "bucket"}),
    ("s3://bucket", "s3", "", {"remote.storage.s3.bucket": "bucket"}),
    ("gs://bkt/p/", "gcs", "p/", {"remote.storage.gcs.bucket": "bkt"}),
    ("az://cont/p", "azure", "p/", {"remote.storage.azure.container": "cont"}),
    ("abfs://cont@acct.dfs.core.windows.net/x/y", "azure", "x/y/",
     {"remote.storage.azure.container": "cont", "remote.storage.azure.account.name": "acct"}),
    ("file:///data/tiered/", "fsspec", "", {"remote.storage.fsspec.url": "file:///data/tiered"}),
    ("memory://root", "fsspec", "", {"remote.storage.fsspec.url": "memory://root"}),
])
def test_uri_shortcut(uri, fetcher, prefix, backend):
    c = FetcherConfig.from_options({"remote.storage.uri": uri})
    assert (c.fetcher, c.prefix) == (fetcher, prefix)
    for key, value in backend.items():
        assert c.option(key) == value


@pytest.mark.decoder
def test_uri_conflicts_and_agreement():
    with pytest.raises(ConfigError, match="disagree") as err:
        FetcherConfig.from_options({"remote.storage.uri": "s3://a/p", "remote.storage.s3.bucket": "b"})
    assert err.value.option == "remote.storage.s3.bucket"
    with pytest.raises(ConfigError, match="disagree") as err:
        FetcherConfig.from_options({"remote.storage.uri": "s3://a/p", "remote.storage.fetcher": "gcs"})
    assert err.value.option == "remote.storage.fetcher"
    with pytest.raises(ConfigError, match="disagree"):
        FetcherConfig.from_options({"remote.storage.uri": "s3://a/p", "remote.storage.prefix": "q/"})
    with pytest.raises(ConfigError, match="scheme 'ftp'"):
        FetcherConfig.from_options({"remote.storage.uri": "ftp://a/p"})
    with pytest.raises(ConfigError, match="query"):
        FetcherConfig.from_options({"remote.storage.uri": "s3://a/p?X-Amz-Signature=abc"})
    with pytest.raises(ConfigError, match="credentials") as err:
        FetcherConfig.from_options({"remote.storage.uri": "s3://AKIASECRETKEY@a/p"})
    assert "AKIASECRETKEY" not in str(err.value)
    # the same values given twice agree; a non-directory prefix goes next to a bare URI
    c = FetcherConfig.from_options({"remote.storage.uri": "s3://a/p", "remote.storage.s3.bucket": "a",
                                    "remote.storage.prefix": "p/", "remote.storage.fetcher": "s3"})
    assert (c.option("remote.storage.s3.bucket"), c.prefix) == ("a", "p/")
    c = FetcherConfig.from_options({"remote.storage.uri": "s3://a", "remote.storage.prefix": "kafka-"})
    assert c.prefix == "kafka-"


@pytest.mark.decoder
def test_keys_parse_back_into_segments():
    for _ in range(50):   # random ids: some contain '-' and '_', which the topic names contain too
        tid, sid = uuid_to_str(random_uuid()), uuid_to_str(random_uuid())
        for topic in ("orders", "my-topic-1", "a.b_c-2"):
            for suffix in aiven.SUFFIXES:
                key = aiven.object_key("pre/fix-", topic, tid, 12, 345, sid, suffix)
                assert layouts.parse_aiven_key(key, "pre/fix-") == layouts.ParsedKey(topic, tid, 12, 345, sid, suffix)
            for suffix in layouts.LOCAL_TIERED_SUFFIXES.values():
                key = layouts.local_tiered_key("root/dir", topic, tid, 3, 99, sid, suffix)
                assert layouts.parse_local_tiered_key(key, "root/dir") == \
                    layouts.ParsedKey(topic, tid, 3, 99, sid, suffix)
                key = layouts.local_tiered_key("", topic, tid, 3, 99, sid, suffix, padded_offsets=False)
                assert layouts.parse_local_tiered_key(key, "", padded_offsets=False).base_offset == 99
                assert layouts.parse_local_tiered_key(key, "") is None   # not padded
    tid, sid = uuid_to_str(random_uuid()), uuid_to_str(bytes(15) + b"\x01")   # ...AQ: canonical
    good = aiven.object_key("", "t", tid, 0, 1, sid, "log")
    for bad in (good.replace(".log", ".txt"), good.replace("/0/", "/x/"), good[:-5] + ".log", good[:-5] + "B.log",
                "other/" + good, f"t-{tid}/0/1-{sid}.log"):
        assert layouts.parse_aiven_key(bad) is None, bad
    assert layouts.parse_aiven_key(good, "pre/") is None


@pytest.mark.decoder
def test_fsspec_listing_with_a_key_prefix(tmp_path):
    for rel in ("a/b/x.log", "a/bc/y.log", "a/z", "q.log"):
        os.makedirs(os.path.dirname(tmp_path / rel), exist_ok=True)
        (tmp_path / rel).write_bytes(b"x" * len(rel))
    f = create_fetcher({"remote.storage.uri": f"file://{tmp_path}"})
    assert sorted(f.list_objects("")) == [("a/b/x.log", 9), ("a/bc/y.log", 10), ("a/z", 3), ("q.log", 5)]
    assert sorted(f.list_objects("a/b")) == [("a/b/x.log", 9), ("a/bc/y.log", 10)]
    assert sorted(f.list_objects("a/b/")) == [("a/b/x.log", 9)]
    assert list(f.list_objects("missing/")) == []


# ---------------------------------------------------------------------------------------------
# through Spark
# ---------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_spark_read_offline(stores, spark):
    import kafka_tiered_source.spark as kts
    kts.register(spark)
    store_opts, tiered = stores["file-local-tiered"]
    df = load(spark, {"includeHeaders": "true", "assign": '{"payments":[0],"orders":[1]}',
                      "kafka.isolation.level": "read_committed", "minPartitions": "3", **store_opts})
    assert df.rdd.getNumPartitions() >= 3
    rows = collect_rows(df)
    assert set(rows) == {("payments", 0), ("orders", 1)}
    for topic, p in (("payments", 0), ("orders", 1)):
        end = _readable_end("read_committed", topic, p, tiered[(topic, p)])
        want = [r for r in expected_rows(topic, p, True) if r["offset"] < end]
        assert rows[(topic, p)] == want, f"{topic}-{p}: {first_difference(rows[(topic, p)], want)}"



# ---------------------------------------------------------------------------------------------
# listing on every backend that can list (real servers: moto, gcp-storage-emulator, Azurite)
# ---------------------------------------------------------------------------------------------
_LISTED = {"p/a/x.log": b"abc", "p/ab.log": b"abcdef", "q/z": b"z", "p/a/deeper/y.indexes": b"12"}


@pytest.mark.parametrize("backend", ["s3", "gcs", "azure", "file", "memory"])
def test_list_objects_on_every_backend(backend, tmp_path):
    from storage_servers import (Azurite, AzureBackend, FileBackend, GcsBackend, GcsEmulator,
                                 MemoryBackend, S3Backend, unique)
    server = None
    try:
        if backend == "s3":
            server = MotoS3().start()
            b = S3Backend(server, None, "listing")
        elif backend == "gcs":
            server = GcsEmulator().start()
            b = GcsBackend(server, None, "listing")
        elif backend == "azure":
            server = Azurite().start()
            b = AzureBackend(server, None, "listing")
        elif backend == "file":
            b = FileBackend(str(tmp_path))
        else:
            b = MemoryBackend(unique("/listing-"))
        for key, data in _LISTED.items():
            b.put(key, data)
        fetcher = create_fetcher(b.options())
        try:
            sizes = {k: len(v) for k, v in _LISTED.items()}
            assert sorted(fetcher.list_objects("")) == sorted(sizes.items())
            assert sorted(fetcher.list_objects("p/a")) == sorted(
                (k, n) for k, n in sizes.items() if k.startswith("p/a"))
            assert sorted(fetcher.list_objects("p/a/")) == [("p/a/deeper/y.indexes", 2), ("p/a/x.log", 3)]
            assert list(fetcher.list_objects("missing/")) == []
        finally:
            fetcher.close()
    finally:
        if server is not None:
            server.stop()


def test_s3_listing_follows_pages():
    """Several ListObjectsV2 pages (the page size lowered from S3's 1,000 so few keys do)."""
    moto = MotoS3().start()
    try:
        client = moto.client()
        client.create_bucket(Bucket="many")
        keys = [f"t/{i:05d}" for i in range(7)]
        for k in keys + ["u/0"]:
            client.put_object(Bucket="many", Key=k, Body=b"x")
        fetcher = create_fetcher({"remote.storage.uri": "s3://many", "remote.storage.s3.endpoint": moto.endpoint,
                                  "remote.storage.s3.region": "us-east-1",
                                  "remote.storage.s3.access.key.id": S3_KEY_ID,
                                  "remote.storage.s3.secret.access.key": S3_SECRET})
        fetcher.store.list_page_size = 2
        pages = []
        fetcher.store._client().meta.events.register(
            "after-call.s3.ListObjectsV2", lambda parsed, **kw: pages.append(parsed.get("KeyCount")))
        assert sorted(k for k, _ in fetcher.list_objects("t/")) == keys
        assert pages == [2, 2, 2, 1]
    finally:
        moto.stop()


# ---------------------------------------------------------------------------------------------
# the producer snapshot of the last tiered segment decides read_committed's end when present
# ---------------------------------------------------------------------------------------------
def _snapshot(entries) -> bytes:
    """Kafka's producer state snapshot v1: version, CRC-32C of the rest, int32-counted entries of
    (producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
    currentTxnFirstOffset)."""
    import crc32c
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", pid, 0, 10, 1700, 0, 1_700_000_000_000, 0, first) for pid, first in entries)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


@pytest.mark.decoder
def test_producer_snapshot_gives_the_open_transactions(stores, tmp_path, caplog):
    root = _copy_store(stores, "file-local-tiered", tmp_path)
    _, tiered = stores["file-local-tiered"]
    tiered_end = tiered[("payments", 0)][-1][1] + 1
    part_dir = os.path.join(root, next(d for d in os.listdir(root) if d.startswith("payments-0-")))
    last = sorted(f for f in os.listdir(part_dir) if f.endswith(".snapshot"))[-1]
    assert os.path.getsize(os.path.join(part_dir, last)) == 0   # the embedded broker writes none
    opts = {"remote.storage.uri": f"file://{root}", "remote.storage.layout": "kafka-local-tiered"}
    options = _options(opts, subscribe="payments", **{"kafka.isolation.level": "read_committed"})
    stable = _open_txn_start("payments", 0, tiered_end)

    # Snapshot with no transaction ongoing: believed (no header walk), read up to the tiered end.
    with open(os.path.join(part_dir, last), "wb") as f:
        f.write(_snapshot([(1000, -1), (1001, -1)]))
    assert plan_offline(options).partitions[0].latest == tiered_end

    # Snapshot naming ongoing transactions: the earliest one's first offset is the end.
    with open(os.path.join(part_dir, last), "wb") as f:
        f.write(_snapshot([(1000, -1), (1002, stable + 3), (1001, stable)]))
    plan = plan_offline(options)
    assert plan.partitions[0].latest == stable
    got = _read(options, plan)
    want = [r for r in expected_rows("payments", 0, True) if r["offset"] < stable]
    assert got[("payments", 0)] == want

    # A corrupt snapshot is not trusted: warned about, and the header walk decides.
    data = bytearray(_snapshot([(1001, 5)]))
    data[-1] ^= 0xFF
    with open(os.path.join(part_dir, last), "wb") as f:
        f.write(bytes(data))
    with caplog.at_level(logging.WARNING, logger="kafka_tiered_source.planning.offline"):
        assert plan_offline(options).partitions[0].latest == stable
    assert any("CRC-32C mismatch" in r.getMessage() for r in caplog.records)
