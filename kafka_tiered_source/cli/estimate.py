"""``kafka-tiered estimate``: what a read will cost, without Spark.

Plans the read exactly as ``spark.read.format("kafka-tiered")`` would (the same planner, with a
broker or offline) and prints, per partition, the offsets read, the tiered segments, GETs and
bytes from storage and the bytes left to the brokers, then the totals and dollars
(:func:`kafka_tiered_source.planning.estimate.estimate_plan`).  Planning reads no record data.

The read arguments (``--bootstrap-servers``, ``--topic``, ``--remote-storage-uri``, ``-o``,
``--command-config``) are shared with ``kafka-tiered segments``.  Secrets stay off the command
line: S3, GCS and Azure credentials come from the usual environment of each SDK; Kafka's
security settings (TLS stores, SASL, OAUTHBEARER) from ``--command-config client.properties``
as Kafka's own tools take them; ``-o`` takes any other source option, and ``-o @file.json`` a
JSON object of them.

Storage is checked as the read checks it before its first task (one cheap request with the
read's options: :mod:`kafka_tiered_source.planning.preflight`), so a misspelt prefix, a wrong
layout or a bucket that does not exist is an error here too, not a confident plan.
``--no-check`` plans without asking storage, on purpose, and the output says so.
"""
from __future__ import annotations

import argparse
import json
import sys

from . import Formatter, command, examples

EXAMPLES = examples(
    "kafka-tiered estimate --bootstrap-servers b1:9092 --topic orders --remote-storage-uri s3://tiered/prod/"
    "   # the whole topic, segments in S3",
    "kafka-tiered estimate --bootstrap-servers b1:9092 --topic orders --since 2026-10-01 --until 2026-10-02 "
    "--where 'partition IN (0, 1)' --remote-storage-uri s3://tiered/prod/ --json   # one day of two partitions",
    "kafka-tiered estimate --topic orders --since '2026-10-01 06:00' --time-zone Europe/Paris "
    "--remote-storage-uri s3://tiered/prod/ -o remote.storage.layout=aiven   # no broker: the store listed",
    "kafka-tiered estimate --bootstrap-servers b1:9092 --pattern 'orders-.*' --remote-storage-uri gs://tiered "
    "-o cost.preset=gcs-standard   # GCS prices, any other source option with -o",
    "kafka-tiered estimate --bootstrap-servers b1:9092 --topic orders --remote-storage-uri s3://tiered/prod/ "
    "--no-check   # plan without asking storage (no credentials here); the output says so",
    "kafka-tiered estimate --bootstrap-servers b1:9092 --topic orders --remote-storage-uri s3://tiered/prod/ "
    "--refresh   # read __remote_log_metadata from its start again (the catalog's snapshot rewritten)",
)


def add_read_arguments(p: argparse.ArgumentParser, check: bool = True) -> None:
    """The arguments that say what to read: the same for ``estimate``, ``segments`` and
    ``export`` (``check``: with ``--no-check``; a command that reads always checks)."""
    what = p.add_argument_group("what to read")
    what.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                      help="Kafka brokers; without them the store is listed (offline)")
    what.add_argument("--topic", action="append", default=[], metavar="NAME[,NAME...]",
                      help="topic(s) to read (repeatable): the source's 'subscribe'")
    what.add_argument("--pattern", metavar="REGEX", help="the source's 'subscribePattern' instead of --topic")
    what.add_argument("--partition", action="append", default=[], metavar="N[,N...]",
                      help="only these partitions (as a pushed-down 'partition IN (...)')")
    what.add_argument("--remote-storage-uri", metavar="URI",
                      help="where the segments are: s3://bucket/prefix, gs://bucket/prefix, az://container/prefix, file:///dir")
    what.add_argument("--layout", choices=["aiven", "kafka-local-tiered", "template"],
                      help="the store's object layout (the source's remote.storage.layout)")
    what.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"])
    what.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                      help="any other source option (repeatable), or @file.json with several")
    what.add_argument("--command-config", metavar="FILE",
                      help="Kafka client properties (.properties, as Kafka's tools take them: "
                           "security.protocol, ssl.*, sasl.*), each as the option kafka.<key>")
    if check:
        what.add_argument("--no-check", dest="check", action="store_false",
                          help="do not check storage (one request with the read's options, as the read makes "
                               "before its first task): plan offline on purpose; the output says it was not checked")


def add_refresh_argument(p: argparse.ArgumentParser) -> None:
    """``--refresh``: for the commands that plan (``estimate``, ``segments``)."""
    p.add_argument("--refresh", action="store_true",
                   help="read __remote_log_metadata again from the start of the partitions the read needs, "
                        "instead of from where the catalog left it (this process's, or the snapshot under "
                        "remote.log.metadata.cache.dir), and write the snapshot anew")


def read_options(args) -> dict:
    """The source options the read arguments stand for."""
    from ..errors import ConfigError
    opts: dict = {}
    for item in args.option:
        if item.startswith("@"):
            with open(item[1:]) as f:
                more = json.load(f)
            if not isinstance(more, dict):
                raise ConfigError(f"{item[1:]}: expected a JSON object of options", option="--option")
            opts.update({str(k): str(v) for k, v in more.items()})
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-o {item!r}: expected KEY=VALUE", option="--option")
        opts[key.strip()] = value
    if getattr(args, "command_config", None):
        from .properties import read_properties
        given = {k.lower() for k in opts}
        for key, value in read_properties(args.command_config, "--command-config").items():
            if f"kafka.{key}".lower() not in given:      # -o wins over the file
                opts[f"kafka.{key}"] = value
    if args.bootstrap_servers:
        opts["kafka.bootstrap.servers"] = args.bootstrap_servers
    topics = [t.strip() for arg in args.topic for t in arg.split(",") if t.strip()]
    if args.pattern and topics:
        raise ConfigError("give --topic or --pattern, not both", option="--pattern")
    if args.pattern:
        opts["subscribePattern"] = args.pattern
    elif topics:
        opts["subscribe"] = ",".join(topics)
    elif not any(k.lower() in ("subscribe", "subscribepattern", "assign") for k in opts):
        raise ConfigError("name what to read: --topic, --pattern or -o assign=...", option="--topic")
    if args.remote_storage_uri:
        opts["remote.storage.uri"] = args.remote_storage_uri
    if args.layout:
        opts["remote.storage.layout"] = args.layout
    if args.isolation_level:
        opts["kafka.isolation.level"] = args.isolation_level
    return opts


def partition_filter(args):
    """``--partition`` as the pushed-down filter ``partition IN (...)`` (None: every partition)."""
    from ..errors import ConfigError
    from ..planning.filters import Predicate, RowFilter
    parts = []
    for arg in args.partition:
        for item in arg.split(","):
            if item.strip():
                if not item.strip().isdigit():
                    raise ConfigError(f"--partition {item!r} is not a partition number", option="--partition")
                parts.append(int(item))
    return RowFilter((Predicate("partition", "in", tuple(sorted(set(parts)))),)) if parts else None


def time_ms(value: str, zone: str, option: str) -> int:
    """A time argument: epoch milliseconds (digits only) or ISO 8601 (zone-less: in ``zone``)."""
    from ..planning.filters import micros
    from ..planning.where import parse_time
    from ..errors import ConfigError
    if value.strip().lstrip("-").isdigit():
        return int(value)
    try:
        return -(-micros(parse_time(value, zone)) // 1000)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc}", option=option) from None


def add_window_arguments(p: argparse.ArgumentParser) -> None:
    """``--since``, ``--until``, ``--time-zone``, ``--where``: for ``estimate`` and ``export``."""
    window = p.add_argument_group("time window and filters")
    window.add_argument("--since", metavar="TIME",
                        help="start at the first record at or after TIME (startingTimestamp): "
                             "ISO 8601 ('2026-10-01', '2026-10-01T06:00:00Z') or epoch ms")
    window.add_argument("--until", metavar="TIME",
                        help="stop before the first record at or after TIME (endingTimestamp)")
    window.add_argument("--time-zone", default="UTC",
                        help="zone of times given without one (default UTC), e.g. Europe/Paris")
    window.add_argument("--where", metavar="CONDITION",
                        help="filters the read pushes down, e.g. \"partition = 1 AND offset >= 5000\"")


def window_options(args, opts: dict):
    """``(options, row filter)``: ``opts`` with the window's timestamp options, and the
    ``--where`` and ``--partition`` filters (None for none)."""
    from ..planning.filters import RowFilter
    opts = dict(opts)
    if args.since:
        opts["startingTimestamp"] = str(time_ms(args.since, args.time_zone, "--since"))
        # a window after the last record is an empty read, not an error
        if not any(k.lower() == "startingoffsetsbytimestampstrategy" for k in opts):
            opts["startingOffsetsByTimestampStrategy"] = "latest"
    if args.until:
        opts["endingTimestamp"] = str(time_ms(args.until, args.time_zone, "--until"))
    row_filter = RowFilter()
    if args.where is not None:     # the SQL parser (and datetime) only for a --where
        from ..planning.where import parse_where
        row_filter = parse_where(args.where, time_zone=args.time_zone)
    parts = partition_filter(args)
    if parts is not None:
        row_filter = row_filter.and_(parts)
    return opts, row_filter or None


@command("estimate", "Plan a read without Spark and print its GETs, bytes and dollars.")
def _estimate_setup(p: argparse.ArgumentParser):
    p.formatter_class = Formatter
    p.epilog = EXAMPLES
    add_read_arguments(p)
    add_window_arguments(p)
    add_refresh_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return _estimate_run


def report_error(command: str, exc: Exception) -> int:
    """Print a command's error (with the way round a failed storage check); exit code 2."""
    from ..errors import StoragePreflightError
    print(f"kafka-tiered {command}: error: {exc}", file=sys.stderr)
    if isinstance(exc, StoragePreflightError):
        print(f"kafka-tiered {command}: --no-check plans without checking storage", file=sys.stderr)
    return 2


def _estimate_run(args) -> int:
    from ..errors import KafkaTieredError
    try:
        report = estimate_report(args)
    except (KafkaTieredError, OSError) as exc:
        return report_error("estimate", exc)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report, sys.stdout)
    return 0


def estimate_report(args) -> dict:
    """Plan the read the arguments describe and count it: a JSON-able dict."""
    from ..options import ReadOptions
    from ..planning.checked import plan_read
    from ..planning.estimate import estimate_checked
    opts, row_filter = window_options(args, read_options(args))
    window = {}
    if args.since:
        window["since_ms"] = int(opts["startingTimestamp"])
    if args.until:
        window["until_ms"] = int(opts["endingTimestamp"])
    options = ReadOptions.parse(opts)
    planned = plan_read(options, row_filter, refresh=args.refresh)
    est = estimate_checked(planned, options, args.check)
    out = est.as_dict()
    out["where"] = str(row_filter) if row_filter else None
    out["window"] = window or None
    out["read"] = describe_read(options)
    for key, part in out["partitions"].items():
        topic, _, p = key.rpartition("-")
        part["located_by"] = planned.locators.get((topic, int(p)), "broker")
    return out


def describe_read(options) -> str:
    from ..model import Assign, Subscribe
    s = options.strategy
    what = (f"subscribe {','.join(s.topics)}" if isinstance(s, Subscribe)
            else f"assign {', '.join(map(str, s.partitions))}" if isinstance(s, Assign)
            else f"subscribePattern {s.pattern}")
    where = ("through " + ",".join(options.bootstrap_servers) if options.bootstrap_servers
             else "offline, listing the store")
    return f"{what}, {where}"


def print_report(r: dict, out) -> None:
    from ..planning.filters import format_micros
    print(f"kafka-tiered estimate: {r['read']}", file=out)
    w = r["window"] or {}
    if w:
        since = format_micros(w["since_ms"] * 1000) if "since_ms" in w else "earliest"
        until = format_micros(w["until_ms"] * 1000) if "until_ms" in w else "latest"
        print(f"window: {since} .. {until}", file=out)
    if r["where"]:
        print(f"where: {r['where']}", file=out)
    rows = [("partition", "offsets", "~records", "segments", "GETs", "bytes from storage",
             "~bytes via brokers", "located by")]
    for key, p in sorted(r["partitions"].items(), key=lambda kv: _tp_key(kv[0])):
        rows.append((key, f"[{p['start']}, {p['end']})", f"{p['end'] - p['start']:,}", str(p["segments"]),
                     f"{p['gets']:,}", f"{p['bytes']:,}", f"{p['broker_bytes']:,}", p["located_by"]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [c.ljust(widths[i]) if i in (0, 1, 7) else c.rjust(widths[i]) for i, c in enumerate(row)]
        print("  ".join(cells).rstrip(), file=out)
    plural = "s" if r["spark_partitions"] != 1 else ""
    print(f"total: {r['gets']:,} GETs ({r['log_gets']:,} ranged + {r['manifest_gets']:,} manifests), "
          f"{r['bytes']:,} bytes from storage, ${r['dollars']:.6f}; {r['spark_partitions']} Spark "
          f"partition{plural}; ~{r['broker_bytes']:,} bytes via brokers", file=out)
    m = r.get("markers") or {}
    if m.get("index_gets") or m.get("broker_fetches"):
        print(f"read_committed: finding the markers of transactions open at the ends took {m['index_gets']:,} "
              f"GETs ({m['index_bytes']:,} bytes) of later transaction indexes and {m['broker_fetches']:,} broker "
              f"fetches ({m['broker_bytes']:,} bytes)", file=out)
    print(f"prices: {r['price_model']}", file=out)
    print(f"storage: {storage_line(r['storage_check'])}", file=out)


def storage_line(check: str) -> str:
    """What ``estimate`` and ``segments`` print about the storage check."""
    from ..planning.estimate import CHECKED, NOTHING_TO_CHECK
    if check == CHECKED:
        return "checked (it answered the read's options)"
    if check == NOTHING_TO_CHECK:
        return "not needed (nothing is read from it directly)"
    return ("NOT checked (--no-check): a wrong prefix, layout, bucket or key shows only when the "
            "read starts")


def _tp_key(name: str):
    topic, _, p = name.rpartition("-")
    return topic, int(p)
