"""``kafka-tiered export``: a topic (or a time window of it) to Parquet, without Spark.

The read is :func:`kafka_tiered_source.scan` (the same planner, storage check, budget check and
task reader as the Spark source; ``--workers`` tasks at a time).  The files are laid out as
Spark's ``partitionBy("topic", "partition")`` lays them out, so Spark, DuckDB, Polars and
pyarrow read them back as one table::

    DIR/topic=orders/partition=0/part-00000000000000000000.parquet   (named by its first offset)

``topic`` and ``partition`` live in the directory names, the other columns in the files.  Row
groups are cut by size (``--row-group-mib`` of Arrow data, 128 by default: large enough for
readers to skip by statistics, small enough to buffer), files by ``--file-mib``.  At most
:data:`BUFFER_FACTOR` row groups' worth is held at once over all partitions: past it, the
partition holding most is written out as a smaller row group.  A file is written under a
temporary name and renamed when complete, so no reader sees half a file; ``_SUCCESS`` is written
last, as Spark does.

A progress line (records, decoded bytes, share of the planned offsets, ETA) goes to stderr when
it is a terminal; the summary and the read's cost (``last_read_stats()`` through
:func:`~kafka_tiered_source.cost_report`) go to stdout at the end.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, TextIO

from . import Formatter, command, examples
from .estimate import add_read_arguments, add_window_arguments, read_options, report_error, window_options

EXAMPLES = examples(
    "kafka-tiered export --bootstrap-servers b1:9092 --topic orders --remote-storage-uri s3://tiered/prod/ "
    "--to /data/orders   # the whole topic",
    "kafka-tiered export --bootstrap-servers b1:9092 --topic orders --since 2026-10-01 --until 2026-10-02 "
    "--remote-storage-uri s3://tiered/prod/ --to /data/orders-1001 --workers 4   # one day",
    "kafka-tiered export --topic orders --remote-storage-uri s3://tiered/prod/ -o remote.storage.layout=aiven "
    "--to /data/orders --where 'partition IN (0, 1)'   # no broker: the tiered part, two partitions",
)

MIB = 1 << 20
BUFFER_FACTOR = 4            # row groups' worth of Arrow data held over all partitions at most
SUCCESS = "_SUCCESS"
PARTITION_COLUMNS = ("topic", "partition")


@command("export", "Read a topic (or a window of it) without Spark and write it to Parquet.")
def _export_setup(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    p.formatter_class = Formatter
    p.epilog = EXAMPLES
    add_read_arguments(p, check=False)
    add_window_arguments(p)
    out = p.add_argument_group("output")
    out.add_argument("--to", required=True, metavar="DIR", help="directory to write (new, or empty)")
    out.add_argument("--format", default="parquet", choices=["parquet"], help="file format (parquet)")
    out.add_argument("--compression", default="zstd", choices=["zstd", "snappy", "gzip", "lz4", "none"],
                     help="Parquet compression (default zstd)")
    out.add_argument("--row-group-mib", type=int, default=128, metavar="MIB",
                     help="row groups of about this much Arrow data (default 128)")
    out.add_argument("--file-mib", type=int, default=1024, metavar="MIB",
                     help="start a new file after about this much Parquet (default 1024)")
    out.add_argument("--overwrite", action="store_true",
                     help="replace DIR when it holds an earlier export (topic=*/ directories and _SUCCESS only)")
    out.add_argument("--no-headers", dest="headers", action="store_false",
                     help="leave out the headers column (includeHeaders=false)")
    run = p.add_argument_group("reading")
    run.add_argument("--workers", type=int, metavar="N", help="tasks read at once (scan.workers; default: cores)")
    run.add_argument("--no-progress", dest="progress", action="store_false",
                     help="no progress line (it is shown only on a terminal anyway)")
    return _export_run


def _export_run(args: argparse.Namespace) -> int:
    from ..errors import KafkaTieredError
    try:
        return export(args, sys.stdout, sys.stderr)
    except (KafkaTieredError, OSError) as exc:
        return report_error("export", exc)


def export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Plan, read and write; the summary to ``out``, progress to ``err`` (a terminal)."""
    import kafka_tiered_source as kts

    from ..errors import ConfigError
    from ..scanner import open_scan
    if args.row_group_mib < 1 or args.file_mib < 1:
        raise ConfigError("--row-group-mib and --file-mib must be at least 1", option="--row-group-mib")
    opts = read_options(args)
    opts.setdefault("includeHeaders", "true" if args.headers else "false")
    if args.workers is not None:
        opts["scan.workers"] = str(args.workers)
    opts, row_filter = window_options(args, opts)
    target = os.path.abspath(args.to)
    _prepare(target, args.overwrite)
    planned = open_scan(opts, where=row_filter)
    progress = Progress(planned, err if args.progress and err.isatty() else None)
    writer = DatasetWriter(target, args.row_group_mib * MIB, args.file_mib * MIB,
                           None if args.compression == "none" else args.compression)
    t0 = time.perf_counter()
    reader = planned.reader()
    try:
        for batch in reader:
            writer.write(batch)
            progress.update(batch)
        writer.close()
    except BaseException:
        reader.close()
        writer.abort()
        progress.clear()
        raise
    progress.clear()
    stats = kts.last_read_stats()
    wall = time.perf_counter() - t0
    print(f"exported {progress.records:,} records of {len(writer.partitions)} topic-partitions to {target}: "
          f"{writer.files} Parquet files, {writer.bytes_written / 1e6:,.1f} MB "
          f"({args.compression}), in {wall:.1f} s", file=out)
    if stats is not None:
        total = stats.total()
        report = kts.cost_report(stats)
        print(f"the read cost: ${report.dollars:.6f} for {total.remote_requests:,} GETs and "
              f"{total.remote_bytes / 1e6:,.1f} MB from storage, {total.broker_bytes / 1e6:,.1f} MB through the "
              f"brokers, {total.fallbacks} fallbacks", file=out)
        line = stats.fallback_line()
        if line:
            print(line, file=out)
    return 0


def _prepare(target: str, overwrite: bool) -> None:
    """``target`` exists and is empty when this returns; an earlier export is removed only with
    ``overwrite``, and nothing that does not look like one."""
    from ..errors import ConfigError
    if os.path.exists(target) and not os.path.isdir(target):
        raise ConfigError(f"--to {target}: not a directory", option="--to")
    entries = sorted(os.listdir(target)) if os.path.isdir(target) else []
    if entries:
        if not overwrite:
            raise ConfigError(f"--to {target} is not empty (give --overwrite to replace an earlier export)",
                              option="--to")
        foreign = [e for e in entries if not (e == SUCCESS or e.startswith("topic="))]
        if foreign:
            raise ConfigError(f"--to {target} holds {foreign[0]!r}, which no export wrote; not overwriting it",
                              option="--to")
        for e in entries:
            path = os.path.join(target, e)
            if os.path.isdir(path):
                import shutil
                shutil.rmtree(path)
            else:
                os.remove(path)
    os.makedirs(target, exist_ok=True)


class _PartitionFiles:
    """One topic-partition's directory: its open file and the batches of its next row group."""

    def __init__(self, directory: str):
        self.directory = directory
        self.batches: list = []
        self.buffered = 0
        self.writer: Any = None
        self.tmp = self.final = ""
        self.file_bytes = 0


class DatasetWriter:
    """Hive-partitioned Parquet (``topic=T/partition=P/part-<first offset>.parquet``), row
    groups of about ``row_group_bytes`` of Arrow data, files of about ``file_bytes``."""

    def __init__(self, root: str, row_group_bytes: int, file_bytes: int, compression: str | None):
        self.root = root
        self.row_group_bytes = row_group_bytes
        self.file_limit = file_bytes
        self.compression = compression
        self.partitions: dict = {}
        self.files = 0
        self.bytes_written = 0
        self._buffered = 0

    def write(self, batch: Any) -> None:
        if not batch.num_rows:
            return
        topic, partition = batch.column("topic")[0].as_py(), batch.column("partition")[0].as_py()
        key = (topic, partition)
        part = self.partitions.get(key)
        if part is None:
            part = self.partitions[key] = _PartitionFiles(
                os.path.join(self.root, f"topic={topic}", f"partition={partition}"))
        data = batch.drop_columns(list(PARTITION_COLUMNS))
        part.batches.append(data)
        part.buffered += data.nbytes
        self._buffered += data.nbytes
        if part.buffered >= self.row_group_bytes:
            self._flush(part)
        while self._buffered > BUFFER_FACTOR * self.row_group_bytes:
            self._flush(max(self.partitions.values(), key=lambda p: p.buffered))

    def _flush(self, part: _PartitionFiles) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        if not part.batches:
            return
        table = pa.Table.from_batches(part.batches)
        if part.writer is None:
            os.makedirs(part.directory, exist_ok=True)
            first = table.column("offset")[0].as_py()
            part.final = os.path.join(part.directory, f"part-{first:020d}.parquet")
            part.tmp = part.final + ".tmp"
            part.writer = pq.ParquetWriter(part.tmp, table.schema, compression=self.compression or "none")
            part.file_bytes = 0
        part.writer.write_table(table, row_group_size=table.num_rows)   # one row group
        self._buffered -= part.buffered
        part.batches, part.buffered = [], 0
        if os.path.getsize(part.tmp) >= self.file_limit:
            self._finish_file(part)

    def _finish_file(self, part: _PartitionFiles) -> None:
        if part.writer is None:
            return
        part.writer.close()
        part.writer = None
        self.bytes_written += os.path.getsize(part.tmp)
        os.replace(part.tmp, part.final)
        self.files += 1

    def close(self) -> None:
        for part in self.partitions.values():
            self._flush(part)
            self._finish_file(part)
        with open(os.path.join(self.root, SUCCESS), "w"):
            pass

    def abort(self) -> None:
        """Drop the files being written (complete ones stay; there is no ``_SUCCESS``)."""
        for part in self.partitions.values():
            if part.writer is not None:
                try:
                    part.writer.close()
                finally:
                    part.writer = None
                    if os.path.exists(part.tmp):
                        os.remove(part.tmp)


class Progress:
    """``records, MB decoded, % of offsets, rate, ETA`` on one line of a terminal, at most a few
    times a second; nothing when ``out`` is None (not a terminal)."""

    def __init__(self, planned: Any, out: TextIO | None):
        self.out = out
        self.ranges = planned.offsets                  # (topic, partition) -> [start, end)
        self.total = max(1, planned.planned_offsets)
        self.reached: dict = {}
        self.records = 0
        self.nbytes = 0
        self.started = time.monotonic()
        self._shown = 0.0
        self._width = 0

    def update(self, batch: Any) -> None:
        self.records += batch.num_rows
        self.nbytes += batch.nbytes
        if batch.num_rows:
            key = (batch.column("topic")[0].as_py(), batch.column("partition")[0].as_py())
            self.reached[key] = batch.column("offset")[-1].as_py() + 1
        now = time.monotonic()
        if self.out is not None and now - self._shown >= 0.2:
            self._shown = now
            self._show(now)

    def fraction(self) -> float:
        done = sum(max(0, reached - self.ranges[key][0]) for key, reached in self.reached.items()
                   if key in self.ranges)
        return min(1.0, done / self.total)

    def _show(self, now: float) -> None:
        f = self.fraction()
        elapsed = now - self.started
        eta = elapsed * (1 - f) / f if f > 0 else None
        bar = "#" * int(f * 20)
        text = (f"[{bar:<20}] {f:4.0%}  {self.records:,} records, {self.nbytes / 1e6:,.0f} MB, "
                f"{self.records / max(elapsed, 1e-9):,.0f} rec/s, ETA "
                + (f"{int(eta) // 60}:{int(eta) % 60:02d}" if eta is not None else "?"))
        assert self.out is not None
        self.out.write("\r" + text.ljust(self._width))
        self.out.flush()
        self._width = len(text)

    def clear(self) -> None:
        if self.out is not None and self._width:
            self.out.write("\r" + " " * self._width + "\r")
            self.out.flush()
            self._width = 0
