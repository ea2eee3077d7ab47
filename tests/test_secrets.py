"""Secrets never show: not in reprs/strs of configs, logs (DEBUG), Spark plan strings, or
exception messages — checked by capturing everything a run prints and logs and searching it
for the secret values (unique random strings).

One embedded broker with SASL/SCRAM tiers to a moto S3 server and hands out presigned URLs.
The reads: a direct S3 read (SASL via the JAAS config, S3 keys and session token), a read
through the broker's presigned URLs (whose signatures are then searched for), Spark plans
(``df.explain(True)``) and the messages of reads that fail on purpose (wrong password, missing
bucket, invalid options next to Azure credentials).
"""
from __future__ import annotations

import logging
import secrets
import traceback
from urllib.parse import parse_qs, urlsplit

import pytest
from pyspark.errors import AnalysisException

from spark_helpers import load
from spark_session import spark  # noqa: F401  (fixture)
from storage_servers import S3_KEY_ID, S3_SECRET, MotoS3

import kafka_tiered_source as kts
from kafka_tiered_source.errors import KafkaTieredError
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.storage.registry import create_fetcher
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster
from test_bad_input import make_batch

pytestmark = [pytest.mark.decoder, pytest.mark.spark]


def _secret(tag: str) -> str:
    return f"{tag}-{secrets.token_urlsafe(18)}"


PASSWORD = _secret("saslpw")
S3_READER_SECRET = _secret("s3secret")
S3_TOKEN = _secret("s3token")
AZURE_KEY = _secret("azkey")
AZURE_SAS = "sv=2022-11-02&ss=b&sig=" + _secret("azsig")
AZURE_CONN = ("DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" + _secret("azconn")
              + ";BlobEndpoint=http://127.0.0.1:1/acct;")
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="reader" '
        f'password="{PASSWORD}";')
SECRETS = {"sasl password": PASSWORD, "JAAS config": JAAS, "S3 secret key": S3_READER_SECRET, "S3 session token": S3_TOKEN,
           "Azure account key": AZURE_KEY, "Azure SAS token": AZURE_SAS.split("sig=")[1],
           "Azure connection string": AZURE_CONN.split("AccountKey=")[1].split(";")[0],
           "broker's S3 secret": S3_SECRET}


class Sink(logging.Handler):
    """Every record of the package's loggers at DEBUG, formatted with its traceback."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    moto = MotoS3().start()
    moto.client().create_bucket(Bucket="tiered")
    base = tmp_path_factory.mktemp("secrets")
    c = EmbeddedCluster(str(base / "data"), remote_storage="s3://tiered/kt", presign=True,
                        s3_endpoint_url=moto.endpoint, s3_region="us-east-1",
                        s3_access_key_id=S3_KEY_ID, s3_secret_access_key=S3_SECRET,
                        segment_bytes=8 * 1024,
                        sasl={"mechanism": "SCRAM-SHA-256", "users": {"reader": PASSWORD}})
    c.start()
    try:
        c.create_topic("secure")
        for b in range(20):
            c.append("secure", 0, make_batch([b"value-%d-%d" % (b, i) + b"x" * 100 for i in range(10)],
                                             b * 10))
        assert c.tier()
        c.moto = moto
        yield c
    finally:
        c.stop()
        moto.stop()


@pytest.fixture
def capture(capfd):
    """Everything: the package's log records at DEBUG, fd 1/2, plus texts the test adds."""
    sink = Sink()
    logger = logging.getLogger("kafka_tiered_source")
    old = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(sink)
    texts: list[str] = []
    yield texts, sink
    logger.removeHandler(sink)
    logger.setLevel(old)


def assert_no_secret(everything: str, extra: dict | None = None) -> None:
    for what, value in {**SECRETS, **(extra or {})}.items():
        assert value not in everything, f"the {what} appears in the captured output"


def sasl_options(c, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "secure",
            "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": JAAS, **extra}


def s3_options(c, **extra) -> dict:
    return sasl_options(c, **{"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "tiered",
                              "remote.storage.prefix": "kt/",
                              "remote.storage.s3.endpoint": c.moto.endpoint,
                              "remote.storage.s3.region": "us-east-1",
                              "remote.storage.s3.access.key.id": S3_KEY_ID,
                              "remote.storage.s3.secret.access.key": S3_READER_SECRET,
                              "remote.storage.s3.session.token": S3_TOKEN, **extra})


def read_all(opts: ReadOptions, texts: list[str]):
    plan = planning.plan(opts)
    reader = TaskReader(opts)
    n = 0
    try:
        for task in plan.tasks:
            texts.append(repr(task))
            n += sum(b.num_rows for b in reader.read(task))
        texts += [repr(plan), repr(reader.fetcher), repr(reader.client), repr(reader.metrics.snapshot())]
    finally:
        reader.close()
    return plan, n, reader.metrics.snapshot().total()


def test_direct_s3_read_with_sasl_shows_no_secret(world, capture, capfd):
    texts, sink = capture
    opts = ReadOptions.parse(s3_options(world))
    texts += [repr(opts), str(opts), repr(opts.storage), str(opts.storage)]
    plan, n, stats = read_all(opts, texts)
    assert n == 200 and plan.remote_ranges and stats.remote_bytes > 0 and stats.fallbacks == 0
    texts.append(repr(create_fetcher(opts.storage)))
    out, err = capfd.readouterr()
    assert_no_secret("\n".join(texts + sink.lines + [out, err]))


def test_presigned_read_shows_no_signature(world, capture, capfd):
    texts, sink = capture
    opts = ReadOptions.parse(sasl_options(world))     # no fetcher: the broker's presigned URLs
    plan, n, stats = read_all(opts, texts)
    urls = [r.segment.presigned_url for r in plan.remote_ranges]
    assert n == 200 and urls and all(urls) and stats.remote_requests > 0
    sigs = {}
    for i, url in enumerate(urls):
        q = parse_qs(urlsplit(url).query)
        # SigV2 (Signature=) or SigV4 (X-Amz-Signature=), whichever the broker's boto3 wrote
        sig = (q.get("X-Amz-Signature") or q.get("Signature"))[0]
        assert len(sig) >= 20
        sigs[f"presigned signature {i}"] = sig
    texts += [repr(r) for r in plan.remote_ranges] + [str(r.segment) for r in plan.remote_ranges]
    out, err = capfd.readouterr()
    assert any("no remote.storage.fetcher is set" in line for line in sink.lines), \
        "the log capture missed the planner's warning"
    assert_no_secret("\n".join(texts + sink.lines + [out, err]), sigs)


def test_spark_plan_strings_show_no_secret(world, spark, capture, capfd):
    texts, sink = capture
    kts.register(spark)
    df = load(spark, s3_options(world))
    df.explain(True)
    df.explain("formatted")
    texts.append(df._jdf.queryExecution().toString())
    assert df.count() == 200
    out, err = capfd.readouterr()
    assert "kafka-tiered" in out.lower() or "KafkaTiered" in out, out[:500]
    assert_no_secret("\n".join(texts + sink.lines + [out, err]))


def _failure_text(exc: BaseException) -> str:
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc))])


def test_wrong_password_fails_clearly_without_showing_it(world, capture, capfd):
    texts, sink = capture
    wrong = _secret("wrongpw")
    jaas = JAAS.replace(PASSWORD, wrong)
    with pytest.raises(KafkaTieredError) as ei:
        planning.plan(ReadOptions.parse(sasl_options(world, **{"kafka.sasl.jaas.config": jaas})))
    msg = str(ei.value).lower()
    assert "authentication" in msg or "sasl" in msg, msg
    texts.append(_failure_text(ei.value))
    out, err = capfd.readouterr()
    assert_no_secret("\n".join(texts + sink.lines + [out, err]), {"wrong password": wrong,
                                                                  "wrong JAAS": jaas})


def test_wrong_password_in_spark_fails_without_showing_it(world, spark, capture, capfd):
    texts, sink = capture
    wrong = _secret("wrongpw")
    with pytest.raises(AnalysisException) as ei:          # planning meets the broker
        load(spark, sasl_options(world, **{"kafka.sasl.jaas.config": JAAS.replace(PASSWORD, wrong)})).count()
    texts.append(_failure_text(ei.value))
    assert "authentication" in texts[-1].lower() or "sasl" in texts[-1].lower()
    out, err = capfd.readouterr()
    assert_no_secret("\n".join(texts + sink.lines + [out, err]), {"wrong password": wrong})


def test_missing_bucket_error_names_the_bucket_without_the_keys(world, capture, capfd):
    texts, sink = capture
    opts = ReadOptions.parse({"remote.storage.uri": "s3://no-such-bucket/kt",
                              "remote.storage.layout": "aiven", "subscribe": "secure",
                              "remote.storage.s3.endpoint": world.moto.endpoint,
                              "remote.storage.s3.region": "us-east-1",
                              "remote.storage.s3.access.key.id": S3_KEY_ID,
                              "remote.storage.s3.secret.access.key": S3_READER_SECRET,
                              "remote.storage.s3.session.token": S3_TOKEN})
    with pytest.raises(KafkaTieredError) as ei:
        read_all(opts, texts)
    texts.append(_failure_text(ei.value))
    assert "no-such-bucket" in str(ei.value)
    out, err = capfd.readouterr()
    assert_no_secret("\n".join(texts + sink.lines + [out, err]))


@pytest.mark.parametrize("bad", [
    {"remote.storage.sneaky.option": "1"},
    {"remote.storage.layout": "nope"},
    {"fetch.remote.read.timeout.ms": "soon"},
])
def test_azure_credentials_stay_hidden_in_config_errors_and_reprs(bad, capture, capfd):
    texts, sink = capture
    opts = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
            "remote.storage.fetcher": "azure", "remote.storage.azure.container": "c",
            "remote.storage.azure.account.name": "acct",
            "remote.storage.azure.account.key": AZURE_KEY,
            "remote.storage.azure.sas.token": AZURE_SAS,
            "remote.storage.azure.connection.string": AZURE_CONN,
            "kafka.sasl.jaas.config": JAAS}
    parsed = ReadOptions.parse(opts)
    texts += [repr(parsed), str(parsed), repr(parsed.storage), str(parsed.storage)]
    with pytest.raises(KafkaTieredError) as ei:
        parsed = ReadOptions.parse({**opts, **bad})
        create_fetcher(parsed.storage)
    texts.append(_failure_text(ei.value))
    out, err = capfd.readouterr()
    assert_no_secret("\n".join(texts + sink.lines + [out, err]))
