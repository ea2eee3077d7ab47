"""Tiering in the embedded broker's storage: remote layouts, broker-mediated remote reads,
KIP-1248 location answers, list offsets over remote data, restart, and S3 through moto."""
from __future__ import annotations

import os
import socket
import urllib.request

import boto3
import pytest

from kafka_tiered_source.ids import uuid_to_str
from kafka_tiered_source.records.header import iter_headers
from kafka_tiered_source.storage import aiven
from kafka_tiered_source.testing.remote import open_remote_store
from kafka_tiered_source.testing.storage import BrokerStorage

from test_broker_log import META, PARTITIONS, decode, expected, read_all, seg_dir

CONFIGS = {
    "aiven": dict(layout="aiven"),
    "aiven-zstd": dict(layout="aiven", chunk_compression=True, chunk_size=64 * 1024),
    "kafka-local-tiered": dict(layout="kafka-local-tiered"),
}


def fixture_bytes(tp, base, suffix):
    with open(os.path.join(seg_dir(*tp), f"{base:020d}{suffix}"), "rb") as f:
        return f.read()


def expect_tiered(tp):
    """The segments tier() must copy (closed, next segment's base <= LSO), each with the end
    offset RemoteLogManager.copyLogSegment gives a copy: the next segment's base - 1, past the
    last batch where compaction emptied the segment's tail."""
    segs = META[tp]["segments"]
    lso = META[tp]["lastStableOffset"]
    out = []
    for i, s in enumerate(segs[:-1]):
        if segs[i + 1]["baseOffset"] > lso:
            break
        out.append({**s, "endOffset": segs[i + 1]["baseOffset"] - 1})
    return out


def whole_object(store, key, meta):
    """The original segment bytes behind a .log object, using the Aiven manifest when compressed."""
    raw = store.get(key)
    if not meta.chunk_compression:
        return raw
    mkey = key[: -len("log")] + "rsm-manifest"
    m = aiven.SegmentManifest.from_json(store.get(mkey))
    ci = m.chunk_index
    return b"".join(aiven.decompress_chunk(raw[c.transformed_position:c.transformed_position + c.transformed_size], c)
                    for c in (ci.chunk(i) for i in range(ci.chunk_count)))


@pytest.fixture(scope="module", params=list(CONFIGS))
def tiered(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(request.param)
    remote = f"file://{base}/remote"
    s = BrokerStorage(str(base / "data"), remote_storage=remote, **CONFIGS[request.param])
    for t, p in PARTITIONS:
        s.import_log_dir(t, p, seg_dir(t, p))
    copied = s.tier()
    return request.param, s, copied, base


def test_tier_copies_closed_segments_below_lso_in_layout(tiered):
    name, s, copied, base = tiered
    assert len(copied) == sum(len(expect_tiered(tp)) for tp in PARTITIONS)
    store = s.store
    for tp in PARTITIONS:
        metas = s.remote_segments(*tp)
        want = expect_tiered(tp)
        assert [(m.base_offset, m.end_offset, m.size_bytes, m.max_timestamp) for m in metas] == \
            [(w["baseOffset"], w["endOffset"], w["sizeBytes"], w["maxTimestamp"]) for w in want]
        topic_id = s.topics[tp[0]].topic_id
        cache = s.partition(*tp).log.epochs
        for m in metas:
            entries = [(e, o) for e, o in cache.entries if o <= m.end_offset]
            assert m.state == "COPY_FINISHED" and m.topic_id == topic_id
            original = fixture_bytes(tp, m.base_offset, ".log")
            assert whole_object(store, m.log_key, m) == original
            if m.layout == "aiven":
                stem = aiven.main_path(tp[0], topic_id, tp[1], m.base_offset, m.segment_id)
                assert m.log_key == stem + ".log"
                fields = aiven.decode_custom_metadata(m.custom_metadata_bytes)
                assert fields["object_key"] == stem
                sizes = sum(store.size(f"{stem}.{sfx}") for sfx in aiven.SUFFIXES)
                assert fields["remote_size"] == sizes
                manifest = aiven.SegmentManifest.from_json(store.get(stem + ".rsm-manifest"))
                assert manifest.compression == m.chunk_compression == (name == "aiven-zstd")
                idx = manifest.segment_indexes
                blob = store.get(stem + ".indexes")
                assert blob[slice(*idx.offset.range)] == fixture_bytes(tp, m.base_offset, ".index")
                assert blob[slice(*idx.timestamp.range)] == fixture_bytes(tp, m.base_offset, ".timeindex")
                txn = fixture_bytes(tp, m.base_offset, ".txnindex")
                assert (idx.transaction is None) == (not txn)
                if txn:
                    assert blob[slice(*idx.transaction.range)] == txn
                # the key a reader derives from the RemoteSegment is the key we wrote
                assert aiven.segment_object_key(m.to_remote_segment(), "log") == m.log_key
            else:
                stem = f"{tp[0]}-{tp[1]}-{topic_id}/{m.base_offset:020d}-{m.segment_id}"
                assert m.log_key == stem + ".log" and m.custom_metadata is None
                for sfx in (".index", ".timeindex", ".txnindex"):
                    assert store.get(stem + sfx) == fixture_bytes(tp, m.base_offset, sfx)
                assert store.exists(stem + ".snapshot") and store.exists(stem + ".leader_epoch_checkpoint")
                # the leader's epoch entries up to the next segment's base (cumulative)
                assert store.get(stem + ".leader_epoch_checkpoint") == \
                    ("0\n%d\n" % len(entries) + "".join(f"{e} {o}\n" for e, o in entries)).encode()
        # local copies beyond retention are gone: default keeps none of the tiered ones
        local = sorted(int(n[:-4]) for n in os.listdir(base / "data" / f"{tp[0]}-{tp[1]}") if n.endswith(".log"))
        assert local == [sg["baseOffset"] for sg in META[tp]["segments"][len(want):]]
    assert s.tier() == []           # nothing new to copy


def test_list_offsets_after_tiering(tiered):
    _, s, _, _ = tiered
    for tp in PARTITIONS:
        m, want = META[tp], expect_tiered(tp)
        assert s.list_offsets(*tp, -2) == (m["logStartOffset"], -1)
        assert s.list_offsets(*tp, -4) == (m["segments"][len(want)]["baseOffset"], -1)
        assert s.list_offsets(*tp, -5) == (want[-1]["lastOffset"], -1)
        assert s.list_offsets(*tp, -1) == (m["highWatermark"], -1)
        assert s.list_offsets(*tp, -6) == (want[-1]["lastOffset"] + 1, -1)
    recs = expected("orders", 0, "uncommitted")
    for target in (recs[0][1], recs[700][1] + 1, recs[4000][1], recs[-3][1]):
        assert s.list_offsets("orders", 0, target) == next((r[0], r[1]) for r in recs if r[1] >= target)
    mx = max(r[1] for r in recs)
    assert s.list_offsets("orders", 0, -3) == (next(r[0] for r in recs if r[1] == mx), mx)


@pytest.mark.parametrize("tp", PARTITIONS, ids=lambda tp: f"{tp[0]}-{tp[1]}")
@pytest.mark.parametrize("isolation", [0, 1], ids=["uncommitted", "committed"])
def test_remote_reads_return_expected_records(tiered, tp, isolation):
    _, s, _, _ = tiered
    got, remote = read_all(s, *tp, isolation)
    assert remote >= len(expect_tiered(tp))
    assert got == expected(*tp, "committed" if isolation else "uncommitted")


def _object_range(store, meta, start, end):
    if not meta.chunk_compression:
        return store.get(meta.log_key, start, end)
    return whole_object(store, meta.log_key, meta)[start:end]


@pytest.mark.parametrize("max_bytes", [1, 20_000, 10 << 20])
def test_locate_hints_cover_whole_batches(tiered, max_bytes):
    _, s, _, _ = tiered
    for tp in PARTITIONS:
        metas = {m.segment_id: m for m in s.remote_segments(*tp)}
        aborted_all = META[tp]["abortedTransactions"]
        for m in list(metas.values())[::3]:
            for offset in (m.base_offset, (m.base_offset + m.end_offset) // 2, m.end_offset):
                for isolation in (0, 1):
                    ans = s.locate(*tp, offset, max_bytes, isolation, client_id="direct")
                    assert ans is not None
                    meta = metas[uuid_to_str(ans.segment_id)]
                    assert (ans.base_offset, ans.end_offset) == (meta.base_offset, meta.end_offset)
                    assert ans.custom_metadata == meta.custom_metadata_bytes
                    assert ans.storage_format == "ApacheKafkaV1"
                    assert ans.object_key == meta.log_key and ans.presigned_url is None
                    data = _object_range(s.store, meta, ans.start_position, ans.end_position)
                    hs = list(iter_headers(data))
                    assert sum(h.size for h in hs) == len(data) == ans.end_position - ans.start_position
                    if offset >= hs[0].base_offset:         # compaction may have removed offset itself
                        assert hs[0].base_offset <= offset <= hs[0].last_offset
                    else:
                        assert hs[0].base_offset > offset
                    assert len(hs) == 1 or ans.end_position - ans.start_position <= max_bytes
                    if ans.end_position < meta.size_bytes and max_bytes > 1:
                        nxt = list(iter_headers(_object_range(s.store, meta, ans.end_position, meta.size_bytes)))[0]
                        assert ans.end_position + nxt.size - ans.start_position > max_bytes
                    if isolation:
                        upper = hs[-1].last_offset + 1
                        want = {(a["producerId"], a["firstOffset"]) for a in aborted_all
                                if a["lastOffset"] >= offset and a["firstOffset"] < upper}
                        assert set(ans.aborted) == want
                    else:
                        assert ans.aborted is None
    assert s.metrics.get("location_grants_total", client_id="direct") > 0
    assert s.locate("orders", 0, META[("orders", 0)]["highWatermark"] - 1, 100, 0) is None  # local


def test_remote_read_committed_has_aborted_markers_from_later_segments(tiered):
    _, s, _, _ = tiered
    # txn 1002@1673 is aborted by a marker at 2331, in a local segment past the LSO
    fr = s.read("payments", 0, 1713, 1 << 20, 1)
    assert fr.from_remote
    assert (1002, 1673) in fr.aborted
    recs = decode(fr.records, fr.aborted, committed=True)
    want = [r for r in expected("payments", 0, "committed") if r[0] >= 1713][:len(recs)]
    assert recs == want and recs


def test_metrics_exposition(tiered):
    _, s, _, _ = tiered
    s.read("orders", 1, 1000, 1000, 0, client_id='spark "a"')
    text = s.metrics.prometheus_text()
    assert '# TYPE kafka_tiered_broker_remote_fetch_requests_total counter' in text
    assert 'kafka_tiered_broker_remote_fetch_requests_total{client_id="spark \\"a\\"",topic="orders"} 1' in text
    assert s.metrics.get("remote_fetch_bytes_total", client_id='spark "a"') > 0


def test_restart_keeps_remote_metadata(tiered):
    name, s, _, base = tiered
    s2 = BrokerStorage(str(base / "data"), remote_storage=s.remote_storage, **CONFIGS[name])
    for tp in PARTITIONS:
        assert s2.remote_segments(*tp) == s.remote_segments(*tp)
        assert s2.offsets(*tp) == s.offsets(*tp)
    got, remote = read_all(s2, "payments", 0, 1)
    assert remote and got == expected("payments", 0, "committed")
    assert s2.tier() == []


def test_local_retention_minus_one_keeps_local_copies(tmp_path):
    s = BrokerStorage(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r",
                      local_retention_bytes=-1, local_retention_ms=-1)
    s.import_log_dir("orders", 1, seg_dir("orders", 1))
    assert len(s.tier()) == 6
    assert s.offsets("orders", 1).local_log_start_offset == 1000
    assert s.locate("orders", 1, 1000, 1000, 0) is None
    got, remote = read_all(s, "orders", 1, 0)
    assert remote == 0 and got == expected("orders", 1, "uncommitted")


def test_local_retention_bytes_keeps_newest(tmp_path):
    limit = 700_000
    s = BrokerStorage(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r",
                      local_retention_bytes=limit)
    s.import_log_dir("orders", 0, seg_dir("orders", 0))
    s.tier()
    kept = [sg["sizeBytes"] for sg in META[("orders", 0)]["segments"]
            if sg["baseOffset"] >= s.offsets("orders", 0).local_log_start_offset]
    # as Kafka's retention.bytes: what stays is >= the limit, one segment less would not be
    assert sum(kept) >= limit > sum(kept) - kept[0]
    got, remote = read_all(s, "orders", 0, 0)
    assert remote and got == expected("orders", 0, "uncommitted")


def test_tier_waits_for_open_transaction_and_appended_segments(tmp_path):
    s = BrokerStorage(str(tmp_path / "d"), remote_storage="memory://broker-tier-test", segment_bytes=2048)
    s.create_topic("t", 1)
    from test_broker_log import make_batch
    s.append("t", 0, make_batch([b"x" * 500] * 2, producer_id=3, epoch=0, seq=0, transactional=True))
    for _ in range(10):
        s.append("t", 0, make_batch([b"y" * 500] * 2))
    assert s.offsets("t", 0).last_stable_offset == 0
    assert s.tier() == []                       # the open transaction pins everything
    s.write_txn_marker("t", 0, 3, 0, commit=False, coordinator_epoch=0)
    copied = s.tier()
    assert copied and copied[-1].end_offset < s.offsets("t", 0).log_end_offset
    fr = s.read("t", 0, 0, 10, 1)
    assert fr.from_remote and fr.aborted == [(3, 0)]
    assert decode(fr.records, fr.aborted, committed=True) == []
    leo = s.offsets("t", 0).log_end_offset
    s.roll("t", 0)                              # the active segment closes and can go too
    assert s.tier()[-1].end_offset == leo - 1
    assert s.offsets("t", 0).local_log_start_offset == leo == s.list_offsets("t", 0, -4)[0]
    got, remote = read_all(s, "t", 0, 1)
    assert remote and [r[4] for r in got] == [b"y" * 500] * 20


# ------------------------------------------------------------------------------------ S3 (moto)

@pytest.fixture(scope="module")
def moto_endpoint():
    from moto.server import ThreadedMotoServer
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_s3_tiering_remote_reads_and_presigned_locate(tmp_path, moto_endpoint):
    creds = dict(aws_access_key_id="AKIDTEST", aws_secret_access_key="s3cr3t-value")
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1", **creds) \
        .create_bucket(Bucket="tiered")
    s = BrokerStorage(str(tmp_path / "d"), remote_storage="s3://tiered/cluster-a", layout="aiven",
                      presign=True, s3_endpoint_url=moto_endpoint, s3_region="us-east-1",
                      s3_access_key_id="AKIDTEST", s3_secret_access_key="s3cr3t-value")
    assert "s3cr3t" not in repr(s.store.options)
    s.import_log_dir("payments", 0, seg_dir("payments", 0))
    copied = s.tier()
    assert len(copied) == len(expect_tiered(("payments", 0)))
    keys = s.store.list("")
    assert f"{copied[0].log_key}" in keys and all(not k.startswith("cluster-a") for k in keys)
    got, remote = read_all(s, "payments", 0, 1)
    assert remote and got == expected("payments", 0, "committed")

    ans = s.locate("payments", 0, 500, 30_000, 1, client_id="spark-exec-1")
    assert ans.presigned_url and "s3cr3t" not in repr(ans) and "Signature" not in repr(ans)
    req = urllib.request.Request(ans.presigned_url,
                                 headers={"Range": f"bytes={ans.start_position}-{ans.end_position - 1}"})
    with urllib.request.urlopen(req) as resp:
        body = resp.read()
    hs = list(iter_headers(body))
    assert len(body) == ans.end_position - ans.start_position == sum(h.size for h in hs)
    assert hs[0].base_offset <= 500 <= hs[0].last_offset
    # the same bytes through the store's ranged read
    store = open_remote_store("s3://tiered/cluster-a", s.store.options)
    assert store.get(ans.object_key, ans.start_position, ans.end_position) == body
    assert s.metrics.get("location_granted_bytes_total", client_id="spark-exec-1") == len(body)


def test_remote_fetch_error_is_reported_and_counted(tmp_path):
    s = BrokerStorage(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r")
    s.import_log_dir("orders", 1, seg_dir("orders", 1))
    (first, *_) = s.tier()
    s.store.delete(first.log_key)
    fr = s.read("orders", 1, 1000, 1000, 0, client_id="c1")
    assert fr.error_name == "KAFKA_STORAGE_ERROR" and fr.error_code == 56 and fr.records == b""
    assert first.log_key in fr.error_message
    assert s.metrics.get("remote_fetch_errors_total", client_id="c1", topic="orders") == 1
    assert s.metrics.get("remote_fetch_requests_total", client_id="c1") == 0


def test_local_retention_ms(tmp_path):
    ten_years = 10 * 365 * 24 * 3600 * 1000
    old_data = BrokerStorage(str(tmp_path / "a"), remote_storage=f"file://{tmp_path}/ra",
                             local_retention_ms=ten_years)
    old_data.import_log_dir("orders", 1, seg_dir("orders", 1))
    assert len(old_data.tier()) == 6
    assert old_data.offsets("orders", 1).local_log_start_offset == 1000      # young enough to stay
    expired = BrokerStorage(str(tmp_path / "b"), remote_storage=f"file://{tmp_path}/rb",
                            local_retention_ms=60_000)
    expired.import_log_dir("orders", 1, seg_dir("orders", 1))
    expired.tier()                                   # fixture timestamps are from Nov 2023
    assert expired.offsets("orders", 1).local_log_start_offset == 1848
