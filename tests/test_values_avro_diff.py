"""The native Avro decoder against the pure-Python one, on random schemas, random readers
derived from them (fields dropped, added with defaults, renamed, promoted; enum symbols
dropped), valid data written by fastavro and mutations of it (cut, bytes flipped, bytes
inserted): rows, bad entries and the first error (row, offset, reason) must be identical.
Where nothing is resolved away and no logical type is involved, the rows must also be what
fastavro reads.  And a CI-sized pass of benchmarks/fuzz_avro.py's harness on its seeds and
deterministic mutations of them (the long coverage-guided runs: docs/fuzzing.md).  Not marked
`decoder`: each test drives both decoders itself, whatever KAFKA_TIERED_NO_EXTENSIONS says.
"""
from __future__ import annotations

import json
import random

import pyarrow as pa

from benchmarks import fuzz_avro
from kafka_tiered_source.values.avro import AvroError, parse_schema, resolve
from test_values_avro import expected

def _mutants(rng, values):
    out = []
    for v in values:
        k = rng.randrange(4)
        if k == 0 and len(v) > 5:
            out.append(v[:rng.randrange(5, len(v))])
        elif k == 1 and len(v) > 5:
            b = bytearray(v)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(5, len(b))] = rng.randrange(256)
            out.append(bytes(b))
        elif k == 2:
            at = rng.randrange(5, len(v) + 1)
            out.append(v[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + v[at:])
        else:
            out.append(v)
    return out


def _has_logical(s):
    return "logicalType" in json.dumps(s)


def test_random_schemas_agree_and_match_fastavro():
    rng = random.Random(37)
    resolved = compared = 0
    for _ in range(150):
        w = fuzz_avro.random_schema(rng)
        r = fuzz_avro.derive_reader(rng, w) if rng.random() < 0.6 else w
        try:
            res = resolve(parse_schema(json.dumps(w)), parse_schema(json.dumps(r)))
        except AvroError:
            continue
        resolved += 1
        records = [fuzz_avro.random_value(rng, fuzz_avro.strip_logical(w)) for _ in range(4)]
        values = fuzz_avro.encode(w, records)
        fuzz_avro.compare(res, pa.array(values + _mutants(rng, values) + [None], pa.binary()))
        if r is w and not _has_logical(w):
            arr = pa.array(values, pa.binary())
            got = fuzz_avro.outcome(res, arr, "native", False)
            assert got[0] == "ok" and pa.array(got[2], type=res.reader.arrow_type).equals(expected(w, w, arr))
            compared += 1
    assert resolved > 100 and compared > 20, (resolved, compared)


def test_the_fuzz_harness_seeds_and_mutations():
    seeds = fuzz_avro.seeds()
    assert len(seeds) >= 3 * len(fuzz_avro.PAIRS)
    rng = random.Random("avro-ci")
    for s in seeds:
        fuzz_avro.TestOneInput(s)
    for _ in range(500):
        s = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(3)
            at = rng.randrange(2, len(s)) if len(s) > 2 else 0
            if op == 0:
                s[at] = rng.randrange(256)
            elif op == 1:
                del s[at:at + rng.randint(1, 8)]
            else:
                s[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        fuzz_avro.TestOneInput(bytes(s))
