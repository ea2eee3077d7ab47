"""Which record decoder this process uses, told without loading it: the native one
(``kafka_tiered_source._native``) unless ``KAFKA_TIERED_NO_EXTENSIONS=1`` asks for the pure-Python
reference.  Planning asks this to walk ``__remote_log_metadata`` with the same backend, and must
not pay for Arrow doing so (:mod:`.decoder` loads the backends themselves)."""
from __future__ import annotations

import importlib
import os

from ..errors import KafkaTieredError

NO_EXTENSIONS_ENV = "KAFKA_TIERED_NO_EXTENSIONS"


def chosen() -> str:
    """``"python"`` when ``KAFKA_TIERED_NO_EXTENSIONS=1``, else ``"native"``."""
    return "python" if os.environ.get(NO_EXTENSIONS_ENV) == "1" else "native"


def native_unavailable(exc: ImportError) -> KafkaTieredError:
    return KafkaTieredError(
        f"the native record decoder (kafka_tiered_source._native) cannot be imported: "
        f"{exc}. Build it with `pip install -e .` (needs a C compiler), or set "
        f"{NO_EXTENSIONS_ENV}=1 to use the pure-Python decoder")


def decoder_backend() -> str:
    """``"native"`` or ``"python"`` (``KAFKA_TIERED_NO_EXTENSIONS=1``).  In default mode,
    raises :class:`KafkaTieredError` when the extension cannot be loaded: there is no silent
    fallback to the slow decoder."""
    name = chosen()
    if name == "native":
        try:
            importlib.import_module("kafka_tiered_source._native")
        except ImportError as exc:
            raise native_unavailable(exc) from exc
    return name
