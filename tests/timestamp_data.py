"""What the fixtures say about timestamps, read straight from their files (never from the code
under test): every record's (offset, timestamp) as Kafka's ListOffsets sees them, control
records included, and the first offset at or after a timestamp."""
from __future__ import annotations

import functools
import os
import struct

from broker_fixtures import fixture_expected, fixture_segments


def control_markers(topic: str, partition: int) -> list[tuple[int, int]]:
    """(offset, timestamp) of every control record of a fixture partition, from the batch
    headers of its .log files (a control batch holds one record; Kafka writes it with its base
    timestamp equal to its max timestamp, checked here)."""
    folder = fixture_segments(topic, partition)
    out = []
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".log")):
        data = open(os.path.join(folder, name), "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            attrs, = struct.unpack_from(">h", data, pos + 21)
            base_ts, max_ts = struct.unpack_from(">qq", data, pos + 27)
            if attrs & 0x20:
                assert base_ts == max_ts
                out.append((base, max_ts))
            pos += 12 + length
    return out


@functools.lru_cache(maxsize=None)
def fixture_records(topic: str, partition: int) -> tuple[tuple[int, int], ...]:
    """(offset, timestamp) of every record of a fixture partition, control records included."""
    rows = [(r["offset"], r["timestamp"]) for r in fixture_expected(topic, partition, False)]
    return tuple(sorted(rows + control_markers(topic, partition)))


def first_at_or_after(records, ts_ms: int, start: int = 0) -> int:
    """The first offset >= start whose record's timestamp is >= ts_ms (ListOffsets), or -1."""
    return next((o for o, t in records if o >= start and t >= ts_ms), -1)
