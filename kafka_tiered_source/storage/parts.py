"""How a segment is read: its object and chunking (:class:`ReadPlan`), and a byte range of it as
GETs (:class:`Part`): split into parts of ``fetch.remote.part.size.bytes`` (smaller leading ones
when asked: the prefetcher's ramp), whole chunks for chunked Aiven segments, and nearby ranges
coalesced into one GET.  Pure functions of the plan and the sizes: the fetcher does the I/O."""
from __future__ import annotations


from . import aiven
from ..dataclass import dataclass

# Bytes a transformed chunk may exceed its share of a part by (AES-GCM's IV and tag).
CHUNK_SLACK = 28


@dataclass(frozen=True)
class Part:
    """One GET: object bytes [obj_start, obj_end) giving original bytes from orig_start.
    ``chunks`` is set for compressed Aiven segments (the GET covers these whole chunks)."""
    obj_start: int
    obj_end: int | None
    orig_start: int
    orig_len: int | None
    chunks: tuple = ()


@dataclass(frozen=True)
class ReadPlan:
    """How to read one segment: its object, its original size (None: unknown) and chunking.
    Chunks are decrypted with ``cipher`` (encrypted Aiven segments), then zstd-decompressed
    when ``compression``."""
    key: str
    size: int | None
    chunk_index: aiven.ChunkIndex | None = None   # set only when chunks must be detransformed
    compression: bool = True
    cipher: object | None = None                  # an aiven_crypto.ChunkCipher


def coalesce(ranges, plan: ReadPlan, gap: int) -> list[tuple[int, int | None]]:
    """Merge ranges closer than ``gap`` bytes (chunk-aligned for chunked segments)."""
    spans = []
    for s, e in ranges:
        if plan.chunk_index is not None:
            ocs = plan.chunk_index.original_chunk_size
            s = s // ocs * ocs
            e = min(-(-e // ocs) * ocs, plan.size)
        spans.append((s, e))
    spans.sort(key=lambda r: (r[0], float("inf") if r[1] is None else r[1]))
    groups: list[list] = []
    for s, e in spans:
        if groups:
            gs, ge = groups[-1]
            if ge is None or s <= ge + gap:
                groups[-1][1] = None if (ge is None or e is None) else max(ge, e)
                continue
        groups.append([s, e])
    return [tuple(g) for g in groups]


def split(plan: ReadPlan, start: int, end: int | None, part_size: int, ramp: tuple = ()) -> list[Part]:
    """The GETs of ``[start, end)``: parts of ``ramp[0]``, ``ramp[1]``, ... bytes, then of
    ``part_size`` (for chunked segments, whole chunks up to that)."""
    sizes = [r for r in ramp if 0 < r < part_size]

    def limit(n: int) -> int:   # the size of part n
        return sizes[n] if n < len(sizes) else part_size

    ci = plan.chunk_index
    if ci is None:
        if end is None:
            return [Part(start, None, start, None)]
        if end <= start:
            return [Part(start, start, start, 0)]
        parts: list[Part] = []
        p = start
        while p < end:
            q = min(p + limit(len(parts)), end)
            parts.append(Part(p, q, p, q - p))
            p = q
        return parts
    chunks = ci.chunks_for_range(start, ci.original_file_size if end is None else end)
    parts = []
    run: list[aiven.Chunk] = []
    run_bytes = 0
    for ch in chunks:
        # an encrypted chunk is 28 bytes (IV, tag) longer than what it holds: two 4 MiB
        # chunks still make one 8 MiB part
        if run and run_bytes + ch.transformed_size > limit(len(parts)) + CHUNK_SLACK * (len(run) + 1):
            parts.append(_chunk_part(run))
            run, run_bytes = [], 0
        run.append(ch)
        run_bytes += ch.transformed_size
    if run:
        parts.append(_chunk_part(run))
    return parts or [Part(0, 0, start, 0)]


def _chunk_part(run) -> Part:
    first, last = run[0], run[-1]
    return Part(first.transformed_position, last.transformed_position + last.transformed_size,
                first.original_position,
                last.original_position + last.original_size - first.original_position, tuple(run))
