"""One batcher over Kafka batches whose records change size from one Arrow batch to the next.
The native builder starts each Arrow batch's columns at the size the previous batch ended with
(``kt_reserve_window``), so a batch much bigger than the one before must still grow, and one
much smaller must not carry anything over: every row comes out as it was appended, with both
decoders."""
from __future__ import annotations

import random

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_tiered_source.records import Batcher, decode_batches

pytestmark = pytest.mark.decoder

# (records, value bytes) of each Kafka batch, in log order: small, then 300x bigger values,
# then empty and null ones, then mid-sized; the batcher cuts an Arrow batch every 64+ rows
SHAPES = [(100, 3), (70, 900), (100, 0), (30, None), (200, 40), (5, 20_000), (64, 1)]


def _log():
    rnd = random.Random(5)
    data, want, offset = bytearray(), [], 0
    for n, size in SHAPES:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 30)
        for i in range(n):
            key = rnd.randbytes(rnd.randint(0, 40)) if i % 3 else None
            value = None if size is None else rnd.randbytes(size)
            b.append(i, 1_700_000_000_000 + offset, key, value, [])
            want.append((offset, key, value))
            offset += 1
        batch = bytearray(b.build())
        batch[0:8] = (offset - n).to_bytes(8, "big")
        data += batch
    return bytes(data), want


def test_rows_survive_arrow_batches_that_grow_and_shrink():
    data, want = _log()
    batcher = Batcher(64)
    got = decode_batches(data, topic="t", partition=0, batcher=batcher).batches
    rest = batcher.finish("t", 0)
    got += [rest] if rest is not None else []
    rows = []
    for b in got:
        b.validate(full=True)
        rows += zip(b.column("offset").to_pylist(), b.column("key").to_pylist(),
                    b.column("value").to_pylist(), strict=True)
    assert rows == want
    sizes = [b.column("value").nbytes for b in got]
    assert max(sizes) > 50 * min(sizes)      # the data did make big and small batches
