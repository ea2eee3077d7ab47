"""Bad input gets a clear error naming what and where — or, where the input is merely
unusual (an empty topic, a 100 MB record, a broker's inconsistent KIP-1248 hints), the read
works and gives the right rows.

Reads here go through ``planning.plan`` + ``TaskReader`` (no Spark) against the embedded broker.
The inconsistent-hints tests put a small Kafka-protocol proxy in front of the broker that
rewrites the KIP-1248 fields of real Fetch responses with the project's codec.
"""
from __future__ import annotations

import socket
import struct
import threading

import crc32c
import pytest

from kafka_tiered_source.errors import ConfigError, KafkaTieredError
from kafka_tiered_source.protocol import codec
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.storage.aiven import SegmentManifest
from kafka_tiered_source.executor import TaskReader

pytestmark = pytest.mark.decoder


# --------------------------------------------------------------------------------------------
# building record batches by hand (v2, uncompressed)


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varint(v: int) -> bytes:
    return _uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def make_batch(values: list[bytes], base_offset: int = 0, ts: int = 1_700_000_000_000) -> bytes:
    recs = bytearray()
    for i, v in enumerate(values):
        key = b"k%d" % (base_offset + i)
        body = (b"\x00" + _varint(0) + _varint(i) + _varint(len(key)) + key
                + _varint(len(v)) + v + _varint(0))
        recs += _varint(len(body)) + body
    after_crc = (struct.pack(">hiqqqhii", 0, len(values) - 1, ts, ts, -1, -1, -1, len(values))
                 + bytes(recs))
    crc = crc32c.crc32c(after_crc)
    head = struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), 0, 2, crc)
    return head + after_crc


def rows_of(options: dict):
    """(offset, value) of every row a plan_read + TaskReader read returns, and its metrics."""
    opts = ReadOptions.parse(options)
    plan = planning.plan(opts)
    reader = TaskReader(opts)
    rows = []
    try:
        for task in plan.tasks:
            for b in reader.read(task):
                rows += zip(b.column("offset").to_pylist(), b.column("value").to_pylist(), strict=True)
    finally:
        reader.close()
    return rows, reader.metrics.snapshot().total(), plan


def storage_options(c, remote_dir, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "remote.storage.fetcher": "fsspec",
            "remote.storage.fsspec.url": f"file://{remote_dir}", **extra}


# --------------------------------------------------------------------------------------------
# options


BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


@pytest.mark.parametrize("option, value, says", [
    ("startingOffsets", '{"t": {"0": 5', "not valid JSON"),
    ("startingOffsets", '{"t": {"0": "x"}}', "t-0"),
    ("startingOffsets", '{"t": [1]}', "topic 't'"),
    ("startingOffsets", "[1, 2]", "JSON object"),
    ("startingOffsets", '{"t": {"zero": 1}}', "partition 'zero'"),
    ("endingOffsets", '{"t": {"0": 1.5}}', "t-0"),
    ("endingOffsets", '{"t": {"0": true}}', "t-0"),
    ("startingOffsets", '{"t": {"0": 1, "0": 2}}', "twice"),
    ("startingOffsets", '{"t":' * 50_000, "startingOffsets"),     # deeper than the JSON parser recurses
])
def test_malformed_offsets_json_names_the_option(option, value, says):
    with pytest.raises(ConfigError) as ei:
        ReadOptions.parse({**BASE, option: value})
    assert ei.value.option == option
    assert option in str(ei.value) and says in str(ei.value)


def test_start_after_end_is_refused_naming_both_options_and_the_partition():
    with pytest.raises(ConfigError) as ei:
        ReadOptions.parse({**BASE, "startingOffsets": '{"t": {"0": 5}}',
                           "endingOffsets": '{"t": {"0": 2}}'})
    msg = str(ei.value)
    assert "t-0" in msg and "startingOffsets" in msg and "endingOffsets" in msg
    assert "5" in msg and "2" in msg


def test_manifest_nested_too_deep_is_a_segment_format_error():
    with pytest.raises(KafkaTieredError, match="manifest is not valid JSON"):
        SegmentManifest.from_json(b"[" * 100_000, location="bucket/x.rsm-manifest")


def test_manifest_with_absurd_chunk_count_is_refused_before_allocating():
    doc = (b'{"chunkIndex":{"type":"fixed","originalChunkSize":1,"originalFileSize":2147483647,'
           b'"transformedChunkSize":1,"finalTransformedChunkSize":1},"segmentIndexes":{},'
           b'"compression":false}')
    with pytest.raises(KafkaTieredError, match="2147483647 chunks") as ei:
        SegmentManifest.from_json(doc, location="bucket/seg.rsm-manifest")
    assert "bucket/seg.rsm-manifest" in str(ei.value)


# --------------------------------------------------------------------------------------------
# topics: unknown, empty, over-large records


def test_unknown_topic_is_named_at_planning(cluster_factory):
    c = cluster_factory()
    c.create_topic("present")
    with pytest.raises(KafkaTieredError) as ei:
        planning.plan(ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers,
                                     "subscribe": "present,no-such-topic"}))
    assert "'no-such-topic' does not exist" in str(ei.value)


def test_unknown_topic_in_assign_is_named(cluster_factory):
    c = cluster_factory()
    with pytest.raises(KafkaTieredError) as ei:
        planning.plan(ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers,
                                     "assign": '{"ghost-topic": [0]}'}))
    assert "'ghost-topic' does not exist" in str(ei.value)


def test_unknown_partition_in_assign_is_named(cluster_factory):
    c = cluster_factory()
    c.create_topic("present")
    with pytest.raises(ConfigError) as ei:
        planning.plan(ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers,
                                     "assign": '{"present": [0, 7]}'}))
    assert "present-7" in str(ei.value)


def test_empty_topic_and_empty_partition_read_zero_rows(cluster_factory, tmp_path):
    c = cluster_factory(remote_storage=f"file://{tmp_path}/remote")
    c.create_topic("empty", partitions=2)
    c.create_topic("half", partitions=2)
    c.append("half", 1, make_batch([b"a", b"b", b"c"]))
    rows, stats, _ = rows_of(storage_options(c, tmp_path / "remote", subscribe="empty"))
    assert rows == [] and stats.records == 0
    rows, _, _ = rows_of(storage_options(c, tmp_path / "remote", subscribe="half"))
    assert sorted(rows) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_record_over_100_mb_is_read_directly(cluster_factory, tmp_path):
    """One 100 MB + 1 byte value in a tiered segment between small records: the direct read
    returns it intact (the reader carries the batch across 8 MiB parts)."""
    big = bytes(range(256)) * (100_000_001 // 256) + b"!" * (100_000_001 % 256)
    assert len(big) == 100_000_001
    c = cluster_factory(remote_storage=f"file://{tmp_path}/remote")
    c.create_topic("huge")
    c.append("huge", 0, make_batch([b"before"], 0))
    c.append("huge", 0, make_batch([big], 1))
    c.append("huge", 0, make_batch([b"after"], 2))
    c.roll("huge", 0)
    assert c.tier()
    rows, stats, plan = rows_of(storage_options(c, tmp_path / "remote", subscribe="huge"))
    assert plan.remote_ranges, "the segment was not planned as a direct read"
    assert [o for o, _ in rows] == [0, 1, 2]
    assert rows[0][1] == b"before" and rows[2][1] == b"after"
    assert rows[1][1] == big
    assert stats.fallbacks == 0 and stats.remote_bytes > 100_000_000


def test_record_over_100_mb_is_read_through_the_broker(cluster_factory, tmp_path):
    """The same record not tiered, read with fetch.remote.enabled=false: one Fetch answer of
    100 MB through the broker client, intact."""
    big = b"z" * 100_000_001
    c = cluster_factory(remote_storage=f"file://{tmp_path}/remote")
    c.create_topic("huge")
    for i, v in enumerate((b"before", big, b"after")):
        c.append("huge", 0, make_batch([v], i))
    rows, stats, plan = rows_of(storage_options(c, tmp_path / "remote", subscribe="huge",
                                                **{"fetch.remote.enabled": "false"}))
    assert not plan.remote_ranges
    assert [o for o, _ in rows] == [0, 1, 2] and rows[1][1] == big
    assert stats.broker_bytes > 100_000_000


# --------------------------------------------------------------------------------------------
# inconsistent KIP-1248 hints: a proxy rewrites real Fetch responses


class HintProxy:
    """Kafka-protocol TCP proxy in front of one broker.  Metadata and Fetch responses are
    decoded with the codec: brokers' ports are pointed at the proxy (so clients stay behind
    it), and ``rewrite(partition)`` may change the KIP-1248 fields of Fetch partitions that
    carry a segment location.  ``rewritten`` counts the partitions it changed."""

    def __init__(self, upstream_port: int, rewrite):
        self.upstream_port = upstream_port
        self.rewrite = rewrite
        self.rewritten = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self._stop = True
        self.sock.close()

    def _accept(self):
        while not self._stop:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            pending: dict[int, tuple[int, int]] = {}
            threading.Thread(target=self._pump, args=(client, upstream, pending, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pending, False), daemon=True).start()

    @staticmethod
    def _read(sock, n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError
            buf += chunk
        return buf

    def _pump(self, src, dst, pending, requests):
        try:
            while True:
                body = self._read(src, struct.unpack(">i", self._read(src, 4))[0])
                if requests:
                    key, version, corr = struct.unpack_from(">hhi", body, 0)
                    pending[corr] = (key, version)
                else:
                    corr = struct.unpack_from(">i", body, 0)[0]
                    key, version = pending.pop(corr, (None, None))
                    if key in (1, 3):
                        body = self._response(body, key, version)[4:]
                dst.sendall(struct.pack(">i", len(body)) + body)
        except (ConnectionError, OSError):
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def _response(self, body, key, version):
        corr, resp = codec.decode_response(body, key, version)
        if key == 3:
            for b in resp.brokers:
                b.port = self.port
        else:
            for ep in getattr(resp, "node_endpoints", None) or ():
                ep.port = self.port
            for t in resp.responses:
                for p in t.partitions:
                    if p.remote_log_segment_id != bytes(16):
                        self.rewrite(p)
                        self.rewritten += 1
        return codec.encode_response(resp, version, corr)


N_BATCHES, PER_BATCH = 24, 10


@pytest.fixture
def hinted(cluster_factory, tmp_path):
    """A topic with several tiered segments plus a local tail, and its expected rows."""
    c = cluster_factory(remote_storage=f"file://{tmp_path}/remote", segment_bytes=8 * 1024)
    c.create_topic("hints")
    want = []
    for b in range(N_BATCHES):
        values = [b"v%05d-" % (b * PER_BATCH + i) + b"x" * 150 for i in range(PER_BATCH)]
        c.append("hints", 0, make_batch(values, b * PER_BATCH))
        want += [(b * PER_BATCH + i, v) for i, v in enumerate(values)]
    assert c.tier()
    assert len(c.remote_segments("hints", 0)) >= 2
    return c, tmp_path / "remote", want


def _read_through(c, remote, rewrite):
    proxy = HintProxy(c.port, rewrite)
    try:
        opts = storage_options(c, remote, subscribe="hints")
        opts["kafka.bootstrap.servers"] = f"127.0.0.1:{proxy.port}"
        rows, stats, plan = rows_of(opts)
    finally:
        proxy.close()
    return rows, stats, plan, proxy.rewritten


def test_proxy_passes_consistent_hints_through_unchanged(hinted):
    c, remote, want = hinted
    rows, stats, plan, rewritten = _read_through(c, remote, lambda p: None)
    assert rewritten > 0 and plan.remote_ranges
    assert sorted(rows) == want and stats.fallbacks == 0


def test_hint_end_before_start_makes_the_broker_serve_the_rest(hinted):
    c, remote, want = hinted

    def swap(p):
        p.remote_log_segment_end_position = max(0, p.remote_log_segment_start_position - 1)
    rows, stats, plan, rewritten = _read_through(c, remote, swap)
    assert rewritten > 0
    assert not plan.remote_ranges and plan.broker_ranges
    assert sorted(rows) == want


def test_hint_ending_too_early_is_a_detected_short_read_and_falls_back(hinted):
    c, remote, want = hinted

    def short(p):
        p.remote_log_segment_end_position = p.remote_log_segment_start_position + 100
    rows, stats, plan, rewritten = _read_through(c, remote, short)
    assert rewritten > 0 and plan.remote_ranges
    assert sorted(rows) == want
    assert stats.fallbacks >= 1


def test_hint_beyond_the_object_size_reads_what_is_there(hinted):
    c, remote, want = hinted

    def beyond(p):
        p.remote_log_segment_end_position = p.remote_log_segment_end_position + 10_000_000
    rows, stats, plan, rewritten = _read_through(c, remote, beyond)
    assert rewritten > 0 and plan.remote_ranges
    assert sorted(rows) == want


def test_hint_starting_beyond_the_object_falls_back(hinted):
    c, remote, want = hinted

    def past(p):
        size = p.remote_log_segment_end_position
        p.remote_log_segment_start_position = size + 1000
        p.remote_log_segment_end_position = size + 2000
    rows, stats, plan, rewritten = _read_through(c, remote, past)
    assert rewritten > 0
    assert sorted(rows) == want
    assert stats.fallbacks >= 1
