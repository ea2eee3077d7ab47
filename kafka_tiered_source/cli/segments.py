"""``kafka-tiered segments``: the tiered segments a read would use, and who found them.

The read is planned as the Spark source plans it (with a broker: the locator that
``remote.segment.locator`` picks per partition, KIP-1248, ``__remote_log_metadata`` or a
listing of the store; offline: the listing), and every tiered segment it located is printed with
its offsets, max timestamp, size and id, then the offsets still served by the brokers.  The max
timestamp comes from where the locator found the segment (the metadata topic, an Aiven
manifest); where that says nothing (KIP-1248 answers, Kafka's LocalTieredStorage layout) the
last entry of the segment's time index is shown as a lower bound (one small GET per segment;
``--no-time-index`` skips them).  Storage is checked first, as ``estimate`` and the read check
it (``--no-check`` skips it; the output then says so).  ``__remote_log_metadata`` is read through
the same catalog as ``estimate`` and the read (from where its snapshot stands); ``--refresh``
reads it again from the start.
"""
from __future__ import annotations

import argparse
import json
import sys

from . import Formatter, command, examples
from .estimate import (add_read_arguments, add_refresh_argument, partition_filter, read_options, report_error,
                       storage_line)

EXAMPLES = examples(
    "kafka-tiered segments --bootstrap-servers b1:9092 --topic orders --remote-storage-uri s3://tiered/prod/"
    "   # every tiered segment, found as the Spark source finds them",
    "kafka-tiered segments --bootstrap-servers b1:9092 --topic orders --partition 3 "
    "--remote-storage-uri s3://tiered/prod/ -o remote.segment.locator=metadata-topic --json"
    "   # one partition through __remote_log_metadata, JSON lines",
    "kafka-tiered segments --topic orders --remote-storage-uri s3://tiered/prod/ -o remote.storage.layout=aiven"
    "   # without a broker: what the store holds",
)


@command("segments", "List the tiered segments of a read: offsets, timestamps, size, locator.")
def _segments_setup(p: argparse.ArgumentParser):
    p.formatter_class = Formatter
    p.epilog = EXAMPLES
    add_read_arguments(p)
    add_refresh_argument(p)
    p.add_argument("--no-time-index", dest="time_index", action="store_false",
                   help="do not read time indexes for segments whose max timestamp is unknown")
    p.add_argument("--json", action="store_true", help="one JSON object per segment or broker range")
    return _segments_run


def _segments_run(args) -> int:
    from ..errors import KafkaTieredError
    try:
        rows, check = segment_rows(args)
    except (KafkaTieredError, OSError) as exc:
        return report_error("segments", exc)
    if args.json:
        for row in rows:
            print(json.dumps({**row, "storage_check": check}))
    else:
        print_rows(rows, sys.stdout)
        print(f"storage: {storage_line(check)}")
    return 0


def segment_rows(args) -> tuple[list[dict], str]:
    """One dict per tiered segment the read locates and per broker range, in partition and
    offset order; and what the storage check found (``planning.estimate.CHECKED``, ...)."""
    from ..options import ReadOptions
    from ..planning.checked import plan_read
    from ..planning.estimate import estimate_checked
    from ..planning.tasks import BrokerRange, RemoteRange
    options = ReadOptions.parse(read_options(args))
    planned = plan_read(options, partition_filter(args), refresh=args.refresh)
    check = estimate_checked(planned, options, args.check).storage_check
    by_tp: dict = {}
    for r in (r for t in planned.tasks for r in t.ranges):
        by_tp.setdefault((r.topic, r.partition), []).append(r)
    fetcher = None
    rows = []
    try:
        for pr in sorted(planned.partitions, key=lambda pr: (pr.topic, pr.partition)):
            key = (pr.topic, pr.partition)
            locator = planned.locators.get(key, "broker")
            seen: set = set()
            broker: list[list[int]] = []
            for r in sorted(by_tp.get(key, ()), key=lambda r: r.offset_start):
                if isinstance(r, BrokerRange):
                    if broker and broker[-1][1] == r.offset_start:
                        broker[-1][1] = r.offset_end
                    else:
                        broker.append([r.offset_start, r.offset_end])
                    continue
                seg = r.segment
                if not isinstance(r, RemoteRange) or seg.segment_id in seen:
                    continue
                seen.add(seg.segment_id)
                row = {"topic": seg.topic, "partition": seg.partition, "tiered": True,
                       "base_offset": seg.base_offset, "end_offset": seg.end_offset,
                       "max_timestamp": seg.max_timestamp, "size_bytes": seg.size_bytes,
                       "segment_id": seg.segment_id, "located_by": locator}
                if seg.max_timestamp is None and args.time_index and options.storage.configured:
                    if fetcher is None:
                        from ..storage.registry import create_fetcher
                        fetcher = create_fetcher(options.storage)
                    row["max_timestamp_at_least"] = _last_indexed(fetcher, seg)
                rows.append(row)
            for start, end in broker:
                rows.append({"topic": pr.topic, "partition": pr.partition, "tiered": False,
                             "base_offset": start, "end_offset": end - 1, "located_by": "broker"})
    finally:
        if fetcher is not None:
            fetcher.close()
    return rows, check


def _last_indexed(fetcher, seg) -> int | None:
    from ..errors import KafkaTieredError
    from ..storage.indexes import parse_time_index
    try:
        entries = parse_time_index(fetcher.fetch_index(seg, "timestamp") or b"")
    except KafkaTieredError:
        return None
    return entries[-1][0] if entries else None


def print_rows(rows: list[dict], out) -> None:
    from ..planning.filters import format_micros
    table = [("partition", "base offset", "end offset", "max timestamp", "size", "segment id", "located by")]
    for r in rows:
        tp = f"{r['topic']}-{r['partition']}"
        if not r["tiered"]:
            table.append((tp, str(r["base_offset"]), str(r["end_offset"]), "-", "-",
                          "(not tiered: read through the brokers)", "broker"))
            continue
        ts = r["max_timestamp"]
        if ts is not None:
            shown = format_micros(ts * 1000)
        elif r.get("max_timestamp_at_least") is not None:
            shown = ">= " + format_micros(r["max_timestamp_at_least"] * 1000)
        else:
            shown = "?"
        size = f"{r['size_bytes']:,}" if r["size_bytes"] is not None else "?"
        table.append((tp, str(r["base_offset"]), str(r["end_offset"]), shown, size, r["segment_id"],
                      r["located_by"]))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        cells = [c.rjust(widths[i]) if i in (1, 2, 4) else c.ljust(widths[i]) for i, c in enumerate(row)]
        print("  ".join(cells).rstrip(), file=out)
    tiered = [r for r in rows if r["tiered"]]
    total = sum(r["size_bytes"] or 0 for r in tiered)
    print(f"{len(tiered)} tiered segments, {total:,} bytes", file=out)
