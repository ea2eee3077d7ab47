"""The options of ``scan()``: the ``kafka-tiered`` format's, less Spark's streaming ones, plus
``scan.*`` (how many tasks run at once).

The source options go through the same parser as the Spark source's
(:meth:`~kafka_tiered_source.options.ReadOptions.parse`), so a misspelt option is refused by
name the same way.  What only a Spark ``readStream`` means is refused by name here rather than
ignored with a warning as a Spark batch read does: a scan is always a batch read, and an
option that cannot do anything in it is the user's mistake, not a setting to carry along.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..dataclass import dataclass
from ..errors import ConfigError
from ..options.table import BY_KEY, in_group

SCAN_PREFIX = "scan."
# Spark-only: what a readStream means.  A scan reads [startingOffsets, endingOffsets) once.
SPARK_ONLY = {o.key: o.name for o in in_group("streaming")}


@dataclass(frozen=True)
class ScanConfig:
    workers: int                 # scan.workers: tasks in flight, one thread each


def option_value(key: str, value: Any) -> str:
    """As ``DataFrameReader.option`` turns values into strings (booleans lower-case); None is
    refused, as the source's parser refuses it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        raise ConfigError(f"Option '{key}' must be a string, got NoneType", option=key)
    return value if isinstance(value, str) else str(value)


def split_options(options: Mapping[str, Any] | None, kw: Mapping[str, Any]) -> tuple[ScanConfig, dict[str, str]]:
    """``(scan settings, the source options)`` of ``scan(options, **kw)``; raises
    :class:`ConfigError` naming a Spark-only or invalid option."""
    merged: dict[str, str] = {}
    for source in (options or {}), kw:
        for key, value in dict(source).items():
            merged[str(key)] = option_value(str(key), value)
    workers = None
    rest: dict[str, str] = {}
    for key, value in merged.items():
        low = key.strip().lower()
        if low in SPARK_ONLY:
            raise ConfigError(f"Option '{SPARK_ONLY[low]}' is an option of Spark's readStream; scan() reads "
                              f"the offsets from startingOffsets to endingOffsets once (bound them with "
                              f"endingOffsets or endingTimestamp)", option=SPARK_ONLY[low])
        if low.startswith(SCAN_PREFIX):
            option = BY_KEY.get(low)
            if option is None or option.group != "scan":
                names = ", ".join(o.name for o in in_group("scan"))
                raise ConfigError(f"Unknown option '{key}' for scan(). Valid scan options: {names}", option=key)
            if option.name == "scan.workers":
                workers = option.value(value)
            continue
        rest[key] = value
    return ScanConfig(workers or max(1, os.cpu_count() or 1)), rest
