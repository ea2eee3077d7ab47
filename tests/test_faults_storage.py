"""Object-store faults during direct reads (issue 9 part B), without Spark: a plan from
``planning.plan`` and every task run by ``TaskReader``, against a real moto S3 server behind
a fault-injecting HTTP proxy.

Every fault must end in the same rows (retried, or fallen back to the broker) or in a clear
error, and every offset must come out exactly once.  The metrics say which path was taken:
``remote_errors`` counts failed GETs by error type, ``fallbacks`` the direct reads that fell back.
"""
from __future__ import annotations

import time

import pytest

from broker_fixtures import fixture_segments
from spark_helpers import arrow_rows, expected_rows, first_difference, offsets_of, read_tasks
from storage_servers import S3_KEY_ID, S3_SECRET, Blackhole, FaultProxy, MotoS3, Rule, unique

from kafka_tiered_source.errors import DataLossError
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster


TOPIC, PART = "orders", 0
BUCKET = "tiered"
WANT = expected_rows(TOPIC, PART, False)
BROKER_REMOTE_BYTES = "remote_fetch_bytes_total"


# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def moto():
    server = MotoS3().start()
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


def s3_cluster(moto, base, prefix: str) -> EmbeddedCluster:
    c = EmbeddedCluster(str(base / "data"), remote_storage=f"s3://{BUCKET}/{prefix}",
                        s3_endpoint_url=moto.endpoint, s3_region="us-east-1",
                        s3_access_key_id=S3_KEY_ID, s3_secret_access_key=S3_SECRET)
    c.start()
    c.import_log_dir(TOPIC, PART, fixture_segments(TOPIC, PART))
    assert c.tier()
    c.prefix = prefix
    return c


@pytest.fixture(scope="module")
def cluster(moto, tmp_path_factory):
    """orders-0 (8557 records, 300 KB segments) tiered to moto S3; the last segment stays
    local, so every read has a broker tail too."""
    c = s3_cluster(moto, tmp_path_factory.mktemp("faults-s3"), "kt/")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def proxy(moto):
    p = FaultProxy(moto.port).start()
    yield p
    p.stop()


@pytest.fixture(autouse=True)
def _clean_proxy(request):
    yield
    if "proxy" in request.fixturenames:
        request.getfixturevalue("proxy").reset()


def options(c, endpoint: str, *, bucket: str = BUCKET, **extra) -> ReadOptions:
    return ReadOptions.parse({
        "kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC, "includeHeaders": "true",
        "remote.storage.fetcher": "s3", "remote.storage.s3.bucket": bucket,
        "remote.storage.prefix": c.prefix, "remote.storage.s3.endpoint": endpoint,
        "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": S3_KEY_ID,
        "remote.storage.s3.secret.access.key": S3_SECRET,
        "partition.target.bytes": str(1024 * 1024),
        "fetch.remote.retry.backoff.ms": "5", "fetch.remote.retry.backoff.max.ms": "20", **extra})


def read_all(opts, tasks=None, reader=None):
    """Run every task; (batches, totals, number of tiered ranges read)."""
    plan = planning.plan(opts) if tasks is None else None
    return read_tasks(opts, plan.tasks if tasks is None else tasks, reader)


def assert_rows(batches, want=WANT):
    offs = offsets_of(batches)
    assert len(offs) == len(set(offs)), "an offset came out twice"
    got = arrow_rows(batches).get((TOPIC, PART), [])
    assert got == want, first_difference(got, want)


def n_remote_ranges(opts) -> int:
    return len(planning.plan(opts).remote_ranges)


def remote_tasks(plan) -> int:
    """Tasks with a tiered range.  A failed direct read falls back once per task and partition:
    the rest of that partition in the task is fetched through the broker without a GET."""
    return sum(1 for t in plan.tasks if any(r in plan.remote_ranges for r in t.ranges))


def broker_remote_bytes(c) -> float:
    return c.storage.metrics.get(BROKER_REMOTE_BYTES)


# ---------------------------------------------------------------------------------------------
# the baseline: no fault, every byte direct


@pytest.mark.decoder
def test_no_fault_reads_directly(cluster, proxy):
    opts = options(cluster, proxy.endpoint)
    before = broker_remote_bytes(cluster)
    batches, stats = read_all(opts)
    assert_rows(batches)
    assert stats.fallbacks == 0 and stats.remote_failed == 0 and stats.remote_bytes > 0
    assert broker_remote_bytes(cluster) == before
    assert proxy.gets_for(".log") == n_remote_ranges(opts)


def test_later_segments_are_in_flight_while_earlier_ones_arrive(cluster, proxy):
    """A slow store: the GETs of one task's next segments (and their manifests) overlap with
    the current one's, across segment boundaries; the rows and GET counts stay exact."""
    opts = options(cluster, proxy.endpoint, **{"partition.target.bytes": str(64 * 1024 * 1024)})
    plan = planning.plan(opts)
    assert len(plan.tasks) == 1 and len(plan.remote_ranges) >= 4
    proxy.add(Rule(match=".log", stall_s=0.3, method="GET"))
    batches, stats = read_all(opts, plan.tasks)
    assert_rows(batches)
    assert stats.fallbacks == 0
    spans = [(start, end) for method, path, status, _, start, end in proxy.log
             if method == "GET" and ".log" in path and status < 300]
    assert len(spans) == len(plan.remote_ranges)
    in_flight = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert in_flight == opts.storage.concurrency      # the whole window, not one segment at a time


class _Sink:
    """Where a task reports its totals (the accumulator's interface), with when it did."""

    def __init__(self):
        self.reported: list = []

    def add(self, totals):
        self.reported.append((time.monotonic(), totals))


def test_a_task_stopped_early_runs_no_get_after_reporting(cluster, proxy):
    """A slow store and a task stopped after its first batch (a ``limit``): the GETs in flight
    are waited for or cancelled before the task reports, so every GET the store served is in
    the task's totals and none is answered after them."""
    from kafka_tiered_source.executor.run import run_task
    opts = options(cluster, proxy.endpoint, **{"partition.target.bytes": str(64 * 1024 * 1024),
                                               "fetch.remote.part.size.bytes": str(32 * 1024)})
    plan = planning.plan(opts)
    assert len(plan.tasks) == 1
    proxy.add(Rule(match=".log", stall_s=0.4, method="GET"))
    sink = _Sink()
    task = run_task(opts, plan.tasks[0], accumulator=sink)
    assert next(task).num_rows > 0
    task.close()                                   # Spark stops consuming: GeneratorExit
    (reported_at, totals), = sink.reported
    time.sleep(0.8)                                # what a GET left running would take to answer
    served = proxy.gets(".log")
    assert served, "the store answered no GET"
    assert all(end <= reported_at for *_, end in served), "a GET was answered after the task reported"
    assert proxy.gets_for(".log") == len(served)   # none still stalled in the store
    counted = sum(s.remote_requests for tags, s in totals.by_tags.items())
    assert counted == len(proxy.gets(""))          # .log parts and manifests alike


def test_closing_a_reader_from_another_thread_stops_its_read(cluster, proxy):
    """What a scan that is closed does: ``TaskReader.close()`` from another thread while the
    reading thread waits on a slow store.  The read ends with PrefetchClosed, and when close()
    returns no GET of the task is running or left in the store."""
    import threading
    from kafka_tiered_source.executor.prefetch import PrefetchClosed
    opts = options(cluster, proxy.endpoint, **{"partition.target.bytes": str(64 * 1024 * 1024),
                                               "fetch.remote.part.size.bytes": str(32 * 1024)})
    plan = planning.plan(opts)
    proxy.add(Rule(match=".log", stall_s=0.5, method="GET"))
    reader = TaskReader(opts)
    outcome: list = []

    def consume():
        try:
            for _ in reader.read(plan.tasks[0]):
                pass
            outcome.append("completed")
        except Exception as exc:
            outcome.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.3)                                # the first GETs are stalled in the store
    reader.close()
    closed_at = time.monotonic()
    t.join(timeout=5)
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], PrefetchClosed), outcome
    assert all(end <= closed_at for *_, end in proxy.gets(".log"))
    assert proxy.gets_for(".log") == len(proxy.gets(".log"))


def test_a_task_starts_with_small_parts(cluster, proxy):
    """Where a task starts (nothing in flight), its first range comes in parts of 1/8, 1/4 and
    1/2 of a part, then whole ones, so decoding starts after a short transfer; the ranges after
    it, fetched while earlier ones are decoded, come in whole parts.  Rows stay exact."""
    part = 64 * 1024
    opts = options(cluster, proxy.endpoint, **{"partition.target.bytes": str(64 * 1024 * 1024),
                                               "fetch.remote.part.size.bytes": str(part)})
    plan = planning.plan(opts)
    assert len(plan.tasks) == 1
    first, *rest = [r for r in plan.tasks[0].ranges if r in plan.remote_ranges]
    assert first.byte_end - first.byte_start > 2 * part
    batches, stats = read_all(opts, plan.tasks)
    assert_rows(batches)
    gets = [a for a in proxy.answers if a.method == "GET" and ".log" in a.path and a.status < 300]
    mine = [a for a in gets if first.segment.segment_id in a.path and first.byte_start <= a.first_byte < first.byte_end]
    later = [a for a in gets if a not in mine]
    want, left = [], first.byte_end - first.byte_start
    for size in (part // 8, part // 4, part // 2):
        want.append(min(size, left))
        left -= want[-1]
    while left > 0:
        want.append(min(part, left))
        left -= want[-1]
    assert sorted(a.sent for a in mine) == sorted(want)
    # the later ranges' GETs go out only once one of the first range's came back (slow start)
    assert all(a.start >= min(m.answering for m in mine) for a in later)
    sizes = [a.sent for a in later]
    assert len(sizes) == sum(-(-(r.byte_end - r.byte_start) // part) for r in rest)
    assert max(sizes) <= part and sizes.count(part) >= len(rest)


# ---------------------------------------------------------------------------------------------
# 500 / 503 / throttling


ERRORS = {
    "500": (500, b"<Error><Code>InternalError</Code><Message>We encountered an internal error</Message></Error>",
            "RemoteServerError"),
    "503-slowdown": (503, b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
                     "RemoteThrottled"),
    "429": (429, b"<Error><Code>TooManyRequests</Code><Message>slow down</Message></Error>", "RemoteThrottled"),
    "503-unavailable": (503, b"<Error><Code>ServiceUnavailable</Code><Message>Service is unable to handle "
                             b"request.</Message></Error>", "RemoteServerError"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_transient_error_is_retried_then_succeeds(cluster, proxy, name):
    status, body, error_type = ERRORS[name]
    opts = options(cluster, proxy.endpoint)
    rule = proxy.add(Rule(match=".log", status=status, body=body, times=2,
                          headers={"Content-Type": "application/xml"}))
    before = broker_remote_bytes(cluster)
    batches, stats = read_all(opts)
    assert rule.hits == 2
    assert_rows(batches)
    assert stats.fallbacks == 0
    assert stats.remote_errors == {error_type: 2}
    # each failed attempt is a GET the store bills; the successful ones add one per range
    assert stats.remote_requests == n_remote_ranges(opts) + 2 + _manifest_gets(opts)
    if error_type == "RemoteThrottled":
        assert stats.storage_throttled_s > 0
    assert broker_remote_bytes(cluster) == before


def _manifest_gets(opts) -> int:
    """GETs of Aiven manifests: one per segment read (cached per fetcher)."""
    return len({r.segment.segment_id for r in planning.plan(opts).remote_ranges})


@pytest.mark.parametrize("name", ["500", "503-slowdown", "429"])
def test_error_past_all_retries_falls_back_to_the_broker(cluster, proxy, name, caplog):
    status, body, error_type = ERRORS[name]
    opts = options(cluster, proxy.endpoint, **{"fetch.remote.retry.max.attempts": "3"})
    ranges = remote_tasks(planning.plan(opts))
    proxy.add(Rule(match=".log", status=status, body=body, headers={"Content-Type": "application/xml"}))
    before = broker_remote_bytes(cluster)
    batches, stats = read_all(opts)
    assert_rows(batches)
    # the first tiered range of every task failed its 3 attempts, then the task's tiered
    # ranges came through the broker.  A broker whose remote read outlives its
    # remote.fetch.max.wait.ms answers nothing (a loaded machine), and the reader then reads the
    # copy's tail from storage to prove it empty: 3 more failed attempts for each such proof.
    proofs = sum(r.getMessage().startswith("reading the tail of") for r in caplog.records)
    assert stats.remote_errors == {error_type: 3 * (ranges + proofs)}
    assert stats.fallbacks == ranges and stats.fallback_bytes > 0
    assert broker_remote_bytes(cluster) > before


# ---------------------------------------------------------------------------------------------
# timeouts


def test_connect_timeout_falls_back_and_is_counted(cluster):
    hole = Blackhole()
    try:
        opts = options(cluster, hole.endpoint, **{"fetch.remote.connect.timeout.ms": "200"})
        plan = planning.plan(opts)
        batches, stats = read_all(opts, plan.tasks)
    finally:
        hole.close()
    assert_rows(batches)
    # the first GET of each range (its segment's manifest) timed out: no retry, straight to
    # the broker
    assert stats.remote_errors == {"RemoteTimeout": remote_tasks(plan)}
    assert stats.fallbacks == remote_tasks(plan)
    assert stats.remote_bytes == 0


def test_read_timeout_falls_back_and_is_counted(cluster, proxy):
    opts = options(cluster, proxy.endpoint, **{"fetch.remote.read.timeout.ms": "300"})
    ranges = remote_tasks(planning.plan(opts))
    stall = proxy.add(Rule(match=".log", stall_s=5.0))
    batches, stats = read_all(opts)
    assert_rows(batches)
    assert stall.hits == ranges
    assert stats.remote_errors == {"RemoteTimeout": ranges}
    assert stats.fallbacks == ranges


# ---------------------------------------------------------------------------------------------
# damaged bodies


@pytest.mark.decoder
def test_body_cut_off_in_transit_is_retried(cluster, proxy):
    opts = options(cluster, proxy.endpoint)
    rule = proxy.add(Rule(match=".log", damage="close-early", times=1))
    batches, stats = read_all(opts)
    assert rule.hits == 1
    assert_rows(batches)
    assert stats.fallbacks == 0
    assert stats.remote_errors == {"RemoteConnectionError": 1}


@pytest.mark.decoder
def test_body_always_cut_off_falls_back(cluster, proxy):
    opts = options(cluster, proxy.endpoint, **{"fetch.remote.retry.max.attempts": "2"})
    ranges = remote_tasks(planning.plan(opts))
    proxy.add(Rule(match=".log", damage="close-early"))
    batches, stats = read_all(opts)
    assert_rows(batches)
    assert stats.remote_errors == {"RemoteConnectionError": 2 * ranges}
    assert stats.fallbacks == ranges


@pytest.mark.decoder
@pytest.mark.parametrize("keep", [lambda n: n // 2, lambda n: 0, lambda n: n - 1],
                         ids=["half", "nothing", "one-byte-short"])
def test_short_body_with_matching_content_length_falls_back(cluster, proxy, keep):
    """A well-formed answer with fewer bytes than the range asked for: the reader notices the
    offsets it was promised are missing and fetches them through the broker; never a row
    less, never a row twice."""
    opts = options(cluster, proxy.endpoint)
    ranges = remote_tasks(planning.plan(opts))
    proxy.add(Rule(match=".log", damage="short-length", keep=keep))
    batches, stats = read_all(opts)
    assert_rows(batches)
    assert stats.fallbacks == ranges
    assert stats.remote_failed == 0      # every GET "succeeded"; the shortfall is the reader's find


@pytest.mark.decoder
def test_short_body_that_fails_its_checksum_is_retried_then_falls_back(cluster, proxy):
    """moto sends the object's checksum; botocore finds the cut body does not match it.  That
    is a damaged transfer: retried, then the broker (a raw botocore FlexibleChecksumError
    escaping would kill the task)."""
    opts = options(cluster, proxy.endpoint, **{"fetch.remote.retry.max.attempts": "2"})
    ranges = remote_tasks(planning.plan(opts))
    proxy.add(Rule(match=".log", damage="short-length-checksum"))
    batches, stats = read_all(opts)
    assert_rows(batches)
    assert stats.remote_errors == {"RemoteConnectionError": 2 * ranges}
    assert stats.fallbacks == ranges


@pytest.mark.decoder
def test_corrupt_body_fails_the_task_naming_object_and_position(cluster, proxy):
    """Bytes that arrive whole but wrong (no checksum to catch them in transit) are caught by
    the batch CRC: the read stops with a CorruptRecordError naming where, never wrong rows.
    (In Spark the task fails and is retried: test_faults_spark.)"""
    from kafka_tiered_source.errors import CorruptRecordError
    opts = options(cluster, proxy.endpoint)
    plan = planning.plan(opts)
    first_remote = next(r for r in plan.remote_ranges)
    proxy.add(Rule(match=".log", damage="corrupt", times=1, keep=lambda n: 70))
    reader = TaskReader(opts)
    with pytest.raises(CorruptRecordError) as info:
        read_all(opts, plan.tasks, reader)
    assert info.value.base_offset == first_remote.offset_start
    assert "crc" in str(info.value).lower()


@pytest.mark.decoder
def test_short_body_that_fails_its_checksum_once_is_retried(cluster, proxy):
    opts = options(cluster, proxy.endpoint)
    rule = proxy.add(Rule(match=".log", damage="short-length-checksum", times=1))
    batches, stats = read_all(opts)
    assert rule.hits == 1
    assert_rows(batches)
    assert stats.fallbacks == 0 and stats.remote_errors == {"RemoteConnectionError": 1}


# ---------------------------------------------------------------------------------------------
# objects deleted in the middle of a read


def _reader_view(moto, prefix: str) -> str:
    """A copy of the tiered objects in a bucket of the reader's own (the broker's copy stays,
    so the broker can still serve what the reader's view lost)."""
    client = moto.client()
    view = unique("view-")
    client.create_bucket(Bucket=view)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", ()):
            client.copy_object(Bucket=view, Key=obj["Key"], CopySource={"Bucket": BUCKET, "Key": obj["Key"]})
    return view


def _delete_logs(moto, bucket: str) -> int:
    client = moto.client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", ()) if o["Key"].endswith(".log")]
    for k in keys:
        client.delete_object(Bucket=bucket, Key=k)
    return len(keys)


def test_objects_deleted_after_the_first_range_fall_back(cluster, moto):
    view = _reader_view(moto, cluster.prefix)
    opts = options(cluster, moto.endpoint, bucket=view)
    plan = planning.plan(opts)
    remote_tasks = [t for t in plan.tasks if any(r in plan.remote_ranges for r in t.ranges)]
    assert len(remote_tasks) >= 3
    reader = TaskReader(opts)
    first = list(reader.read(plan.tasks[0]))
    assert reader.metrics.snapshot().total().fallbacks == 0
    assert _delete_logs(moto, view) > 0
    rest, stats = read_all(opts, plan.tasks[1:], reader)
    assert_rows(first + rest)
    later_ranges = sum(1 for t in plan.tasks[1:] if any(r in plan.remote_ranges for r in t.ranges))
    assert stats.fallbacks == later_ranges
    assert stats.remote_errors == {"RemoteObjectNotFound": later_ranges}


@pytest.fixture
def own_cluster(moto, tmp_path):
    c = s3_cluster(moto, tmp_path, unique("ret-") + "/")
    yield c
    c.stop()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_objects_deleted_by_retention_after_planning(own_cluster, moto, fail_on_data_loss):
    """Retention moves the log start offset past the offsets of the next tasks after planning
    (the broker deletes the segments below it from S3): with failOnDataLoss=true the read stops
    with a DataLossError naming the partition and the lost offsets; with false exactly the
    offsets whose data is gone are skipped."""
    c = own_cluster
    opts = options(c, moto.endpoint, failOnDataLoss=str(fail_on_data_loss).lower())
    plan = planning.plan(opts)
    reader = TaskReader(opts)
    first = list(reader.read(plan.tasks[0]))
    read_end = max(offsets_of(first)) + 1
    segs = c.remote_segments(TOPIC, PART)
    later = [s for s in segs if s.base_offset > read_end + 1000]
    cut = later[0].base_offset + 10           # inside a tiered segment, past the next task
    c.delete_records(TOPIC, PART, cut)
    kept = min(s.base_offset for s in c.remote_segments(TOPIC, PART))
    assert kept == later[0].base_offset
    if fail_on_data_loss:
        with pytest.raises(DataLossError) as info:
            read_all(opts, plan.tasks[1:], reader)
        text = str(info.value)
        assert f"{TOPIC}-{PART}" in text and f"[{read_end}, {cut})" in text, text
        return
    rest, stats = read_all(opts, plan.tasks[1:], reader)
    assert stats.fallbacks > 0 and stats.remote_errors.get("RemoteObjectNotFound", 0) > 0
    got_offsets = set(offsets_of(first + rest))
    # the deleted segments' offsets are skipped; the segment holding the new log start is
    # still in storage: read directly, its records below the log start exist and come out once
    # (through the broker they would be skipped too, so accept either, but nothing else)
    straddle = {r["offset"] for r in WANT if kept <= r["offset"] < cut}
    lost = {r["offset"] for r in WANT if read_end <= r["offset"] < kept}
    assert not (got_offsets & lost)
    assert got_offsets | lost | straddle == {r["offset"] for r in WANT}
    assert straddle <= got_offsets or not (straddle & got_offsets)   # all of them or none
    assert_rows(first + rest, [r for r in WANT if r["offset"] in got_offsets])
