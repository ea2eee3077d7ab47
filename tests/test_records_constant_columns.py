"""The topic and partition columns, which repeat one value on every row: the native builder's
batches share one filled set of buffers per partition, sliced to each batch's rows
(``records/_native_backend.py``).  Every batch must still hold its own topic and partition on
every row, whatever the order of partitions and sizes of batches, with both decoders."""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_tiered_source.records import Batcher, decode_batches
from kafka_tiered_source.records import _native_backend

pytestmark = pytest.mark.decoder


def _batch(n: int, base: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(n):
        b.append(i, 1_700_000_000_000 + i, None, b"v%d" % i, [])
    out = bytearray(b.build())
    out[0:8] = base.to_bytes(8, "big")
    return bytes(out)


@pytest.mark.parametrize("cached_rows", [None, 300])
def test_every_batch_holds_its_own_topic_and_partition(monkeypatch, cached_rows):
    if cached_rows is not None:     # batches larger than what is kept: filled for themselves
        monkeypatch.setattr(_native_backend, "_CONSTANT_ROWS", cached_rows)
    # partitions read one after another and back again, batches of growing and shrinking sizes
    reads = [("orders", 0, 50), ("orders", 0, 400), ("orders", 1, 20), ("o", 3, 200), ("orders", 0, 10), ("payments-eu", 12, 700),
             ("o", 3, 1)]
    for topic, partition, n in reads:
        data = _batch(n, 5_000)
        batcher = Batcher(64)
        got = decode_batches(data, topic=topic, partition=partition, batcher=batcher).batches
        rest = batcher.finish(topic, partition)
        got += [rest] if rest is not None else []
        assert sum(b.num_rows for b in got) == n
        for b in got:
            b.validate(full=True)
            assert b.column("topic").to_pylist() == [topic] * b.num_rows, (topic, partition, n)
            assert b.column("partition").to_pylist() == [partition] * b.num_rows
