"""A ``file:///`` store's reads: ranges of a megabyte or more are mapped from the file, not
copied (``storage/fsspec_fetcher.py``); they must be the file's bytes exactly, at any start
(mappings start at a page boundary), to the end and past it, from-the-end positions included;
the mapping must go with the last view of it; and corrupt bytes read so must fail the decode's
CRC-32C check as a copy's would."""
from __future__ import annotations

import random

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_tiered_source.errors import CorruptRecordError
from kafka_tiered_source.records import decode_batches
from kafka_tiered_source.options.storage import FetcherConfig
from kafka_tiered_source.storage.fsspec_fetcher import MAP_MIN_BYTES, FsspecStore, _LocalFiles

MiB = 1 << 20


def _mapped(path) -> bool:
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(str(path)) for line in f)


@pytest.fixture
def big_file(tmp_path):
    data = random.Random(3).randbytes(3 * MiB + 4099)
    path = tmp_path / "object.log"
    path.write_bytes(data)
    return path, data


def test_ranges_are_the_files_bytes_mapped_or_copied(big_file):
    path, data = big_file
    fs, n = _LocalFiles(), len(data)
    cases = [(0, None), (1, n), (4097, 4097 + MiB), (MiB + 5, None), (n - MiB - 1, n + 500),
             (-(MiB + 3), None), (10, -(MiB + 7)), (100, 200), (n - 10, None), (n, n + MiB), (n + 5, None)]
    for start, end in cases:
        got = fs.cat_file(str(path), start, end)
        lo = start if start >= 0 else n + start
        hi = n if end is None else (min(end, n) if end >= 0 else n + end)
        want = data[lo:max(lo, hi)]
        assert bytes(got) == want, (start, end)
        # a megabyte or more is a view of the mapped file; less is a copy
        assert isinstance(got, memoryview) == (len(want) >= MAP_MIN_BYTES), (start, end, type(got))
        if isinstance(got, memoryview):
            assert got.readonly


def test_the_mapping_goes_with_its_last_view(big_file):
    path, data = big_file
    view = _LocalFiles().cat_file(str(path), 7, None)
    part = view[MiB:2 * MiB]                 # what a reader slices of it keeps it mapped
    del view
    assert _mapped(path)
    assert bytes(part[:3]) == data[MiB + 7:MiB + 10]
    del part
    assert not _mapped(path)


@pytest.mark.decoder
def test_a_corrupt_byte_in_a_mapped_range_fails_the_crc(tmp_path):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    rnd = random.Random(5)
    for i in range(12_000):
        b.append(i, 1_700_000_000_000 + i, None, rnd.randbytes(100), [])
    batch = bytearray(b.build())
    assert len(batch) >= MAP_MIN_BYTES
    (tmp_path / "t-0").mkdir()
    good = tmp_path / "t-0" / "good.log"
    good.write_bytes(batch)
    batch[len(batch) // 2] ^= 0x40            # one bit of one value
    (tmp_path / "t-0" / "bad.log").write_bytes(batch)
    store = FsspecStore(FetcherConfig.from_options({"remote.storage.fetcher": "fsspec",
                                                  "remote.storage.fsspec.url": f"file://{tmp_path}"}))
    view = store.get_range("t-0/good.log", 0, None)
    assert isinstance(view, memoryview)
    assert decode_batches(view).records == 12_000
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batches(store.get_range("t-0/bad.log", 0, None))
