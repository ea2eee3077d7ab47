"""Typed values of option strings, shared by the parsers of the Kafka client's properties
(:mod:`kafka_tiered_source.protocol.client`) and of the fetchers' options
(:mod:`kafka_tiered_source.storage.config`).  Each raises :class:`ConfigError` naming the option.

(The Spark source's own options are parsed by :mod:`kafka_tiered_source.spark.options`, which
follows Spark's stricter rules: there only ``true`` / ``false`` are booleans.)
"""
from __future__ import annotations

from .errors import ConfigError

TRUE_VALUES = ("true", "1", "yes")
FALSE_VALUES = ("false", "0", "no")


def parse_bool(key: str, value, *, label: str | None = None) -> bool:
    """``value`` as a bool: true/1/yes or false/0/no, in any letter case, blanks around ignored.
    Anything else is a :class:`ConfigError` for option ``key``, whose message names it as
    ``label`` (default: the key itself)."""
    v = str(value).strip().lower()
    if v in TRUE_VALUES:
        return True
    if v in FALSE_VALUES:
        return False
    raise ConfigError(f"{label or key} must be true or false, got {value!r}", option=key)
