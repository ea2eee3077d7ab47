"""The installed distribution's version, from its metadata (pyproject.toml's ``version``, the
one place it is written).  The package root's ``__version__`` and the telemetry's client
software version both come from here."""
from __future__ import annotations

import functools

DISTRIBUTION = "kafka-tiered-source"


@functools.lru_cache(maxsize=None)
def package_version() -> str:
    """``kafka-tiered-source``'s version, or ``0+unknown`` in a source tree never installed."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"
