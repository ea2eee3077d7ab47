"""CI-sized pass of the fuzz harnesses in ``benchmarks/fuzz_all.py`` plus a replay of every
input saved under ``tests/regressions/<harness>/``.

The contract (see the harness module): on any bytes, only KafkaTieredError subclasses may
escape.  Here each harness runs on its valid seeds and on a fixed number of deterministic
mutations of them (seeded RNG, so a failure reproduces); the long coverage-guided runs are
``python benchmarks/fuzz_all.py`` (docs/fuzzing.md).
"""
from __future__ import annotations

import os
import random
import socket
import struct

import pytest

from benchmarks import fuzz_all
from kafka_tiered_source.protocol import codec
from kafka_tiered_source.protocol.messages import REQUESTS, RESPONSES, ApiVersionsRequest, ApiVersionsResponse
from kafka_tiered_source.protocol.random_values import random_message


REGRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions")
RUNS = {"decode_native": 4000, "decode_python": 2500, "decode_diff": 1500, "request": 8000,
        "response": 8000, "manifest": 6000, "manifest_fields": 3000, "custom_metadata": 6000,
        "chunk_index": 5000}


def _regression_inputs():
    out = []
    for name in sorted(os.listdir(REGRESSIONS)):
        d = os.path.join(REGRESSIONS, name)
        if os.path.isdir(d):
            out += [(name, os.path.join(d, f)) for f in sorted(os.listdir(d))]
    return out


@pytest.mark.decoder
def test_every_harness_has_a_ci_budget():
    assert sorted(RUNS) == sorted(fuzz_all.HARNESSES)


@pytest.mark.decoder
@pytest.mark.parametrize("name", sorted(fuzz_all.HARNESSES))
def test_seeds_are_valid_inputs(name):
    """The seeds are accepted (not refused): otherwise mutations of them explore nothing."""
    seeds = fuzz_all.seeds(name)
    assert len(seeds) >= 4
    refused = [i for i, s in enumerate(seeds) if fuzz_all.run_one(name, s) == "refused"]
    assert not refused, f"{name}: seeds {refused} are refused"


@pytest.mark.decoder
@pytest.mark.parametrize("name", sorted(fuzz_all.HARNESSES))
def test_mutated_inputs_raise_only_project_errors(name):
    seeds = fuzz_all.seeds(name)
    rng = random.Random(f"ci-{name}")
    refused = 0
    for i in range(RUNS[name]):
        data = fuzz_all.mutate(rng.choice(seeds), rng, seeds)
        try:
            refused += fuzz_all.run_one(name, data) == "refused"
        except Exception as exc:   # noqa: BLE001 - the contract violation is the finding
            raise AssertionError(f"{name}: mutation {i} ({data[:64].hex()}...) raised "
                                 f"{type(exc).__name__}: {exc}") from exc
    # the mutations do reach the error paths (a harness that refuses nothing tests nothing)
    if name != "decode_diff":
        assert refused > RUNS[name] // 20, f"{name}: only {refused} refusals"


@pytest.mark.decoder
def test_regression_inputs_exist():
    assert _regression_inputs(), "tests/regressions/ holds no inputs"


@pytest.mark.decoder
@pytest.mark.parametrize("name, path", _regression_inputs(),
                         ids=[f"{n}/{os.path.basename(p)}" for n, p in _regression_inputs()])
def test_regression_input_keeps_the_contract(name, path):
    with open(path, "rb") as f:
        data = f.read()
    fuzz_all.run_one(name, data)     # raises on anything but a KafkaTieredError


# --------------------------------------------------------------------------------------------
# the broker's handler path: fuzzed frames at a running EmbeddedCluster


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _api_versions_ok(port) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(codec.encode_request(ApiVersionsRequest(), 0, 4242, "probe"))
        head = _recv_exact(s, 4)
        body = _recv_exact(s, struct.unpack(">i", head)[0])
    corr, resp = codec.decode_response(body, ApiVersionsResponse, 0)
    return corr == 4242 and resp.error_code == 0 and len(resp.api_keys) > 5


def _closes_after(request, answer) -> bool:
    """Whether the broker closes the connection after this answer: a refused SaslAuthenticate,
    or a SaslHandshake naming a mechanism it does not offer.  It closes as Kafka does, after its
    failed-authentication delay (1 s), reading and dropping whatever the client sends meanwhile:
    a client hangs up there, and so does this test (frames sent into that second reach no
    handler, so they would test nothing)."""
    if len(request) < 4:
        return False
    key, version = struct.unpack(">hh", bytes(request[:4]))
    if key not in (17, 36):
        return False
    try:
        _, resp = codec.decode_response(answer, RESPONSES[key], version)
    except Exception:   # noqa: BLE001 - e.g. an UNSUPPORTED_VERSION answer in another shape
        return False
    return resp.error_code != 0 if key == 36 else resp.error_code == 33   # UNSUPPORTED_SASL_MECHANISM


def test_broker_keeps_serving_fuzzed_frames(cluster_factory, caplog):
    """Mutated requests of every API and version, each correctly framed, sent to a live broker:
    it answers or closes the connection, never dies, still answers ApiVersions, and no request
    ends in an unhandled exception."""
    c = cluster_factory()
    c.create_topic("fuzz", partitions=2)
    rng = random.Random("broker-frames")
    seeds = [codec.encode_request(random_message(cls, v, rng), v, rng.randint(0, 1 << 20), "fuzz",
                                  framed=False)
             for key, cls in sorted(REQUESTS.items())
             for v in range(cls.VALID_VERSIONS.lo, cls.VALID_VERSIONS.hi + 1)]
    answered = closed = 0
    sock = None
    with caplog.at_level("WARNING", logger="kafka_tiered_source"):
        for i in range(400):
            data = fuzz_all.mutate(rng.choice(seeds), rng, seeds) if i % 4 else rng.choice(seeds)
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", c.port), timeout=10)
            try:
                sock.sendall(codec.frame(data))
                sock.settimeout(0.5 if data[:2] == b"\x00\x00" else 10)   # Produce may be acks=0
                head = _recv_exact(sock, 4)
                answer = None if head is None else _recv_exact(sock, struct.unpack(">i", head)[0])
                if answer is None:
                    raise ConnectionError
                answered += 1
                if _closes_after(data, answer):
                    sock.close()      # as a client does; the broker would close in 1 s anyway
                    sock = None
            except socket.timeout:
                sock.close()
                sock = None
            except (ConnectionError, OSError):
                closed += 1
                sock.close()
                sock = None
        if sock is not None:
            sock.close()
        assert _api_versions_ok(c.port)
    assert answered > 50 and closed > 10, (answered, closed)
    # neither a connection nor a request handler ended in an unhandled exception (the server
    # logs those at ERROR and answers UNKNOWN_SERVER_ERROR / closes)
    crashed = [r.getMessage() for r in caplog.records if r.levelno >= 40]
    assert not crashed, crashed[:3]
