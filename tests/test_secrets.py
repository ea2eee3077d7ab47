"""Secrets never show: not in reprs/strs of configs, logs (DEBUG), Spark plan strings, metrics
files or exception messages — checked by capturing everything a run prints and logs and
searching it for the secret values (unique random strings, or the distinctive passwords of the
committed TLS test stores).

One embedded broker with SASL/SCRAM tiers to a moto S3 server and hands out presigned URLs.
The reads: a direct S3 read (SASL via the JAAS config, S3 keys and session token), a read
through the broker's presigned URLs (whose signatures are then searched for), Spark plans
(``df.explain(True)``) and the messages of reads that fail on purpose (wrong password, missing
bucket, invalid options next to Azure credentials).  A second broker wants a client certificate
and an OAUTHBEARER token: keystore and key passwords, an inline PEM key, the OAuth client secret
and the tokens are searched for in the same way (a read, a Spark plan, failing reads).
"""
from __future__ import annotations

import logging
import secrets
import traceback
from urllib.parse import parse_qs, urlsplit

import pytest
from pyspark.errors import AnalysisException

import tls_material
from spark_helpers import load
from storage_servers import S3_KEY_ID, S3_SECRET, MotoS3

import kafka_tiered_source as kts
from kafka_tiered_source.errors import KafkaTieredError
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.storage.registry import create_fetcher
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster
from test_bad_input import make_batch

pytestmark = [pytest.mark.spark]


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


# ------------------------------------------------------------------------------ TLS stores and OAuth
# A listener that wants both a client certificate (mTLS) and an OAUTHBEARER token.  Secrets: the
# stores' passwords (committed test material, distinctive strings), the inline PEM key's body,
# the OAuth client secret and every token the provider made.

CLIENT_SECRET = _secret("oauthsecret")
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              f'clientId="secure-reader" clientSecret="{CLIENT_SECRET}" scope="kafka";')
KEY_BODY = [line for line in tls_material.text("client-key-encrypted.pem").splitlines()
            if line and not line.startswith("-----")]
TLS_SECRETS = {**tls_material.PASSWORDS, "OAuth client secret": CLIENT_SECRET,
               **{f"line {i} of the PEM key": line for i, line in enumerate(KEY_BODY)}}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from kafka_tiered_source.testing.oauth_server import OAuthServer
    base = tmp_path_factory.mktemp("secured")
    idp = OAuthServer({"secure-reader": CLIENT_SECRET}).start()
    c = EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote", segment_bytes=8 * 1024,
                        ssl=tls_material.broker_ssl("required"),
                        sasl={"mechanism": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
                              "sasl.oauthbearer.expected.audience": "kafka"})
    c.start()
    try:
        c.create_topic("secure")
        for b in range(20):
            c.append("secure", 0, make_batch([b"value-%d-%d" % (b, i) + b"x" * 100 for i in range(10)], b * 10))
        assert c.tier()
        c.idp, c.remote_uri = idp, f"file://{base}/remote"
        yield c
    finally:
        c.stop()
        idp.stop()


def secured_options(c, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "secure",
            "remote.storage.uri": c.remote_uri, "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.location": tls_material.path("truststore.jks"),
            "kafka.ssl.truststore.password": tls_material.TRUST_PW,
            "kafka.ssl.keystore.location": tls_material.path("client.jks"),
            "kafka.ssl.keystore.password": tls_material.CLIENT_STORE_PW,
            "kafka.ssl.key.password": tls_material.CLIENT_KEY_PW,
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.login.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            "kafka.sasl.oauthbearer.token.endpoint.url": c.idp.token_endpoint_url,
            "kafka.sasl.jaas.config": OAUTH_JAAS, **extra}


def inline_pem_options(c) -> dict:
    opts = {k: v for k, v in secured_options(c).items() if not k.startswith("kafka.ssl.")}
    opts.update({"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.certificates": tls_material.text("ca.pem"),
                 "kafka.ssl.keystore.type": "PEM",
                 "kafka.ssl.keystore.certificate.chain": tls_material.text("client-chain.pem"),
                 "kafka.ssl.keystore.key": tls_material.text("client-key-encrypted.pem"),
                 "kafka.ssl.key.password": tls_material.PEM_KEY_PW})
    return opts


def assert_no_tls_secret(everything: str, c) -> None:
    tokens = {f"token {i}": t for i, t in enumerate(c.idp.minted)}
    assert tokens, "no token was issued: the capture proves nothing"
    assert_no_secret(everything, {**TLS_SECRETS, **tokens,
                                  **{f"signature of token {i}": t.rsplit(".", 1)[1] for i, t in enumerate(c.idp.minted)}})


def test_mtls_and_oauth_read_shows_no_secret(secured, capture, capfd, tmp_path):
    from kafka_tiered_source.protocol.oauth import forget_tokens, token_source
    forget_tokens()
    texts, sink = capture
    metrics, mdir = tmp_path / "metrics.jsonl", tmp_path / "metrics-dir"
    opts = ReadOptions.parse(secured_options(secured, **{"metrics.jsonl.path": str(metrics),
                                                         "metrics.dir": str(mdir), "fetch.remote.fallback": "always"}))
    texts += [repr(opts), str(opts), repr(opts.kafka)]
    plan = planning.plan(opts)
    reader = TaskReader(opts)
    try:
        n = sum(b.num_rows for task in plan.tasks for b in reader.read(task))
        texts += [repr(plan), repr(reader.client), repr(reader.metrics.snapshot())] + [repr(t) for t in plan.tasks]
        reader.finish(read_id="secured-read", task_index=0)    # metrics: JSON lines, directory, KIP-714 push
    finally:
        reader.close()
    assert n == 200 and reader.metrics.snapshot().total().broker_fetches > 0
    from kafka_tiered_source.options import client_properties
    from kafka_tiered_source.protocol.client import ClientConfig
    cfg = ClientConfig.from_properties(client_properties(opts))
    texts += [repr(cfg), str(cfg), repr(cfg.oauth), repr(token_source(cfg.oauth)),
              repr(token_source(cfg.oauth).token()), repr(secured.config), repr(secured)]
    texts.append(metrics.read_text())
    written = [p.read_text() for p in mdir.rglob("*") if p.is_file()]
    assert written and '"records": 200' in texts[-1], (texts[-1][:300], written)
    texts += written
    out, err = capfd.readouterr()
    assert any("OAUTHBEARER token for secure-reader" in line for line in sink.lines), "the log capture missed the login"
    assert_no_tls_secret("\n".join(texts + sink.lines + [out, err]), secured)


def test_mtls_and_oauth_spark_plan_shows_no_secret(secured, spark, capture, capfd):
    texts, sink = capture
    kts.register(spark)
    df = load(spark, inline_pem_options(secured))
    df.explain(True)
    df.explain("formatted")
    texts.append(df._jdf.queryExecution().toString())
    assert df.count() == 200
    out, err = capfd.readouterr()
    assert_no_tls_secret("\n".join(texts + sink.lines + [out, err]), secured)


@pytest.mark.parametrize("wrong", [
    {"kafka.ssl.keystore.password": "wrong-" + tls_material.CLIENT_STORE_PW},
    {"kafka.ssl.key.password": "wrong-" + tls_material.CLIENT_KEY_PW},
    {"kafka.ssl.truststore.password": "wrong-" + tls_material.TRUST_PW},
    {"kafka.sasl.jaas.config": OAUTH_JAAS.replace(CLIENT_SECRET, "wrong-" + CLIENT_SECRET)},
    {"kafka.ssl.keystore.location": tls_material.path("client.p12")},     # the JKS passwords for a PKCS12 file
])
def test_failing_secured_reads_show_no_secret(secured, capture, capfd, wrong):
    from kafka_tiered_source.protocol.oauth import forget_tokens
    forget_tokens()
    texts, sink = capture
    with pytest.raises(KafkaTieredError) as ei:
        planning.plan(ReadOptions.parse(secured_options(secured, **wrong)))
    texts.append(_failure_text(ei.value))
    out, err = capfd.readouterr()
    extra = {f"the wrong {k}": v for k, v in wrong.items() if "location" not in k}
    assert_no_secret("\n".join(texts + sink.lines + [out, err]), {**TLS_SECRETS, **extra})
