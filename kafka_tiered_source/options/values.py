"""Typed values of option strings: the parsers the option table names.

Every parser takes ``(label, name, raw)``: ``label`` is how the option is named in the message
(each family keeps the spelling its users know: Spark's ``Option 'minPartitions'``, the storage
layer's ``option remote.storage.prefix``, Kafka's bare ``ssl.check.hostname``), ``name`` its
canonical name for :attr:`ConfigError.option`, ``raw`` the string given.  Values of secret
options are never echoed.
"""
from __future__ import annotations

import re

from ..errors import ConfigError
from ..redact import REDACTED, Secret, is_secret_key

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_INTEGER = r"^[+-]?[0-9]+$"   # compiled when first used (re caches it): not at import (issue 36)

# Booleans, one rule with one switch.  Options that Spark's Kafka source defines
# (failOnDataLoss, includeHeaders) and the source's own follow Spark, which takes only
# true/false; the Kafka client's properties and the storage plugins' options also take the
# 1/0 and yes/no spellings their configuration files use.
STRICT_TRUE, STRICT_FALSE = ("true",), ("false",)
LENIENT_TRUE, LENIENT_FALSE = ("true", "1", "yes"), ("false", "0", "no")


def secret(label: str, name: str, raw) -> Secret:
    """A credential, kept as a :class:`~kafka_tiered_source.redact.Secret` (never shown)."""
    return Secret(str(raw))


def show(name: str, raw) -> str:
    """``raw`` for a message: its repr, or ``***`` for a secret option."""
    return REDACTED if is_secret_key(name) else repr(raw)


def boolean(label: str, name: str, raw, *, lenient: bool = False) -> bool:
    text = str(raw).strip().lower()
    if text in (LENIENT_TRUE if lenient else STRICT_TRUE):
        return True
    if text in (LENIENT_FALSE if lenient else STRICT_FALSE):
        return False
    choices = "true or false" if lenient else "'true' or 'false'"
    raise ConfigError(f"{label} must be {choices}, got {show(name, raw)}", option=name)


def integer(label: str, name: str, raw, *, minimum: int, maximum: int = INT64_MAX) -> int:
    text = str(raw).strip()
    if not re.match(_INTEGER, text):
        raise ConfigError(f"{label} must be an integer, got {show(name, raw)}", option=name)
    number = int(text)
    if number < minimum:
        what = "positive (>= 1)" if minimum == 1 else f">= {minimum}"
        raise ConfigError(f"{label} must be {what}, got {number}", option=name)
    if number > maximum:
        raise ConfigError(f"{label} must be <= {maximum}, got {number}", option=name)
    return number


def number(label: str, name: str, raw, *, positive: bool) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = None
    if value is None or value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(f"{label} must be a number, got {show(name, raw)}", option=name)
    if value < 0 or (positive and value == 0):
        raise ConfigError(f"{label} must be {'> 0' if positive else '>= 0'}, got {value:g}",
                          option=name)
    return value


def between(label: str, name: str, raw, *, minimum: float, maximum: float) -> float:
    """A number in ``[minimum, maximum]`` (Kafka's ``ConfigDef.Range.between`` of a DOUBLE)."""
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{label} must be a number, got {show(name, raw)}", option=name) from None
    if not minimum <= value <= maximum:         # NaN is neither
        raise ConfigError(f"{label} must be between {minimum:g} and {maximum:g}, got {value:g}", option=name)
    return value


def choice(label: str, name: str, raw, *, choices: tuple[str, ...]) -> str:
    text = str(raw).strip().lower()
    if text not in choices:
        raise ConfigError(f"{label} must be one of {', '.join(choices)}; got {show(name, raw)}",
                          option=name)
    return text


def nonempty(label: str, name: str, raw) -> str:
    text = str(raw).strip()
    if not text:
        raise ConfigError(f"{label} is empty", option=name)
    return text


def text(label: str, name: str, raw) -> str:
    return str(raw)


def stripped(label: str, name: str, raw) -> str:
    return str(raw).strip()


def name(label: str, option: str, raw) -> str:
    """A name matched case-insensitively (a fetcher's): stripped, lower-cased."""
    return str(raw).strip().lower()


_DURATION = r"(?i)^\s*([0-9]+)\s*(ms|s|m|min|h|d)?\s*$"
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(label: str, name: str, raw) -> int:
    """A duration as Spark writes them (``15m``, ``30s``, ``500ms``, ``1h``; a bare number is
    seconds), in milliseconds."""
    m = re.match(_DURATION, str(raw))
    if not m:
        raise ConfigError(f"{label} must be a duration such as 15m, 30s or 500ms, got {show(name, raw)}",
                          option=name)
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "s").lower()]
