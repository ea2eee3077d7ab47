"""Aiven tiered-storage format: keys, custom metadata, chunk index, manifest, transform.

Expected values come from outside the code under test: the plugin's own documentation and test
fixtures (ObjectKeyFactory javadoc, ChunkIndexSerializationTest), Kafka's tagged-field encoding
worked by hand, and the zstandard library for round trips."""
from __future__ import annotations

import base64
import json
import random

import pytest
import zstandard

from kafka_tiered_source.errors import SegmentFormatError
from kafka_tiered_source.testing import aiven_writer
from kafka_tiered_source.storage import aiven
from kafka_tiered_source.storage.layouts import TemplateLayout, local_tiered_key
from kafka_tiered_source.storage.segment import RemoteSegment
from kafka_tiered_source.errors import ConfigError

# From the plugin's ChunkIndexSerializationTest: values 10, 20, 30 (count 3, base 10, 1 byte per
# value: 0, 10, then 30 in full), zstd-compressed with the content size, base64.
AIVEN_ENCODED_CHUNKS = "KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe"


def test_object_key_matches_the_plugin_documentation():
    # ObjectKeyFactory javadoc example
    assert aiven.object_key("someprefix/", "topic", "MWJ6FHTfRYy67jzwZdeqSQ", 7, 1234,
                            "tqimKeZwStOEOwRzT3L5oQ", "log") == \
        "someprefix/topic-MWJ6FHTfRYy67jzwZdeqSQ/7/00000000000000001234-tqimKeZwStOEOwRzT3L5oQ.log"
    assert aiven.object_key(None, "t", "MWJ6FHTfRYy67jzwZdeqSQ", 0, 0, "tqimKeZwStOEOwRzT3L5oQ",
                            "rsm-manifest").endswith("/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ.rsm-manifest")
    with pytest.raises(ValueError, match="suffix"):
        aiven.object_key("", "t", "x", 0, 0, "y", "index")


def test_local_tiered_key_follows_kafka_fileset_naming():
    assert local_tiered_key("/tmp/rsm", "orders", "MWJ6FHTfRYy67jzwZdeqSQ", 2, 42,
                            "tqimKeZwStOEOwRzT3L5oQ", "leader_epoch_checkpoint") == \
        "/tmp/rsm/orders-2-MWJ6FHTfRYy67jzwZdeqSQ/00000000000000000042-tqimKeZwStOEOwRzT3L5oQ.leader_epoch_checkpoint"
    assert local_tiered_key("", "o", "MWJ6FHTfRYy67jzwZdeqSQ", 0, 42, "tqimKeZwStOEOwRzT3L5oQ", "txnindex",
                            padded_offsets=False) == "o-0-MWJ6FHTfRYy67jzwZdeqSQ/42-tqimKeZwStOEOwRzT3L5oQ.txnindex"


def test_template_layout_rejects_unknown_fields():
    with pytest.raises(ConfigError, match=r"\{bucket\}.*valid fields"):
        TemplateLayout("{bucket}/{topic}")
    seg = RemoteSegment("t", "MWJ6FHTfRYy67jzwZdeqSQ", 1, "tqimKeZwStOEOwRzT3L5oQ", 5, 9)
    assert TemplateLayout("{prefix}{topic}/{partition}/{base_offset:08d}.{suffix}", "p/").log_key(seg) == \
        "p/t/1/00000005.log"
    with pytest.raises(SegmentFormatError, match="suffix"):
        TemplateLayout("{topic}/{base_offset}.log").index_key(seg, "offset")


def test_custom_metadata_encoding_by_hand():
    # count 3; tag 0 size 1 zigzag(1)=2; tag 1 size 2 compact "p" (len+1=2); tag 2 size 2 "k"
    expected = bytes([3, 0, 1, 2, 1, 2, 2, ord("p"), 2, 2, 2, ord("k")])
    assert aiven_writer.encode_custom_metadata(remote_size=1, object_prefix="p", object_key="k") == expected
    assert aiven.decode_custom_metadata(expected) == {"remote_size": 1, "object_prefix": "p", "object_key": "k"}
    # only REMOTE_SIZE = 300: zigzag 600 = 0xd8 0x04
    assert aiven_writer.encode_custom_metadata(remote_size=300) == bytes([1, 0, 2, 0xD8, 0x04])
    assert aiven_writer.encode_custom_metadata() == b""
    assert aiven.decode_custom_metadata(b"") == {"remote_size": None, "object_prefix": None, "object_key": None}


def test_custom_metadata_round_trip_and_unknown_tags():
    rnd = random.Random(3)
    for _ in range(50):
        size = rnd.randrange(-(2**63), 2**63)
        prefix = "".join(rnd.choice("abcé/-_") for _ in range(rnd.randrange(0, 200)))
        got = aiven.decode_custom_metadata(aiven_writer.encode_custom_metadata(remote_size=size, object_prefix=prefix))
        assert got == {"remote_size": size, "object_prefix": prefix, "object_key": None}
    # an unknown tag 5 (3 raw bytes) after tag 0 is skipped, as Kafka's reader does
    data = bytes([2, 0, 1, 2, 5, 3, 9, 9, 9])
    assert aiven.decode_custom_metadata(data)["remote_size"] == 1


@pytest.mark.parametrize("data, where", [
    (bytes([1, 0, 5, 2]), "byte position 3"),            # size past the end
    (bytes([2, 1, 2, 2, ord("p"), 0, 1, 2]), "byte position 5"),   # tags out of order
    (bytes([1, 1, 2, 3, ord("p")]), "byte position 3"),  # compact length exceeds field
    (bytes([1, 0, 1, 2, 7]), "byte position 4"),          # trailing bytes
    (bytes([1, 0x80]), "byte position 1"),                # truncated varint
    (bytes([1, 1, 2, 0, 0]), "null compact string"),
])
def test_malformed_custom_metadata_names_the_position(data, where):
    with pytest.raises(SegmentFormatError) as ei:
        aiven.decode_custom_metadata(data)
    assert where in str(ei.value)


def test_variable_chunk_index_matches_the_plugin_fixture():
    d = {"type": "variable", "originalChunkSize": 100, "originalFileSize": 250,
         "transformedChunks": AIVEN_ENCODED_CHUNKS}
    ci = aiven.ChunkIndex.from_dict(d)
    assert [ci.chunk(i) for i in range(3)] == [
        aiven.Chunk(0, 0, 100, 0, 10), aiven.Chunk(1, 100, 100, 10, 20), aiven.Chunk(2, 200, 50, 30, 30)]
    # and we write the very same JSON field, byte for byte
    assert ci.to_dict() == d
    assert ci.chunks_for_range(99, 101) == [ci.chunk(0), ci.chunk(1)]
    assert ci.chunks_for_range(200, 10_000) == [ci.chunk(2)]
    assert ci.chunks_for_range(250, 260) == []


def test_fixed_chunk_index_matches_the_plugin_fixture():
    d = {"type": "fixed", "originalChunkSize": 100, "originalFileSize": 250,
         "transformedChunkSize": 110, "finalTransformedChunkSize": 30}
    ci = aiven.ChunkIndex.from_dict(d)
    assert [ci.chunk(i) for i in range(3)] == [
        aiven.Chunk(0, 0, 100, 0, 110), aiven.Chunk(1, 100, 100, 110, 110), aiven.Chunk(2, 200, 50, 220, 30)]
    assert ci.to_dict() == d


@pytest.mark.parametrize("field", ["originalChunkSize", "originalFileSize", "transformedChunkSize",
                                   "finalTransformedChunkSize"])
def test_chunk_index_missing_field_is_named(field):
    d = {"type": "fixed", "originalChunkSize": 100, "originalFileSize": 250,
         "transformedChunkSize": 110, "finalTransformedChunkSize": 30}
    del d[field]
    with pytest.raises(SegmentFormatError, match=field):
        aiven.ChunkIndex.from_dict(d, location="k.rsm-manifest")


def test_chunk_table_with_wrong_count_is_refused():
    d = {"type": "variable", "originalChunkSize": 100, "originalFileSize": 350,
         "transformedChunks": AIVEN_ENCODED_CHUNKS}
    with pytest.raises(SegmentFormatError, match="3 chunks, expected 4"):
        aiven.ChunkIndex.from_dict(d)


def test_manifest_round_trip_and_plugin_field_names():
    data = bytes(random.Random(1).randbytes(1000)) * 7
    for compression in (False, True):
        log_obj, ci = aiven_writer.transform_chunks(data, 1024, compression)
        blob, si = aiven_writer.build_indexes(b"a" * 8, b"b" * 12, b"c" * 3, b"d" * 4, None)
        m = aiven.SegmentManifest(ci, si, compression)
        j = json.loads(m.to_json())
        assert set(j) == {"chunkIndex", "segmentIndexes", "compression"}
        assert j["compression"] is compression
        assert j["chunkIndex"]["type"] == ("variable" if compression else "fixed")
        assert j["segmentIndexes"] == {"offset": {"position": 0, "size": 8},
                                       "timestamp": {"position": 8, "size": 12},
                                       "producerSnapshot": {"position": 20, "size": 3},
                                       "leaderEpoch": {"position": 23, "size": 4},
                                       "transaction": None}
        assert blob == b"a" * 8 + b"b" * 12 + b"c" * 3 + b"d" * 4
        assert aiven.SegmentManifest.from_json(m.to_json()) == m
        # every chunk decodes to its original bytes
        for i in range(ci.chunk_count):
            ch = ci.chunk(i)
            raw = log_obj[ch.transformed_position:ch.transformed_position + ch.transformed_size]
            got = aiven.decompress_chunk(raw, ch) if compression else raw
            assert got == data[ch.original_position:ch.original_position + ch.original_size]
    # uncompressed: the object is the segment itself, fixed index 1024/1024/last
    log_obj, ci = aiven_writer.transform_chunks(data, 1024, False)
    assert log_obj == data
    assert ci.to_dict() == {"type": "fixed", "originalChunkSize": 1024, "originalFileSize": 7000,
                            "transformedChunkSize": 1024, "finalTransformedChunkSize": 7000 - 6 * 1024}


def test_compressed_chunks_are_independent_zstd_frames_with_content_size():
    data = b"kafka " * 5000
    log_obj, ci = aiven_writer.transform_chunks(data, 4096, True)
    ch = ci.chunk(1)
    frame = log_obj[ch.transformed_position:ch.transformed_position + ch.transformed_size]
    assert zstandard.get_frame_parameters(frame).content_size == 4096
    assert zstandard.ZstdDecompressor().decompress(frame) == data[4096:8192]


def test_manifest_with_encryption_reads_and_is_refused_for_data():
    _, ci = aiven_writer.transform_chunks(b"x" * 10, 4, False)
    _, si = aiven_writer.build_indexes(b"", b"", b"", b"", b"t")
    doc = {"chunkIndex": ci.to_dict(), "segmentIndexes": si.to_dict(), "compression": False,
           "encryption": {"dataKey": "key-pair-7:" + base64.b64encode(b"wrapped").decode(),
                          "aad": base64.b64encode(b"aad").decode()}}
    m = aiven.SegmentManifest.from_json(json.dumps(doc).encode())
    assert m.encryption.key_id == "key-pair-7" and m.encryption.aad == b"aad"
    assert "wrapped" not in repr(m) and base64.b64encode(b"wrapped").decode() not in repr(m)
    with pytest.raises(SegmentFormatError, match="key-pair-7"):
        aiven.require_readable(m, "x.log")


@pytest.mark.parametrize("doc, needle", [
    (b"{not json", "not valid JSON"),
    (b"[]", "not a JSON object"),
    (b'{"segmentIndexes": {}, "compression": false}', "chunkIndex"),
    (b'{"chunkIndex": {"type": "fixed", "originalChunkSize": 1, "originalFileSize": 1, '
     b'"transformedChunkSize": 1, "finalTransformedChunkSize": 1}, "segmentIndexes": {}, '
     b'"compression": false}', "offset"),
    (b'{"chunkIndex": {"type": "zigzag"}, "segmentIndexes": {}, "compression": false}', "originalChunkSize"),
])
def test_bad_manifests_are_named(doc, needle):
    with pytest.raises(SegmentFormatError) as ei:
        aiven.SegmentManifest.from_json(doc, location="p/t-x/0/0-y.rsm-manifest")
    assert needle in str(ei.value) and "p/t-x/0/0-y.rsm-manifest" in str(ei.value)


def test_corrupt_chunk_is_named():
    log_obj, ci = aiven_writer.transform_chunks(b"abc" * 1000, 1000, True)
    ch = ci.chunk(1)
    bad = bytearray(log_obj[ch.transformed_position:ch.transformed_position + ch.transformed_size])
    bad[5] ^= 0xFF
    with pytest.raises(SegmentFormatError, match="chunk 1"):
        aiven.decompress_chunk(bytes(bad), ch, "k.log")


def test_segment_object_key_prefers_custom_metadata():
    seg = RemoteSegment("t", "MWJ6FHTfRYy67jzwZdeqSQ", 7, "tqimKeZwStOEOwRzT3L5oQ", 1234, 2000,
                        custom_metadata=aiven_writer.encode_custom_metadata(object_prefix="other/"))
    assert aiven.segment_object_key(seg, "log", "mine/") == \
        "other/t-MWJ6FHTfRYy67jzwZdeqSQ/7/00000000000000001234-tqimKeZwStOEOwRzT3L5oQ.log"
    seg2 = RemoteSegment("t", "MWJ6FHTfRYy67jzwZdeqSQ", 7, "tqimKeZwStOEOwRzT3L5oQ", 1234, 2000,
                         custom_metadata=aiven_writer.encode_custom_metadata(object_key="a/b/c"))
    assert aiven.segment_object_key(seg2, "indexes", "mine/") == "mine/a/b/c.indexes"


@pytest.mark.parametrize("with_size", [True, False])
def test_a_chunk_that_decompresses_past_its_original_size_is_refused_without_inflating(with_size):
    # 64 MiB of zeros in a few KB: the chunk index says 1 KiB.  Whether or not the frame
    # declares its size, the chunk is refused after reading at most 1 KiB + 1 of output.
    import zstandard
    bomb = zstandard.ZstdCompressor(write_content_size=with_size).compress(bytes(64 << 20))
    chunk = aiven.Chunk(id=3, original_position=0, original_size=1024, transformed_position=0,
                        transformed_size=len(bomb))
    with pytest.raises(SegmentFormatError, match="chunk 3 at transformed byte position 0"):
        aiven.decompress_chunk(bomb, chunk, location="tiered/t/0/x.log")


# ---------------------------------------------------------------------------------------------
# ManifestInfo: what a task carries of a manifest the planner read


def _store_segment(store: str, data: bytes, compression: bool, chunk_size: int = 1000):
    """``data`` as an Aiven segment in DictFetcher store ``store``: (segment, manifest, options)."""
    from storage_servers import DictFetcher
    seg = RemoteSegment("t", "MWJ6FHTfRYy67jzwZdeqSQ", 7, "tqimKeZwStOEOwRzT3L5oQ", 1234, 2000)
    log_obj, ci = aiven_writer.transform_chunks(data, chunk_size, compression)
    blob, si = aiven_writer.build_indexes(b"o" * 8, b"t" * 12, b"", b"0\n0\n", None)
    manifest = aiven.SegmentManifest(ci, si, compression)
    DictFetcher.STORES[store] = {aiven.segment_object_key(seg, s, "p/"): body for s, body in
                                 (("log", log_obj), ("indexes", blob), ("rsm-manifest", manifest.to_json()))}
    opts = {"remote.storage.fetcher.class": "storage_servers:DictFetcher",
            "remote.storage.custom.store": store, "remote.storage.prefix": "p/",
            "fetch.remote.part.size.bytes": "3000"}
    return seg, manifest, opts


@pytest.mark.parametrize("compression", [False, True])
def test_manifest_info_replaces_the_manifest_get_byte_for_byte(compression):
    import dataclasses
    import pickle

    from kafka_tiered_source.storage import create_fetcher
    from kafka_tiered_source.storage.observer import CountingObserver
    data = bytes(random.Random(5).randbytes(300)) * 40 + b"tail"
    seg, manifest, opts = _store_segment(f"info-{compression}", data, compression)
    info = aiven.ManifestInfo.of(manifest)
    assert (info.chunk_table is None) is not compression
    assert info.chunk_index() == (manifest.chunk_index if compression else None)
    assert len(pickle.dumps(info)) < 300          # 13 chunks: a few bytes each
    carried = dataclasses.replace(seg, manifest_info=info)
    assert carried == seg and pickle.loads(pickle.dumps(carried)).manifest_info == info
    ranges = [(0, len(data)), (999, 1001), (5000, 9000), (len(data) - 3, len(data) + 10), (0, None)]
    got = {}
    for s in (seg, carried):
        obs = CountingObserver()
        with create_fetcher(opts, observer=obs) as fetcher:
            got[s is carried] = ([bytes(b) for b in fetcher.fetch_ranges(s, ranges)],
                                 b"".join(bytes(p) for p in fetcher.iter_log_segment(s, 100, 7777)))
        manifests = sum(n for loc, n in obs.by_location.items() if loc.endswith(".rsm-manifest"))
        assert manifests == (0 if s is carried else 1)
    assert got[True] == got[False]
    assert got[True][0] == [data[0:], data[999:1001], data[5000:9000], data[-3:], data]
    assert got[True][1] == data[100:7777]


def test_manifest_info_is_not_made_for_what_must_not_or_cannot_travel():
    _, ci = aiven_writer.transform_chunks(b"x" * 10, 4, False)
    _, si = aiven_writer.build_indexes(b"", b"", b"", b"", None)
    wrapped = aiven.EncryptionMetadata("key-pair-7:" + base64.b64encode(b"wrapped").decode(), b"aad")
    # An encrypted manifest travels as its chunk table and its RSA-wrapped data key (useless
    # without the private key, which never travels); neither shows in a repr.
    info = aiven.ManifestInfo.of(aiven.SegmentManifest(ci, si, False, wrapped))
    assert info.encryption == wrapped and info.compression is False
    assert info.chunk_index() is not None and info.chunk_index().transformed_sizes == (4, 4, 2)
    assert "d3JhcHBlZA" not in repr(info) and "aad" not in repr(info).replace("key-pair", "")
    # a chunk table over the shipping cap is left to the executor's own GET
    many = aiven.ChunkIndex("variable", 1, aiven.MAX_SHIPPED_CHUNK_TABLE + 1,
                            tuple(1000 + i % 7 for i in range(aiven.MAX_SHIPPED_CHUNK_TABLE + 1)))
    assert aiven.ManifestInfo.of(aiven.SegmentManifest(many, si, True)) is None
    few = aiven.ChunkIndex("variable", 1, 1000, tuple(1000 + i % 7 for i in range(1000)))
    assert aiven.ManifestInfo.of(aiven.SegmentManifest(few, si, True)).chunk_index() == few
    # sizes no valid manifest holds (past int32 once re-based) are left to the reader, which
    # names the damage when it reads the chunks
    absurd = aiven.ChunkIndex("variable", 1, 3, (2**31 + 5, 2**31 + 6, 7))
    assert aiven.ManifestInfo.of(aiven.SegmentManifest(absurd, si, True)) is None
