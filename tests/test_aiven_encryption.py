"""Encrypted Aiven segments (issue 18): the plugin's envelope encryption read exactly.

* Known answers made by BouncyCastle and the JDK with the plugin's own JCA calls
  (``fixtures/aiven_encryption``, ``MakeVectors.java``) open to the exact plaintext, so the
  reader is checked against an implementation that is not its own; the embedded broker's writer
  is then checked by that reader.
* Segments the embedded broker tiers encrypted (chunk compression on and off) read byte-exact
  through the fetcher and row-exact through the read path, on ``file://`` and a moto S3 server;
  the broker serves them through Fetch too; offline reads open their encrypted indexes; a key
  rotation leaves both key pairs' segments readable.
* Every failure is named: no keys, an unknown key-pair id, the wrong key, a key file or variable
  that holds no key, a tampered chunk (GCM tag), a truncated chunk or index; nothing of a chunk
  that failed authentication is returned; the private key never shows.
"""
from __future__ import annotations

import dataclasses

import base64
import json
import os
import random

import pytest

from broker_fixtures import import_and_tier, s3_tiered_cluster
from spark_helpers import arrow_rows, expected_rows, first_difference, read_as_executors, without_manifest_info
from storage_servers import S3_KEY_ID, S3_SECRET, MotoS3, unique

from kafka_tiered_source import planning
from kafka_tiered_source.errors import ConfigError, SegmentDecryptionError, StoragePreflightError
from kafka_tiered_source.ids import random_uuid, uuid_to_str
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.options.encryption import KeyPairSource
from kafka_tiered_source.planning.preflight import preflight
from kafka_tiered_source.storage import aiven, create_fetcher
from kafka_tiered_source.storage.aiven_crypto import IV_SIZE, OVERHEAD, KeyRing
from kafka_tiered_source.storage.segment import RemoteSegment
from kafka_tiered_source.testing import EmbeddedCluster, aiven_writer

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = json.load(open(os.path.join(HERE, "fixtures", "aiven_encryption", "vectors.json")))
KEYS = "remote.storage.aiven.encryption.key.pairs"
KiB = 1024
PARTITIONS = [("orders", 1), ("payments", 0)]     # payments-0 holds aborted transactions


def _pem_file(tmp_path, name, pem):
    path = tmp_path / name
    path.write_text(pem)
    return str(path)


def _vector_plain(i: int, size: int) -> bytes:
    # MakeVectors.java: plain[j] = (byte) (j * 31 + i)
    return bytes((j * 31 + i) & 0xFF for j in range(size))


# ---------------------------------------------------------------------------------------------
# the format, against BouncyCastle and the JDK

def test_data_key_and_chunks_made_by_bouncycastle_and_the_jdk_open_exactly(tmp_path):
    ring = KeyRing((KeyPairSource("bc-kp-1", "file", _pem_file(tmp_path, "k.pem", VECTORS["privateKeyPem"])),))
    enc = aiven.EncryptionMetadata(VECTORS["dataKey"], base64.b64decode(VECTORS["aad"]))
    cipher = ring.cipher(enc)
    assert cipher.key_id == "bc-kp-1"
    assert len(VECTORS["chunks"]) == 4
    for i, ch in enumerate(VECTORS["chunks"]):
        raw = base64.b64decode(ch["encrypted"])
        assert ch["ivSize"] == IV_SIZE and len(raw) == ch["plainSize"] + OVERHEAD
        assert cipher.open(raw, f"chunk {i}") == _vector_plain(i, ch["plainSize"])
    # the AAD is bound: the same chunk under another AAD does not authenticate
    other = KeyRing(ring._sources.values()).cipher(aiven.EncryptionMetadata(VECTORS["dataKey"], b"\0" * 32))
    with pytest.raises(SegmentDecryptionError) as ei:
        other.open(base64.b64decode(VECTORS["chunks"][2]["encrypted"]), "chunk 2")
    assert ei.value.kind == "tampered"


def test_the_embedded_brokers_writer_makes_what_the_reader_opens(tmp_path):
    key_file = aiven_writer.generate_key_pair(str(tmp_path / "kp.pem"))
    assert open(key_file).read().startswith("-----BEGIN PRIVATE KEY-----")     # PKCS#8, as the plugin
    assert oct(os.stat(key_file).st_mode & 0o777) == "0o600"
    enc = aiven_writer.SegmentEncryption.new("kp-a", key_file)
    meta = enc.metadata
    assert meta.key_id == "kp-a" and len(meta.aad) == 32
    key_id, wrapped = meta.data_key.split(":")
    assert len(base64.b64decode(wrapped)) == 256                      # one 2048-bit RSA block
    data = random.Random(3).randbytes(10_000)
    obj, ci = aiven_writer.transform_chunks(data, 4096, False, enc)
    # fixed index: every chunk 28 bytes longer (IV and tag), the last one too
    assert ci.kind == "fixed" and ci.transformed_sizes == (4096 + 28, 4096 + 28, 1808 + 28)
    first, second = obj[:IV_SIZE], obj[4124:4124 + IV_SIZE]
    assert first != second                                            # a fresh IV per chunk
    assert data[:64] not in obj
    cipher = KeyRing((KeyPairSource("kp-a", "file", key_file),)).cipher(meta)
    assert b"".join(cipher.open_chunk(obj[c.transformed_position:c.transformed_position + c.transformed_size],
                                      c, False) for c in (ci.chunk(i) for i in range(3))) == data
    # compression first, then encryption: a variable index of zstd frames 28 bytes longer each
    comp, vci = aiven_writer.transform_chunks(b"abc" * 5000, 4096, True, enc)
    plain_frames, _ = aiven_writer.transform_chunks(b"abc" * 5000, 4096, True)
    assert vci.kind == "variable" and sum(vci.transformed_sizes) == len(plain_frames) + 28 * vci.chunk_count
    # each index is one encrypted chunk; an empty one stays empty
    blob, si = aiven_writer.build_indexes(b"O" * 16, b"T" * 24, b"", b"0\n0\n", b"X" * 34, enc)
    assert (si.offset.size, si.producer_snapshot.size, si.transaction.size) == (16 + 28, 0, 34 + 28)
    assert len(blob) == si.transaction.position + si.transaction.size


def test_key_errors_are_named_and_never_show_the_key(tmp_path, monkeypatch):
    good = _pem_file(tmp_path, "good.pem", VECTORS["privateKeyPem"])
    other = _pem_file(tmp_path, "other.pem", VECTORS["otherPrivateKeyPem"])
    enc = aiven.EncryptionMetadata(VECTORS["dataKey"], base64.b64decode(VECTORS["aad"]))
    secret_body = VECTORS["otherPrivateKeyPem"].splitlines()[3]

    def fails(ring, kind, *needles):
        with pytest.raises(SegmentDecryptionError) as ei:
            ring.cipher(enc, "s3://b/seg.rsm-manifest")
        assert ei.value.kind == kind and ei.value.key_id == "bc-kp-1", ei.value
        text = str(ei.value)
        for needle in needles:
            assert needle in text, text
        assert secret_body not in text and "BEGIN" not in text
        return text

    fails(KeyRing(), "no-keys", "'bc-kp-1'", KEYS)
    fails(KeyRing((KeyPairSource("kp-2027", "file", good),)), "unknown-key-pair", "'bc-kp-1'", "'kp-2027'")
    fails(KeyRing((KeyPairSource("bc-kp-1", "file", other),)), "wrong-key", "'bc-kp-1'", other,
          "not that key pair's private key")
    fails(KeyRing((KeyPairSource("bc-kp-1", "file", str(tmp_path / "nope.pem")),)), "key-unreadable",
          "nope.pem")
    fails(KeyRing((KeyPairSource("bc-kp-1", "env", "KTS_TEST_NO_SUCH_VAR"),)), "key-unreadable",
          "KTS_TEST_NO_SUCH_VAR", "spark.executorEnv")
    monkeypatch.setenv("KTS_TEST_NOT_A_KEY", "certainly not PEM " + secret_body)
    fails(KeyRing((KeyPairSource("bc-kp-1", "env", "KTS_TEST_NOT_A_KEY"),)), "key-unreadable", "not a PEM")
    # a password-protected key and a key that is not RSA
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    rsa_key = load_pem_private_key(VECTORS["otherPrivateKeyPem"].encode(), None)
    locked = rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.BestAvailableEncryption(b"pw"))
    (tmp_path / "locked.pem").write_bytes(locked)
    fails(KeyRing((KeyPairSource("bc-kp-1", "file", str(tmp_path / "locked.pem")),)), "key-unreadable",
          "password-protected")
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (tmp_path / "ec.pem").write_bytes(ec_pem)
    fails(KeyRing((KeyPairSource("bc-kp-1", "file", str(tmp_path / "ec.pem")),)), "key-unreadable", "not an RSA")
    # from an environment variable it opens like from a file
    monkeypatch.setenv("KTS_TEST_KEY", VECTORS["privateKeyPem"])
    assert KeyRing((KeyPairSource("bc-kp-1", "env", "KTS_TEST_KEY"),)).cipher(enc).key_id == "bc-kp-1"


@pytest.mark.parametrize("value, needle", [
    ("kp=" + VECTORS["privateKeyPem"], "never hold the key itself"),
    ("kp", "entry 1 is not id=file:PATH"),
    ("kp=file:/a,kp=file:/b", "given twice"),
    ("kp=http://x", "file:PATH or env:NAME"),
    ("kp=env:not a name", "not an environment variable name"),
    ("kp=file:/a,,k2=env:X", "entry 2 is empty"),
])
def test_the_key_pairs_option_is_checked_at_load_without_echoing_it(value, needle):
    options = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", "remote.storage.uri": "s3://b/p",
               KEYS: value}
    with pytest.raises(ConfigError) as ei:
        ReadOptions.parse(options)
    assert needle in str(ei.value) and ei.value.option == KEYS
    assert "BEGIN" not in str(ei.value) and VECTORS["privateKeyPem"].splitlines()[2] not in str(ei.value)


def test_the_key_pairs_option_is_a_secret_in_reprs():
    opts = ReadOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t",
                              "remote.storage.uri": "s3://b/p", KEYS: "kp-1=file:/etc/kafka/kp-1.pem"})
    assert "/etc/kafka/kp-1.pem" not in repr(opts) and "/etc/kafka/kp-1.pem" not in repr(opts.storage)
    assert opts.storage.option(KEYS) == "kp-1=file:/etc/kafka/kp-1.pem"


# ---------------------------------------------------------------------------------------------
# the fetcher, on file:// and moto S3

@pytest.fixture(scope="module")
def moto():
    server = MotoS3().start()
    server.client().create_bucket(Bucket="kts-enc")
    yield server
    server.stop()


class _Store:
    def __init__(self, kind, moto, root):
        self.kind, self.moto, self.root = kind, moto, root

    def put(self, key, data):
        if self.kind == "s3":
            self.moto.client().put_object(Bucket="kts-enc", Key=key, Body=data)
        else:
            path = os.path.join(self.root, key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)

    def options(self):
        if self.kind == "s3":
            return {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "kts-enc",
                    "remote.storage.s3.endpoint": self.moto.endpoint, "remote.storage.s3.region": "us-east-1",
                    "remote.storage.s3.access.key.id": S3_KEY_ID, "remote.storage.s3.secret.access.key": S3_SECRET}
        return {"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{self.root}"}


@pytest.fixture(params=["file", "s3"])
def store(request, moto, tmp_path):
    return _Store(request.param, moto, str(tmp_path / "store"))


def put_encrypted(store, tmp_path, data, *, compression, chunk_size=16 * KiB, key_id="kp-1"):
    key_file = str(tmp_path / f"{key_id}.pem")
    if not os.path.exists(key_file):
        aiven_writer.generate_key_pair(key_file)
    enc = aiven_writer.SegmentEncryption.new(key_id, key_file)
    obj, ci = aiven_writer.transform_chunks(data, chunk_size, compression, enc)
    blob, si = aiven_writer.build_indexes(b"O" * 16, b"T" * 24, b"", b"0\n1\n0 0\n", b"X" * 34, enc)
    manifest = aiven.SegmentManifest(ci, si, compression, enc.metadata)
    prefix = unique("enc-") + "/"
    seg = RemoteSegment(topic="orders", topic_id=uuid_to_str(random_uuid()), partition=2,
                        segment_id=uuid_to_str(random_uuid()), base_offset=4242, end_offset=5000,
                        size_bytes=len(data))
    keys = {s: aiven.object_key(prefix, seg.topic, seg.topic_id, 2, 4242, seg.segment_id, s) for s in aiven.SUFFIXES}
    store.put(keys["log"], obj)
    store.put(keys["indexes"], blob)
    store.put(keys["rsm-manifest"], manifest.to_json())
    opts = {**store.options(), "remote.storage.prefix": prefix, KEYS: f"{key_id}=file:{key_file}",
            "fetch.remote.part.size.bytes": str(40 * KiB)}
    return seg, opts, obj, manifest, keys


@pytest.mark.parametrize("compression", [False, True])
def test_encrypted_segment_reads_byte_exact(store, tmp_path, compression):
    data = b"".join(b"order-%06d,amount=%d;" % (i, i % 977) for i in range(9000))
    seg, opts, obj, manifest, _ = put_encrypted(store, tmp_path, data, compression=compression)
    assert data[:200] not in obj
    fetcher = create_fetcher(opts)
    rnd = random.Random(5)
    ranges = [(0, len(data)), (16 * KiB - 1, 16 * KiB + 1), (len(data) - 3, len(data) + 10), (7, 7)]
    for _ in range(15):
        s = rnd.randrange(len(data))
        ranges.append((s, rnd.randrange(s, len(data) + 1)))
    got = fetcher.fetch_ranges(seg, ranges)
    for (s, e), g in zip(ranges, got, strict=True):
        assert bytes(g) == data[s:e], (s, e)
    assert b"".join(bytes(p) for p in fetcher.iter_log_segment(seg, 1000, None)) == data[1000:]
    assert fetcher.fetch_index(seg, "offset") == b"O" * 16
    assert fetcher.fetch_index(seg, "transaction") == b"X" * 34
    assert fetcher.fetch_index(seg, "producer_snapshot") == b""
    assert fetcher.fetch_index(seg, "leader_epoch") == b"0\n1\n0 0\n"
    # what the planner ships instead of the manifest GET reads the same
    carried = dataclasses.replace(seg, **{"manifest_info": aiven.ManifestInfo.of(manifest)})
    with create_fetcher(opts) as fresh:
        assert bytes(fresh.fetch_log_segment(carried, 100, 50_000)) == data[100:50_000]
        assert fresh.layout.cached_manifest(seg) is None        # no manifest GET was needed
    # a pickled fetcher (as shipped to executors) rebuilds its key ring and reads the same
    import pickle
    assert bytes(pickle.loads(pickle.dumps(fetcher)).fetch_log_segment(seg, 5, 999)) == data[5:999]


def test_tampered_chunk_fails_authentication_and_returns_nothing(store, tmp_path):
    data = random.Random(8).randbytes(100 * KiB)
    seg, opts, obj, manifest, keys = put_encrypted(store, tmp_path, data, compression=False)
    ci = manifest.chunk_index
    victim = ci.chunk(3)
    flip = victim.transformed_position + IV_SIZE + 100
    store.put(keys["log"], obj[:flip] + bytes([obj[flip] ^ 1]) + obj[flip + 1:])
    fetcher = create_fetcher(opts)
    # chunks before it still read; any range touching it fails, with nothing of it returned
    assert bytes(fetcher.fetch_log_segment(seg, 0, victim.original_position)) == data[:victim.original_position]
    for s, e in ((victim.original_position, victim.original_position + 1), (0, len(data))):
        with pytest.raises(SegmentDecryptionError) as ei:
            fetcher.fetch_log_segment(seg, s, e)
        err = ei.value
        assert err.kind == "tampered" and err.key_id == "kp-1"
        assert f"chunk {victim.id} at transformed byte position {victim.transformed_position}" in str(err)
        assert seg.segment_id in str(err) and "authentication failed" in str(err)
    streamed = []
    with pytest.raises(SegmentDecryptionError):
        for piece in fetcher.iter_log_segment(seg, 0, None):
            streamed.append(bytes(piece))
    assert len(b"".join(streamed)) <= victim.original_position     # never a byte of the failed chunk
    assert b"".join(streamed) == data[:len(b"".join(streamed))]


def test_truncated_chunk_and_index_are_named(store, tmp_path):
    data = random.Random(9).randbytes(50 * KiB)
    seg, opts, obj, manifest, keys = put_encrypted(store, tmp_path, data, compression=True)
    last = manifest.chunk_index.chunk(manifest.chunk_index.chunk_count - 1)
    store.put(keys["log"], obj[:last.transformed_position + 10])
    with pytest.raises(SegmentDecryptionError) as ei:
        create_fetcher(opts).fetch_log_segment(seg, last.original_position, len(data))
    assert ei.value.kind == "truncated" and f"chunk {last.id} is truncated" in str(ei.value)
    blob, _ = aiven_writer.build_indexes(b"O" * 16, b"T" * 24, b"", b"0\n", b"X" * 34,
                                         aiven_writer.SegmentEncryption.new("kp-1", str(tmp_path / "kp-1.pem")))
    store.put(keys["indexes"], blob[:-5])
    with pytest.raises(SegmentDecryptionError) as ei:
        create_fetcher(opts).fetch_index(seg, "transaction")
    assert ei.value.kind == "truncated" and "index transaction" in str(ei.value)


# ---------------------------------------------------------------------------------------------
# the embedded broker tiers encrypted; the read path reads it exactly

def _keys(tmp, *ids):
    return {k: aiven_writer.generate_key_pair(str(tmp / f"{k}.pem")) for k in ids}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """Two brokers tiering encrypted: to file:// without chunk compression, and to moto S3 with
    it (64 KiB chunks, so segments hold several)."""
    base = tmp_path_factory.mktemp("enc-clusters")
    keys = _keys(base, "kp-2026")
    out = {}
    fc = EmbeddedCluster(str(base / "file-data"), remote_storage=f"file://{base}/remote",
                         chunk_size=64 * KiB, encryption_key_pair_id="kp-2026", encryption_key_pairs=keys)
    fc.start()
    import_and_tier(fc, PARTITIONS)
    out["file"] = (fc, {"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{base}/remote",
                        KEYS: f"kp-2026=file:{keys['kp-2026']}"})
    with s3_tiered_cluster(base / "s3", "kts-enc-tiered", PARTITIONS, chunk_size=64 * KiB, chunk_compression=True,
                           encryption_key_pair_id="kp-2026", encryption_key_pairs=keys) as sc:
        out["s3"] = (sc, {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "kts-enc-tiered",
                          "remote.storage.prefix": "kt/", "remote.storage.s3.endpoint": sc.moto.endpoint,
                          "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": S3_KEY_ID,
                          "remote.storage.s3.secret.access.key": S3_SECRET, KEYS: f"kp-2026=file:{keys['kp-2026']}"})
        out["keys"] = keys
        yield out
    fc.stop()


def _options(cluster, storage, **extra):
    return {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": "orders,payments",
            "includeHeaders": "true", "partition.target.bytes": str(256 * KiB), **storage, **extra}


@pytest.mark.decoder
@pytest.mark.parametrize("where", ["file", "s3"])
@pytest.mark.parametrize("committed", [False, True])
def test_encrypted_tiered_segments_read_exactly(clusters, where, committed):
    cluster, storage = clusters[where]
    meta = cluster.remote_segments("payments", 0)[0]
    assert meta.encrypted and meta.chunk_compression is (where == "s3")
    options = ReadOptions.parse(_options(cluster, storage, **(
        {"kafka.isolation.level": "read_committed"} if committed else {})))
    planned = planning.plan(options)
    assert planned.remote_ranges and len(planned.tasks) > 1
    preflight(planned, options)                       # the keys open the segments: no error
    for tasks in (planned.tasks, without_manifest_info(planned.tasks)):
        got = read_as_executors(options, tasks)      # asserts no fallback happened
        for t, p in PARTITIONS:
            want = expected_rows(t, p, committed)
            assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"


@pytest.mark.parametrize("where", ["file", "s3"])
def test_the_broker_serves_its_encrypted_segments_through_fetch(clusters, where):
    from spark_helpers import read_tasks
    cluster, storage = clusters[where]
    options = ReadOptions.parse(_options(cluster, storage, **{"fetch.remote.enabled": "false"}))
    batches, total = read_tasks(options, planning.plan(options).tasks)
    assert total.remote_requests == 0 and total.broker_bytes > 0
    got = arrow_rows(batches)
    for t, p in PARTITIONS:
        assert got[(t, p)] == expected_rows(t, p, False)


def test_offline_read_opens_the_encrypted_indexes(clusters):
    """Without a broker the planner reads the manifests and the (encrypted) offset and
    transaction indexes itself."""
    cluster, storage = clusters["file"]
    tiered_end = cluster.remote_segments("payments", 0)[-1].end_offset
    base = {"subscribe": "payments", "includeHeaders": "true", "remote.storage.layout": "aiven", **storage}
    options = ReadOptions.parse(base)
    assert options.offline
    got = read_as_executors(options, planning.plan(options).tasks)[("payments", 0)]
    assert got == [r for r in expected_rows("payments", 0, False) if r["offset"] <= tiered_end]
    # read_committed: the aborted transactions come from the decrypted .txnindex entries; the
    # read stops before a transaction whose marker is not tiered yet, and holds exactly the
    # committed records up to there
    options = ReadOptions.parse({**base, "kafka.isolation.level": "read_committed"})
    got = read_as_executors(options, planning.plan(options).tasks)[("payments", 0)]
    committed = expected_rows("payments", 0, True)
    aborted = {r["offset"] for r in expected_rows("payments", 0, False)} - {r["offset"] for r in committed}
    assert got and aborted and min(aborted) < got[-1]["offset"]      # aborted records were in range
    assert got == [r for r in committed if r["offset"] <= got[-1]["offset"]]


def test_a_missing_key_fails_in_planning_before_any_task(clusters, tmp_path):
    cluster, storage = clusters["s3"]
    other = aiven_writer.generate_key_pair(str(tmp_path / "other.pem"))
    for keys, _kind, needle in ((None, "no-keys", KEYS), (f"kp-2025=file:{other}", "unknown-key-pair", "'kp-2025'"),
                               (f"kp-2026=file:{other}", "wrong-key", "not that key pair's private key")):
        st = {k: v for k, v in storage.items() if k != KEYS}
        if keys:
            st[KEYS] = keys
        options = ReadOptions.parse(_options(cluster, st))
        with pytest.raises(StoragePreflightError) as ei:
            preflight(planning.plan(options), options)
        text = str(ei.value)
        assert "'kp-2026'" in text and needle in text and "before any task was launched" in text, text
        assert "fetch.remote.fallback=always" in text and "backend s3" in text
    # and in the read path itself, the task fails naming it instead of falling back
    from kafka_tiered_source.executor import TaskReader
    options = ReadOptions.parse(_options(cluster, {k: v for k, v in storage.items() if k != KEYS}))
    reader = TaskReader(options)
    task = next(t for t in planning.plan(options).tasks if any(isinstance(r, planning.RemoteRange) for r in t.ranges))
    with pytest.raises(SegmentDecryptionError, match="kp-2026"):
        list(reader.read(task))
    assert reader.metrics.total().fallbacks == 0
    reader.close()


def test_key_rotation_keeps_both_pairs_readable(tmp_path, monkeypatch):
    keys = _keys(tmp_path, "kp-old", "kp-new")
    remote = f"file://{tmp_path}/remote"
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=remote, encryption_key_pair_id="kp-old",
                         encryption_key_pairs={"kp-old": keys["kp-old"]}) as c:
        import_and_tier(c, [("orders", 1)])
    # the plugin after a rotation: a new active pair, the old one kept for reading
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=remote, encryption_key_pair_id="kp-new",
                         encryption_key_pairs=keys) as c:
        c.roll("orders", 1)
        assert c.tier()
        assert {m.encryption.key_id for m in _manifests(tmp_path)} == {"kp-old", "kp-new"}
        storage = {"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": remote}
        common = {"kafka.bootstrap.servers": c.bootstrap_servers, "assign": '{"orders":[1]}',
                  "includeHeaders": "true", **storage}
        monkeypatch.setenv("KTS_TEST_OLD_KEY", open(keys["kp-old"]).read())
        both = ReadOptions.parse({**common, KEYS: f"kp-new=file:{keys['kp-new']}, kp-old=env:KTS_TEST_OLD_KEY"})
        got = read_as_executors(both, planning.plan(both).tasks)
        assert got[("orders", 1)] == expected_rows("orders", 1, False)
        only_new = ReadOptions.parse({**common, KEYS: f"kp-new=file:{keys['kp-new']}"})
        with pytest.raises(StoragePreflightError, match="'kp-old'"):
            preflight(planning.plan(only_new), only_new)


def _manifests(tmp_path):
    out = []
    for root, _, files in os.walk(tmp_path / "remote"):
        for f in files:
            if f.endswith(".rsm-manifest"):
                out.append(aiven.SegmentManifest.from_json(open(os.path.join(root, f), "rb").read()))
    return out


@pytest.mark.spark
def test_spark_reads_encrypted_segments_on_file_and_s3(clusters, spark):
    from spark_helpers import collect_rows, load
    for where in ("file", "s3"):
        cluster, storage = clusters[where]
        got = collect_rows(load(spark, _options(cluster, storage, **{"kafka.isolation.level": "read_committed"})))
        for t, p in PARTITIONS:
            want = expected_rows(t, p, True)
            assert got[(t, p)] == want, f"{where} {t}-{p}: {first_difference(got[(t, p)], want)}"
