"""Misconfiguration fails fast, and fallback has a limit (issue 18).

* Before any task is launched, the driver checks storage with one request: an unreachable
  endpoint, a 403 from moto for wrong keys (a moto server of its own with authentication on)
  and a bucket that does not exist each fail the read in planning, naming backend, object,
  reason and the two ways on; Spark launches no job.
* ``fetch.remote.fallback``: ``auto`` falls back per range on storage faults, with the reason
  counted; ``never`` fails the task; ``always`` reads through the brokers without a GET;
  ``fetch.remote.fallback.max.bytes`` fails a task past that many fallback bytes.
* A read that fell back says so in one line, in ``cost_report`` and on the driver when its last
  task reports.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid

import pytest
from pyspark.errors import AnalysisException

from broker_fixtures import import_and_tier, s3_tiered_cluster
from spark_helpers import arrow_rows, expected_rows, load, read_tasks
from storage_servers import S3_KEY_ID, S3_SECRET, Rule, free_port, wait_port

import kafka_tiered_source as kts
from kafka_tiered_source import planning
from kafka_tiered_source.errors import FallbackLimitError, RemoteThrottled, StoragePreflightError
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.spark.datasource import plan_partitions
from kafka_tiered_source.testing import EmbeddedCluster

TOPIC, PART = "orders", 1
FAST = {"fetch.remote.retry.backoff.ms": "5", "fetch.remote.retry.backoff.max.ms": "20",
        "fetch.remote.retry.max.attempts": "2"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """orders-1 tiered to its own moto S3 (bucket ``tiered``, prefix ``kt/``); readers go
    through ``cluster.proxy``, a FaultProxy in front of moto."""
    with s3_tiered_cluster(tmp_path_factory.mktemp("fallback"), "tiered", [(TOPIC, PART)]) as c:
        yield c


def storage(endpoint, **over):
    opts = {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "tiered", "remote.storage.prefix": "kt/",
            "remote.storage.s3.endpoint": endpoint, "remote.storage.s3.region": "us-east-1",
            "remote.storage.s3.access.key.id": S3_KEY_ID, "remote.storage.s3.secret.access.key": S3_SECRET}
    opts.update(over)
    return opts


def read_options(cluster, **extra) -> dict:
    return {"kafka.bootstrap.servers": cluster.bootstrap_servers, "assign": f'{{"{TOPIC}":[{PART}]}}',
            "includeHeaders": "true", "partition.target.bytes": str(128 * 1024),
            **storage(cluster.proxy.endpoint), **FAST, **extra}


# ---------------------------------------------------------------------------------------------
# a moto server that checks credentials: its own process, so the setting stays there

class AuthMoto:
    """moto with authentication on after its first four (set-up) requests: an IAM user with an
    access key and an allow-all S3 policy, and a bucket.  Other keys get 403."""

    def __init__(self):
        self.port = free_port()
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"}
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, 60, self.proc)
        import boto3
        anon = dict(endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="setup",
                    aws_secret_access_key="setup")
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="reader")
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        iam.put_user_policy(UserName="reader", PolicyName="s3", PolicyDocument=(
            '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}'))
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        boto3.client("s3", **anon).create_bucket(Bucket="locked")

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    """orders-1 tiered into the authenticating moto; the broker has the right keys."""
    moto = AuthMoto()
    base = tmp_path_factory.mktemp("locked")
    c = EmbeddedCluster(str(base / "data"), remote_storage="s3://locked/kt", s3_endpoint_url=moto.endpoint,
                        s3_region="us-east-1", s3_access_key_id=moto.key_id, s3_secret_access_key=moto.secret)
    try:
        c.start()
        import_and_tier(c, [(TOPIC, PART)])
        c.moto = moto
        yield c
    finally:
        c.stop()
        moto.stop()


def locked_options(c, key_id, secret):
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "assign": f'{{"{TOPIC}":[{PART}]}}',
            **storage(c.moto.endpoint, **{"remote.storage.s3.bucket": "locked",
                                          "remote.storage.s3.access.key.id": key_id,
                                          "remote.storage.s3.secret.access.key": secret}), **FAST}


def misconfigured(case, cluster, locked):
    if case == "unreachable endpoint":
        return read_options(cluster, **{"remote.storage.s3.endpoint": f"http://127.0.0.1:{free_port()}"})
    if case == "403 wrong keys":
        return locked_options(locked, "AKIAWRONGWRONGWRONG1", "wrong-secret-" + uuid.uuid4().hex)
    return read_options(cluster, **{"remote.storage.s3.bucket": "no-such-bucket-" + uuid.uuid4().hex[:8]})


CASES = {"unreachable endpoint": ("unreachable", "connection failed"),
         "403 wrong keys": ("access denied", "403"),
         "missing bucket": ("no such bucket", "NoSuchBucket")}


def test_the_right_keys_read_the_locked_store(locked):
    """The authenticating moto really serves the right keys (so a 403 below is the keys')."""
    options = ReadOptions.parse({**locked_options(locked, locked.moto.key_id, locked.moto.secret),
                                 "includeHeaders": "true", "fetch.remote.fallback": "never"})
    batches, total = read_tasks(options, plan_partitions_tasks(options))
    assert total.fallbacks == 0 and total.remote_requests > 0
    assert arrow_rows(batches)[(TOPIC, PART)] == expected_rows(TOPIC, PART, False)


def plan_partitions_tasks(options):
    return [p.task for p in plan_partitions(options)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_misconfigured_storage_fails_in_planning_naming_what_and_how(case, cluster, locked):
    options = ReadOptions.parse(misconfigured(case, cluster, locked))
    with pytest.raises(StoragePreflightError) as ei:
        plan_partitions(options)
    err, (what, reason) = ei.value, CASES[case]
    text = str(err)
    assert "before any task was launched" in text and "backend s3" in text
    assert err.location.startswith("s3://") and "/kt/orders-" in err.location and err.location in text
    assert what in text and reason in text, text
    assert "fetch.remote.fallback=always" in text and "remote.storage" in text
    assert S3_SECRET not in text and "wrong-secret" not in text
    # on purpose through the brokers, the same options read everything
    ok = ReadOptions.parse({**misconfigured(case, cluster, locked), "includeHeaders": "true",
                            "fetch.remote.fallback": "always"})
    batches, total = read_tasks(ok, plan_partitions_tasks(ok))
    assert total.remote_requests == 0
    assert arrow_rows(batches)[(TOPIC, PART)] == expected_rows(TOPIC, PART, False)


@pytest.mark.spark
@pytest.mark.parametrize("case", sorted(CASES))
def test_misconfigured_storage_launches_no_spark_job(case, cluster, locked, spark):
    sc = spark.sparkContext
    group = f"kts-preflight-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, f"preflight {case}")
    try:
        df = load(spark, misconfigured(case, cluster, locked))
        with pytest.raises(AnalysisException) as ei:      # raised while planning
            df.count()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    text = str(ei.value)
    assert "StoragePreflightError" in text and CASES[case][0] in text and "fetch.remote.fallback=always" in text
    assert sc.statusTracker().getJobIdsForGroup(group) == []


# ---------------------------------------------------------------------------------------------
# fetch.remote.fallback and its byte limit

def run(cluster, **extra):
    options = ReadOptions.parse(read_options(cluster, **extra))
    planned = planning.plan(options)
    assert planned.remote_ranges
    return options, planned


@pytest.mark.decoder
def test_auto_falls_back_per_range_and_counts_why(cluster):
    cluster.proxy.reset()
    options, planned = run(cluster)
    victim = planned.remote_ranges[0].segment.segment_id
    cluster.proxy.add(Rule(match=victim, status=503, body=b"<Error><Code>SlowDown</Code></Error>", method="GET"))
    batches, total = read_tasks(options, planned.tasks)
    assert arrow_rows(batches)[(TOPIC, PART)] == expected_rows(TOPIC, PART, False)
    assert total.fallbacks >= 1 and total.fallback_bytes > 0
    assert any(r.startswith("RemoteThrottled: throttled (503 SlowDown)") for r in total.fallback_reasons), \
        total.fallback_reasons
    cluster.proxy.reset()


def test_never_fails_the_task_instead(cluster):
    cluster.proxy.reset()
    options, planned = run(cluster, **{"fetch.remote.fallback": "never"})
    victim = planned.remote_ranges[0].segment.segment_id
    cluster.proxy.add(Rule(match=victim, status=503, body=b"<Error><Code>SlowDown</Code></Error>", method="GET"))
    reader = TaskReader(options)
    task = next(t for t in planned.tasks if any(getattr(r, "segment", None) is not None
                                                and r.segment.segment_id == victim for r in t.ranges))
    with pytest.raises(RemoteThrottled):
        list(reader.read(task))
    total = reader.metrics.total()
    reader.close()
    assert total.fallbacks == 0 and total.fallback_bytes == 0
    cluster.proxy.reset()


@pytest.mark.decoder
def test_always_reads_through_the_brokers_without_a_get(cluster):
    cluster.proxy.reset()
    options, planned = run(cluster, **{"fetch.remote.fallback": "always"})
    batches, total = read_tasks(options, planned.tasks)
    assert arrow_rows(batches)[(TOPIC, PART)] == expected_rows(TOPIC, PART, False)
    assert total.remote_requests == 0 and cluster.proxy.gets() == []
    assert total.fallbacks == len(planned.remote_ranges)
    assert dict(total.fallback_reasons) == {"fetch.remote.fallback=always": len(planned.remote_ranges)}


@pytest.mark.parametrize("limit", [0, 2000])
def test_fallback_past_the_byte_limit_fails_the_task(cluster, limit):
    cluster.proxy.reset()
    cluster.proxy.add(Rule(match="/kt/", status=503, body=b"<Error><Code>SlowDown</Code></Error>", method="GET"))
    options, planned = run(cluster, **{"fetch.remote.fallback.max.bytes": str(limit)})
    reader = TaskReader(options)
    with pytest.raises(FallbackLimitError) as ei:
        for t in planned.tasks:
            list(reader.read(t))
    total = reader.metrics.total()
    reader.close()
    text = str(ei.value)
    assert f"fetch.remote.fallback.max.bytes={limit:,}" in text and "RemoteThrottled" in text
    if limit == 0:
        assert total.fallback_bytes == 0      # refused before a byte moved on its account
    else:
        assert total.fallback_bytes > limit and "fetch.remote.fallback=always" in text
    # under a limit the same read succeeds
    roomy = ReadOptions.parse(read_options(cluster, **{"fetch.remote.fallback.max.bytes": str(100 << 20)}))
    batches, _ = read_tasks(roomy, planned.tasks)
    assert arrow_rows(batches)[(TOPIC, PART)] == expected_rows(TOPIC, PART, False)
    cluster.proxy.reset()


# ---------------------------------------------------------------------------------------------
# the line at the end of a read that fell back

@pytest.mark.spark
def test_a_read_that_fell_back_says_so_in_one_line(cluster, spark, caplog):
    kts.register(spark)
    cluster.proxy.reset()
    victim = run(cluster)[1].remote_ranges[0].segment.segment_id
    cluster.proxy.add(Rule(match=victim, status=503, body=b"<Error><Code>SlowDown</Code></Error>", method="GET"))
    with caplog.at_level(logging.WARNING, logger="kafka_tiered_source"):
        n = load(spark, read_options(cluster)).count()
    cluster.proxy.reset()
    assert n == len(expected_rows(TOPIC, PART, False))
    stats = kts.last_read_stats(spark)
    line = stats.fallback_line()
    assert line and line.startswith("kafka-tiered: ") and "RemoteThrottled" in line and " MB" in line
    report = kts.cost_report(stats)
    assert report.fallback == line and str(report).splitlines()[-1] == line
    logged = [r.getMessage() for r in caplog.records if r.name == "kafka_tiered_source"]
    assert logged.count(line) == 1, logged
