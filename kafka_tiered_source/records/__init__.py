"""v2 RecordBatch decoding into Arrow.

Two backends behind one interface: the native one (``kafka_tiered_source._native``, C, writes
records straight into Arrow buffers) and a pure-Python reference (``KAFKA_TIERED_NO_EXTENSIONS=1``)
that agrees with it row for row and error for error.

- :func:`decode` — bytes in, ``pyarrow.Table`` out (Spark's Kafka schema).
- :func:`decode_batches` — the executor-level API: decodes the complete batches at the start of
  a byte range and returns a :class:`DecodeResult` with ``consumed``/``leftover`` for
  stitching the next range, and takes a :class:`ReadCommittedFilter` carried across calls.
- :class:`Batcher` — one builder across :func:`decode_batches` calls, so a range decoded piece
  by piece comes out in Arrow batches of about :data:`BATCH_ROWS` rows.
- :func:`kafka_schema`, :func:`decoder_backend`.
- ``header``: the fixed batch header (``BatchHeader``, ``read_header``, ``iter_headers``).

An executor reading one partition range by range (byte ranges of segments, in log order)::

    filt = ReadCommittedFilter(aborted, last_stable_offset)     # or None: read_uncommitted
    carry = b""
    for start, chunk in ranges:                                 # consecutive [start, end)
        res = decode_batches(carry + chunk, topic=t, partition=p, start_offset=lo,
                             end_offset=hi, filter=filt, position=start - len(carry))
        yield from res.batches                                  # pyarrow.RecordBatch
        if res.done:                                            # reached hi or the LSO
            break
        carry = res.leftover                                    # a batch cut by the range end

``position`` makes error positions absolute within the segment.  Across segments, drop the
carry (a segment ends on a batch boundary) and keep the filter.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .decoder import (BATCH_ROWS, DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_DECOMPRESSED_BYTES, Batcher,
                          DecodeResult, decode, decode_batches, decoder_backend)
    from .header import BatchHeader, iter_headers, read_header
    from .schema import kafka_schema
    from .transactions import ReadCommittedFilter

__all__ = [
    "BATCH_ROWS", "BatchHeader", "Batcher", "DEFAULT_MAX_BATCH_BYTES", "DEFAULT_MAX_DECOMPRESSED_BYTES", "DecodeResult",
    "ReadCommittedFilter", "decode", "decode_batches", "decoder_backend", "iter_headers",
    "kafka_schema", "read_header",
]


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: ``records.header`` (planning walks batch headers)
    must not load Arrow, which the decoder and the schema need (PEP 562)."""
    if name in ("BatchHeader", "iter_headers", "read_header"):
        from . import header
        value = getattr(header, name)
    elif name == "kafka_schema":
        from . import schema
        value = schema.kafka_schema
    elif name == "ReadCommittedFilter":
        from . import transactions
        value = transactions.ReadCommittedFilter
    elif name in __all__:
        from . import decoder
        value = getattr(decoder, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
