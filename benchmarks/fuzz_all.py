"""Coverage-guided fuzzing (atheris) of every parser that reads bytes from outside the process.

The contract every harness checks: on any input, only the project's own errors
(:class:`~kafka_tiered_source.errors.KafkaTieredError` subclasses: ProtocolError,
CorruptRecordError, SegmentFormatError, ...) may escape.  Anything else — IndexError, KeyError,
UnicodeDecodeError, struct.error, RecursionError, MemoryError from an absurd length, a hang
(libFuzzer ``-timeout``) — is a bug; libFuzzer writes the input to ``crash-*`` / ``timeout-*``
and such inputs go to ``tests/regressions/<harness>/`` where the test suite replays them.

Harnesses (``HARNESSES``; the same functions are run by ``tests/test_fuzz_harnesses.py``):

=====================  =====================================================================
``decode_native``      ``records.decode_batches`` with the native C backend (byte 0 = options)
``decode_python``      the same with the pure-Python reference backend
``decode_diff``        both backends on the same input must agree (``fuzz_decode.py``'s check)
``request``            ``protocol.codec.decode_request`` (broker side: header + any body)
``response``           ``protocol.codec.decode_response`` (client side; bytes 0-1 select the
                       API and version, the rest is the frame without its size prefix)
``manifest``           ``storage.aiven.SegmentManifest.from_json``
``manifest_fields``    the same on well-formed JSON whose fields the input replaces or deletes
``custom_metadata``    ``storage.aiven.decode_custom_metadata``
``chunk_index``        Aiven's binary chunk-size table (raw, then zstd + base64 through
                       ``ChunkIndex.from_dict``) and range look-ups on the result
=====================  =====================================================================

Run one harness (the corpus directory is seeded with valid inputs on first use)::

    python benchmarks/fuzz_all.py --harness=request -runs=1000000 /tmp/corpus-request

Run every harness for a bounded time each (``--all`` forks one process per harness and prints
the executions each one did)::

    python benchmarks/fuzz_all.py --all --seconds=60 --corpus-root=/tmp/kt-corpus

Against an AddressSanitizer/UBSan build of ``native/`` (built into a copy of the package so the
in-place build the tests use is left alone; ``KAFKA_TIERED_SANITIZE=atheris`` instruments with
ASan without linking its runtime, which atheris' ``asan_with_fuzzer.so`` provides, so libFuzzer
keeps its coverage feedback)::

    rm -rf /tmp/kt-asan && mkdir -p /tmp/kt-asan && cp -r kafka_tiered_source /tmp/kt-asan/
    rm -f /tmp/kt-asan/kafka_tiered_source/_native*.so
    KAFKA_TIERED_SANITIZE=atheris .venv/bin/python setup.py build_ext --build-lib /tmp/kt-asan \\
        --build-temp /tmp/kt-asan/tmp --force
    cd /tmp/kt-asan && PYTHONPATH=/tmp/kt-asan \\
        ASAN_OPTIONS=detect_leaks=0,allocator_may_return_null=1 \\
        LD_PRELOAD=$(/work/main/.venv/bin/python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so \\
        /work/main/.venv/bin/python /work/main/benchmarks/fuzz_all.py --harness=decode_native \\
        -runs=1000000 -timeout=10 -rss_limit_mb=4096 /tmp/kt-corpus/decode_native

(repeat with each harness name for 1M executions each; the pure-Python harnesses do not need
the sanitizer build but run the same way).  ``docs/fuzzing.md`` records the executions actually
run and what they found.
"""
from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    # appended, not prepended: a sanitizer build of the package on PYTHONPATH must win
    sys.path.append(ROOT)
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "kafka-3.9.1", "segments")

from kafka_tiered_source.errors import CorruptRecordError, KafkaTieredError  # noqa: E402
from kafka_tiered_source.testing import aiven_writer


class ContractViolation(AssertionError):
    """A harness found behaviour that breaks the contract (not just an unexpected exception)."""


# --------------------------------------------------------------------------------------------
# harnesses: each takes bytes and returns normally or raises a KafkaTieredError


def _decode(data: bytes, backend: str):
    from kafka_tiered_source.records import ReadCommittedFilter, decode_batches
    if not data:
        return None
    flags, log = data[0], data[1:]
    filt = ReadCommittedFilter([(1001, 0), (1002, 50)], 10**6) if flags & 8 else None
    res = decode_batches(log, backend=backend, verify_crc=bool(flags & 1),
                         start_offset=5 if flags & 2 else None,
                         end_offset=40 if flags & 32 else None,
                         include_headers=not flags & 4, filter=filt,
                         max_batch_bytes=4096 if flags & 16 else 1 << 30,
                         max_decompressed_bytes=1 << 20)
    if not 0 <= res.consumed <= len(log):
        raise ContractViolation(f"consumed {res.consumed} of {len(log)} bytes")
    return res


def h_decode_native(data: bytes) -> None:
    _decode(data, "native")


def h_decode_python(data: bytes) -> None:
    _decode(data, "python")


def _outcome(data, backend):
    try:
        res = _decode(data, backend)
    except CorruptRecordError as exc:
        return ("corrupt", type(exc).__name__, exc.position, exc.base_offset)
    if res is None:
        return None
    t = res.table(not data[0] & 4)
    t = t.set_column(5, "timestamp", t.column("timestamp").cast("int64"))
    return ("ok", t.to_pylist(), res.consumed, res.leftover, res.next_offset, res.done)


def h_decode_diff(data: bytes) -> None:
    native, python = _outcome(data, "native"), _outcome(data, "python")
    if native != python:
        raise ContractViolation(f"backends disagree:\n native {native!r}\n python {python!r}")


def h_request(data: bytes) -> None:
    from kafka_tiered_source.protocol import codec
    hdr, body = codec.decode_request(data)
    # what the broker does next with a decoded request: encode an answer for its version
    codec.encode_body(body, hdr.request_api_version)


def _response_targets():
    from kafka_tiered_source.protocol.messages import RESPONSES
    return [(cls, v) for _, cls in sorted(RESPONSES.items())
            for v in range(cls.VALID_VERSIONS.lo, cls.VALID_VERSIONS.hi + 1)]


def h_response(data: bytes) -> None:
    from kafka_tiered_source.protocol import codec
    if len(data) < 2:
        return
    targets = _response_targets()
    cls, version = targets[((data[0] << 8) | data[1]) % len(targets)]
    codec.decode_response(data[2:], cls, version)


def h_manifest(data: bytes) -> None:
    from kafka_tiered_source.storage.aiven import SegmentManifest
    m = SegmentManifest.from_json(data, location="fuzz/manifest")
    ci = m.chunk_index
    ci.chunks_for_range(0, ci.original_file_size)
    m.segment_indexes.to_dict()


_FIELD_VALUES = (None, -1, 0, 1, 255, 2**31 - 1, 2**31, 2**63, -2**63, 1.5, 1e308, "", "x", "AAAA",
                 "!!", "KLUv/QQAAQA=", True, False, [], [1], {}, {"position": 1, "size": 2})


def _leaf_paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k in sorted(o):
            yield from _leaf_paths(o[k], p + (k,))


_MANIFEST_DOCS: list = []


def h_manifest_fields(data: bytes) -> None:
    """Structure-aware: byte 0 picks a valid manifest, then each byte pair replaces (or, value
    index past the table, deletes) one field, so the JSON stays well-formed and the checks on
    types, ranges and missing fields are what gets explored."""
    import copy
    import json
    if not _MANIFEST_DOCS:
        _MANIFEST_DOCS.extend(json.loads(s) for s in seeds("manifest"))
    if not data:
        return
    doc = copy.deepcopy(_MANIFEST_DOCS[data[0] % len(_MANIFEST_DOCS)])
    for i in range(1, len(data) - 1, 2):
        paths = list(_leaf_paths(doc))[1:]
        if not paths:
            break
        path = paths[data[i] % len(paths)]
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        v = data[i + 1]
        if v >= len(_FIELD_VALUES) * 10:
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(_FIELD_VALUES[v % len(_FIELD_VALUES)])
    h_manifest(json.dumps(doc).encode())


def h_custom_metadata(data: bytes) -> None:
    from kafka_tiered_source.storage.aiven import decode_custom_metadata
    decode_custom_metadata(data)


def h_chunk_index(data: bytes) -> None:
    import base64

    import zstandard

    from kafka_tiered_source.storage import aiven
    if len(data) < 8:
        return
    ocs, ofs = struct.unpack_from(">HI", data, 0)
    table = data[6:]
    aiven._decode_chunk_sizes(table, "fuzz")
    comp = base64.b64encode(zstandard.ZstdCompressor(write_content_size=True).compress(table))
    ci = aiven.ChunkIndex.from_dict({"type": "variable", "originalChunkSize": ocs,
                                     "originalFileSize": ofs, "transformedChunks": comp.decode()},
                                    "fuzz")
    ci.chunks_for_range(0, ofs)
    ci.chunk_for_transformed_position(ci.transformed_file_size // 2)


HARNESSES = {
    "decode_native": h_decode_native,
    "decode_python": h_decode_python,
    "decode_diff": h_decode_diff,
    "request": h_request,
    "response": h_response,
    "manifest": h_manifest,
    "manifest_fields": h_manifest_fields,
    "custom_metadata": h_custom_metadata,
    "chunk_index": h_chunk_index,
}


def run_one(name: str, data: bytes) -> str | None:
    """Run harness ``name`` on ``data``: returns None when it kept the contract (returned or
    raised a KafkaTieredError), else re-raises the offending exception."""
    try:
        HARNESSES[name](data)
    except KafkaTieredError:
        return "refused"
    return None


# --------------------------------------------------------------------------------------------
# seeds: valid inputs for each harness


def _fixture_batches(limit: int = 40, max_size: int = 20_000):
    out = []
    for part in sorted(os.listdir(FIXTURES)):
        logs = sorted(f for f in os.listdir(os.path.join(FIXTURES, part)) if f.endswith(".log"))
        with open(os.path.join(FIXTURES, part, logs[0]), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data) and len(out) < limit:
            (length,) = struct.unpack_from(">i", data, pos + 8)
            batch = data[pos:pos + 12 + length]
            if len(batch) <= max_size:
                out.append(batch)
            pos += 12 + length
    return out


def _piece_batches():
    """lz4, snappy and zstd batches of ~300 KB of records: more than one of the pieces the native
    decoder parses at a time (native/fused.c), so records are cut by piece ends; lz4 in frames of
    independent and of linked 64 KiB blocks, snappy xerial-framed and as one raw block, zstd as a
    stream without a content size.  The values are runs: the batches stay small."""
    import cramjam
    import lz4.frame

    from benchmarks.decode import _varint, _xerial, _zstd_stream, make_batch

    records = []
    for i in range(100):
        body = (b"\x00" + _varint(i) + _varint(i) + _varint(1) + b"k" + _varint(3000)
                + bytes([97 + i % 26]) * 3000 + _varint(0))
        records.append(_varint(len(body)) + body)
    raw = b"".join(records)
    return [make_batch(raw, 100, "lz4", encode=lambda d, linked=linked: lz4.frame.compress(
        d, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=linked, store_size=False))
        for linked in (False, True)] + [
        make_batch(raw, 100, "snappy", encode=_xerial),
        make_batch(raw, 100, "snappy", encode=lambda d: bytes(cramjam.snappy.compress_raw(d))),
        make_batch(raw, 100, "zstd", encode=_zstd_stream)]


def seeds(name: str) -> list[bytes]:
    rng = random.Random(1248)
    if name.startswith("decode"):
        batches = _fixture_batches() + _piece_batches()
        out = [bytes([flags]) + b for b in batches for flags in (1, 9, 35)]
        out.append(bytes([1]) + b"".join(batches[:3]))
        return out
    if name == "request":
        from kafka_tiered_source.protocol import codec
        from kafka_tiered_source.protocol.messages import REQUESTS
        from kafka_tiered_source.protocol.random_values import random_message
        return [codec.encode_request(random_message(cls, v, rng), v, rng.randint(0, 1 << 20),
                                     "fuzz-client", framed=False)
                for _, cls in sorted(REQUESTS.items())
                for v in range(cls.VALID_VERSIONS.lo, cls.VALID_VERSIONS.hi + 1)]
    if name == "response":
        from kafka_tiered_source.protocol import codec
        from kafka_tiered_source.protocol.random_values import random_message
        out = []
        for i, (cls, v) in enumerate(_response_targets()):
            body = codec.encode_response(random_message(cls, v, rng), v, 7, framed=False)
            out.append(bytes([i >> 8, i & 0xFF]) + body)
        return out
    if name == "manifest":
        from kafka_tiered_source.storage import aiven
        out = []
        for compression in (False, True):
            for size in (0, 1, 1000, 4 * 1024 * 1024 + 3):
                ocs = 1024 * 1024
                if compression:
                    n = max(1, -(-size // ocs))
                    ci = aiven.ChunkIndex("variable", ocs, size, tuple(rng.randint(1, ocs) for _ in range(n)))
                else:
                    ci = aiven.ChunkIndex.fixed(ocs, size, ocs, size % ocs or ocs)
                idx = aiven_writer.build_indexes(b"o" * 40, b"t" * 24, b"p" * 7, b"l" * 12, b"x" * 9)
                manifest = aiven.SegmentManifest(ci, idx[1],
                                                 compression)
                out.append(manifest.to_json())
        return out
    if name == "manifest_fields":
        return [bytes([i]) for i in range(8)]     # the valid manifests, unchanged
    if name == "custom_metadata":
        from kafka_tiered_source.testing.aiven_writer import encode_custom_metadata
        return [encode_custom_metadata(remote_size=1234567), encode_custom_metadata(object_prefix="p/"),
                encode_custom_metadata(remote_size=-1, object_prefix="pre/", object_key="k/ë/x.log"),
                encode_custom_metadata(object_key="a" * 200)]
    if name == "chunk_index":
        from kafka_tiered_source.storage.aiven import _encode_chunk_sizes
        out = []
        for sizes in ([7], [5], [100, 200, 300], [70000, 1, 65536, 12], [1 << 24, 3, 9, 2**31 - 1]):
            ocs = 16
            ofs = max(1, len(sizes)) * ocs - 3
            out.append(struct.pack(">HI", ocs, ofs) + _encode_chunk_sizes(sizes))
        return out
    raise KeyError(name)


def mutate(data: bytes, rng: random.Random, others: list[bytes]) -> bytes:
    """A small structure-blind mutation (what the CI pass uses instead of libFuzzer)."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        if op == 0 and b:                      # flip bits
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:                    # interesting byte
            b[rng.randrange(len(b))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, 0xFE))
        elif op == 2 and len(b) > 1:           # truncate
            del b[rng.randrange(1, len(b)):]
        elif op == 3:                          # insert random bytes
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 4 and len(b) >= 4:          # interesting int32
            i = rng.randrange(len(b) - 3)
            b[i:i + 4] = struct.pack(">i", rng.choice((-1, 0, 1, 2**31 - 1, -2**31, 0x7FFF, 255)))
        elif op == 5 and b:                    # delete a span
            i = rng.randrange(len(b))
            del b[i:i + rng.randint(1, 16)]
        elif op == 6 and others:               # splice with another seed
            o = rng.choice(others)
            i, j = rng.randrange(len(b) + 1), rng.randrange(len(o) + 1)
            b = b[:i] + o[j:]
        elif op == 7 and b:                    # uvarint continuation bytes
            i = rng.randrange(len(b))
            b[i:i + 1] = b"\xff" * rng.randint(1, 11)
    return bytes(b)


# --------------------------------------------------------------------------------------------
# entry points


def _fuzz(name: str, argv: list[str]) -> None:
    import atheris

    import kafka_tiered_source
    print(f"fuzzing {name} with kafka_tiered_source from {os.path.dirname(kafka_tiered_source.__file__)}",
          file=sys.stderr, flush=True)
    corpus = [a for a in argv[1:] if not a.startswith("-")]
    if corpus:
        os.makedirs(corpus[0], exist_ok=True)
        if not os.listdir(corpus[0]):
            for i, s in enumerate(seeds(name)):
                with open(os.path.join(corpus[0], f"seed-{i}"), "wb") as f:
                    f.write(s)
    fn = HARNESSES[name]

    def one(data: bytes) -> None:
        try:
            fn(data)
        except KafkaTieredError:
            pass

    atheris.instrument_all()
    atheris.Setup(argv, one)
    atheris.Fuzz()


def _run_all(seconds: int, corpus_root: str, only: list[str]) -> int:
    """Fuzz each harness in its own process for ``seconds``; print executions per harness."""
    import re
    failed = 0
    for name in only or HARNESSES:
        corpus = os.path.join(corpus_root, name)
        artifacts = os.path.join(corpus_root, "artifacts", name) + os.sep
        os.makedirs(artifacts, exist_ok=True)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), f"--harness={name}",
                               f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=4096",
                               f"-artifact_prefix={artifacts}", "-print_final_stats=1", corpus],
                              capture_output=True, text=True)
        used = re.findall(r"fuzzing \S+ with kafka_tiered_source from (\S+)", proc.stderr)
        execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", proc.stderr)
        status = "ok" if proc.returncode == 0 else f"FAILED rc={proc.returncode}"
        failed += proc.returncode != 0
        print(f"{name:16s} {execs[-1] if execs else '?':>10s} execs  "
              f"{time.monotonic() - t0:6.1f} s  {status}  ({used[0] if used else '?'})", flush=True)
        if proc.returncode != 0:
            print("\n".join(proc.stderr.splitlines()[-30:]))
    return failed


def main(argv: list[str]) -> int:
    harness = next((a.split("=", 1)[1] for a in argv if a.startswith("--harness=")), None)
    if "--all" in argv or any(a.startswith("--only=") for a in argv):
        seconds = int(next((a.split("=", 1)[1] for a in argv if a.startswith("--seconds=")), "60"))
        root = next((a.split("=", 1)[1] for a in argv if a.startswith("--corpus-root=")), "/tmp/kt-corpus")
        only = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--only=")), [])
        return _run_all(seconds, root, only)
    if harness not in HARNESSES:
        print(f"--harness= one of {', '.join(HARNESSES)} (or --all)", file=sys.stderr)
        return 2
    _fuzz(harness, [a for a in argv if not a.startswith("--")])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
