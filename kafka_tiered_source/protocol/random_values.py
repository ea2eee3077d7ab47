"""Random, valid message values for a given version, driven by the declarations.

Used by the round-trip and cross-implementation tests, and handy for fuzzing a broker: every
field present in the version gets a random value of its type; nullable fields are sometimes
null; tagged fields are sometimes left at their default (so they are not written).
"""
from __future__ import annotations

import random

from .schema import Field

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}
_ALPHABET = "abcXYZ09_.-é€"


def _int(rng: random.Random, t: str) -> int:
    lo, hi = _INT_RANGES[t]
    pick = rng.random()
    if pick < 0.15:
        return rng.choice((lo, hi, 0, -1 if lo < 0 else 1))
    if pick < 0.6:
        return rng.randint(max(lo, -300), min(hi, 300))
    return rng.randint(lo, hi)


def _elem(rng: random.Random, f: Field, t: str, v: int, flex: bool, depth: int):
    if t in _INT_RANGES:
        return _int(rng, t)
    if t == "float64":
        return rng.choice((0.0, -1.5, 1e300, rng.random()))
    if t == "bool":
        return rng.random() < 0.5
    if t == "uuid":
        return bytes(16) if rng.random() < 0.2 else bytes(rng.getrandbits(8) for _ in range(16))
    if t == "string":
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))
    if t in ("bytes", "records"):
        n = rng.choice((0, 1, 5, 40, 200))
        return bytes(rng.getrandbits(8) for _ in range(n))
    return random_struct(f.struct_class, v, flex, rng, depth + 1)


def random_field_value(f: Field, v: int, flex: bool, rng: random.Random, depth: int = 0):
    if f.is_nullable(v) and rng.random() < 0.2:
        return None
    if f.is_array:
        n = rng.choice((0, 1, 2, 3)) if depth < 3 else rng.choice((0, 1))
        return [_elem(rng, f, f.elem_type, v, flex, depth) for _ in range(n)]
    return _elem(rng, f, f.type, v, flex, depth)


def random_struct(cls, v: int, flex: bool, rng: random.Random, depth: int = 0):
    kwargs = {}
    for f in cls.FIELDS:
        if not f.in_version(v):
            continue
        if f.is_tagged(v):
            if not flex or rng.random() < 0.4:
                continue
        kwargs[f.attr] = random_field_value(f, v, flex, rng, depth)
    return cls(**kwargs)


def random_message(cls, version: int, rng: random.Random | None = None):
    rng = rng or random.Random()
    return random_struct(cls, version, cls.is_flexible(version), rng)
