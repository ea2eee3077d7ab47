"""Client-side quotas: the token bucket's arithmetic, how limits are split over tasks, and real
reads of Kafka segments from a moto S3 server whose quota buckets run on a clock of the test's:
every byte and GET the server counted is a token the reader took and slept off at the rate, so
the checks are counts, not wall-clock windows a loaded machine could miss."""
from __future__ import annotations

import json
import pickle
import threading

import pytest

from broker_fixtures import fixture_segments, s3_tiered_cluster
from storage_servers import S3_KEY_ID, S3_SECRET

from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.quota import QuotaConfig, ReaderQuota, TokenBucket
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster


class FakeTime:
    """A clock that only moves when someone sleeps: the bucket's arithmetic, exactly."""

    def __init__(self):
        self.now = 100.0
        self.slept = []
        self.lock = threading.Lock()

    def clock(self):
        return self.now

    def sleep(self, s):
        with self.lock:
            self.slept.append(s)
            self.now += s


def test_bucket_starts_empty_and_makes_callers_wait_off_their_debt():
    t = FakeTime()
    b = TokenBucket(1000, clock=t.clock, sleep=t.sleep)
    assert b.charge(500) == pytest.approx(0.5)
    assert t.now == pytest.approx(100.5)
    # 2,500 bytes more right away: 2.5 s of debt
    assert b.charge(2500) == pytest.approx(2.5)
    assert b.charge(0) == 0.0


def test_bucket_banks_idle_time_up_to_its_capacity():
    t = FakeTime()
    b = TokenBucket(1000, capacity=1000, clock=t.clock, sleep=t.sleep)
    b.charge(1)                        # the bucket starts filling at its first charge
    t.now += 10.0                      # idle for 10 s: only 1 s (1,000 tokens) is banked
    assert b.charge(1000) == 0.0
    assert b.charge(1000) == pytest.approx(1.0)


def test_time_before_the_first_charge_is_not_banked():
    t = FakeTime()
    b = TokenBucket(1000, clock=t.clock, sleep=t.sleep)
    t.now += 10.0                      # the reader set up its clients meanwhile
    assert b.charge(500) == pytest.approx(0.5)


def test_bucket_rate_over_many_charges_is_the_rate():
    t = FakeTime()
    b = TokenBucket(250_000, clock=t.clock, sleep=t.sleep)
    start = t.now
    for _ in range(100):
        b.charge(64 * 1024)
    assert 100 * 64 * 1024 / (t.now - start) == pytest.approx(250_000)


def test_bucket_refuses_a_rate_that_is_not_positive():
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_job_limits_are_split_over_the_tasks_and_the_lower_limit_wins():
    q = QuotaConfig(remote_bytes_per_second=300.0, job_remote_bytes_per_second=1000.0,
                    job_remote_requests_per_second=40.0)
    assert q.per_reader(1) == (300.0, 40.0)
    assert q.per_reader(4) == (250.0, 10.0)
    assert q.per_reader(0) == (300.0, 40.0)     # never divide by zero tasks
    assert QuotaConfig().enabled is False
    assert ReaderQuota.for_task(QuotaConfig(), 3) is None


def test_reader_quota_pickles_as_its_rates_with_empty_buckets():
    q = ReaderQuota(1000.0, 5.0)
    q2 = pickle.loads(pickle.dumps(q))
    assert (q2.bytes_per_second, q2.requests_per_second) == (1000.0, 5.0)


def test_quota_options_parse_into_the_read_options():
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    o = ReadOptions.parse({**base, "quota.remote.bytes.per.second": "1e6",
                           "quota.job.remote.requests.per.second": "50"})
    assert o.quota == QuotaConfig(1e6, None, None, 50.0)
    for bad in ("-1", "0", "fast", "nan", "inf"):
        with pytest.raises(ConfigError) as info:
            ReadOptions.parse({**base, "quota.remote.requests.per.second": bad})
        assert info.value.option == "quota.remote.requests.per.second"


# ---------------------------------------------------------------------------------------------
# a real throttled read

@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_tiered_cluster(tmp_path_factory.mktemp("quota-s3"), "quota", [("payments", 0)]) as c:
        yield c


def _options(c, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "assign": json.dumps({"payments": [0]}),
            "remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "quota",
            "remote.storage.prefix": "kt/", "remote.storage.s3.endpoint": c.proxy.endpoint,
            "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": S3_KEY_ID,
            "remote.storage.s3.secret.access.key": S3_SECRET, "telemetry.push.enabled": "false",
            **extra}


def _read_all(options, plan):
    totals = []
    for task in plan.tasks:
        reader = TaskReader(options, tasks_planned=len(plan.tasks))
        try:
            rows = sum(b.num_rows for b in reader.read(task))
            assert rows > 0
            totals.append(reader.metrics.snapshot())
        finally:
            reader.close()
    return totals


def _counted_read(options, plan, t: FakeTime):
    """Read ``plan`` in one reader whose quota runs on the clock ``t`` (it moves only when the
    quota sleeps): what the buckets charge is counted, not timed."""
    assert len(plan.tasks) == 1
    reader = TaskReader(options, tasks_planned=1)
    q = reader.metrics.quota
    reader.metrics.quota = ReaderQuota(q.bytes_per_second, q.requests_per_second, clock=t.clock, sleep=t.sleep)
    try:
        rows = sum(b.num_rows for b in reader.read(plan.tasks[0]))
        return rows, reader.metrics.snapshot().total()
    finally:
        reader.close()


def test_a_byte_quota_charges_every_byte_the_store_served_and_sleeps_them_off_at_the_rate(s3):
    """Every byte the S3 server sent (counted on its side) is a token the reader's bucket took,
    and the reader slept exactly tokens / rate: on an empty bucket, no byte is read ahead of
    the rate.  The clock is the quota's own, so a loaded machine changes nothing."""
    rate = 250_000.0
    options = ReadOptions.parse(_options(s3, **{"fetch.remote.part.size.bytes": "32768",
                                                "quota.remote.bytes.per.second": repr(rate)}))
    plan = planning.plan(options)
    s3.proxy.reset()
    t = FakeTime()
    rows, stats = _counted_read(options, plan, t)
    gets = s3.proxy.gets()
    served = sum(e[3] for e in gets)
    assert rows > 0 and all(200 <= e[2] < 300 for e in gets)
    assert served > 1_000_000 and len(gets) > 10
    # one charge (and so one sleep) per GET, together exactly the bytes served over the rate
    assert len(t.slept) == len(gets)
    assert sum(t.slept) == pytest.approx(served / rate)
    assert stats.quota_throttled_s == pytest.approx(served / rate)
    assert stats.remote_bytes == served and stats.remote_requests == len(gets)


def test_a_request_quota_takes_one_token_per_get_the_store_saw(s3):
    """n GETs at r/s from a bucket holding the first token: n - 1 waits of 1/r, counted."""
    rate = 20.0
    options = ReadOptions.parse(_options(s3, **{"fetch.remote.part.size.bytes": str(1 << 20),
                                                "quota.remote.requests.per.second": repr(rate)}))
    plan = planning.plan(options)
    s3.proxy.reset()
    t = FakeTime()
    _, stats = _counted_read(options, plan, t)
    n = len(s3.proxy.gets())
    assert n >= 5
    assert t.slept == [pytest.approx(1 / rate)] * (n - 1)
    assert stats.quota_throttled_s == pytest.approx((n - 1) / rate)


def test_a_job_limit_gives_each_task_its_share(s3):
    options = ReadOptions.parse(_options(s3, **{"quota.job.remote.bytes.per.second": "4000000",
                                                "quota.remote.requests.per.second": "7"}))
    reader = TaskReader(options, tasks_planned=4)
    assert (reader.metrics.quota.bytes_per_second, reader.metrics.quota.requests_per_second) == \
        (1_000_000.0, 7.0)
    # and the share survives the trip to an executor
    again = pickle.loads(pickle.dumps(reader))
    assert again.metrics.quota.bytes_per_second == 1_000_000.0


def test_a_request_quota_spaces_the_gets(s3):
    options = ReadOptions.parse(_options(s3, **{"fetch.remote.part.size.bytes": str(1 << 20),
                                                "quota.remote.requests.per.second": "20"}))
    plan = planning.plan(options)
    s3.proxy.reset()
    _read_all(options, plan)
    gets = s3.proxy.gets()
    assert len(gets) >= 20
    starts = sorted(e[4] for e in gets)
    # n GETs at 20/s from an empty bucket: the last starts no sooner than (n - 1) / 20 s after the first
    assert starts[-1] - starts[0] >= (len(gets) - 1) / 20 * 0.95


def test_the_broker_fetch_quota_is_honoured_and_reported(tmp_path):
    """KIP-13 on the broker side: past ``consumer_byte_rate`` Fetch answers carry
    throttle_time_ms, the reader waits them out before its next request and counts them."""
    import time

    rate = 1_500_000
    with EmbeddedCluster(str(tmp_path / "data"), consumer_byte_rate=rate) as c:
        c.import_log_dir("orders", 0, fixture_segments("orders", 0))
        options = ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "orders",
                                     "fetch.remote.enabled": "false", "client.id": "throttled-reader"})
        plan = planning.plan(options)
        reader = TaskReader(options)
        t0 = time.monotonic()
        rows = sum(b.num_rows for t in plan.tasks for b in reader.read(t))
        elapsed = time.monotonic() - t0
        client = reader.client
        waited = sum(conn.throttled_s for conn in client._conns.values())
        reader.close()
        stats = reader.metrics.snapshot().total()
        fetched = stats.broker_bytes
        throttled_by_broker = c._server.throttled_ms_total.get("throttled-reader", 0) / 1000
    assert rows == 8557
    # the broker lets one second of quota through unthrottled, then spaces the rest at the rate
    assert fetched > 2 * rate
    assert elapsed >= 0.9 * (fetched / rate - 1.0)
    assert stats.broker_throttled_s == pytest.approx(throttled_by_broker, abs=0.01)
    assert stats.broker_throttled_s > 0
    assert waited > 0
