"""Which record decoder this process uses, told without loading it: the native one
(``kafka_tiered_source._native``) unless ``KAFKA_TIERED_NO_EXTENSIONS=1`` asks for the pure-Python
reference.  Planning asks this to walk ``__remote_log_metadata`` with the same backend, and must
not pay for Arrow doing so (:mod:`.decoder` loads the backends themselves)."""
from __future__ import annotations

import importlib
import os
from typing import Any, Callable

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


_MAKERS: dict = {}


def slots_maker(cls: type, names: tuple[str, ...] | None = None) -> Callable[..., Any]:
    """A function making ``cls`` (a slotted dataclass with no ``__post_init__``) from every
    field's value, in field order: the native one stores each value in its slot
    (native/rlm_replay.c ``slots_maker``: a plan of a million copies makes millions of frozen
    instances, whose ``__init__`` sets each field through ``object.__setattr__``); with
    ``KAFKA_TIERED_NO_EXTENSIONS=1``, ``cls`` itself.  Either makes an equal instance.

    ``names``: the slots in order, for a class that is not a dataclass (the codec's structs,
    whose ``__init__`` takes keywords); without the extension each is then set in turn."""
    got = _MAKERS.get(cls)
    if got is None:
        if hasattr(cls, "__post_init__"):
            raise TypeError(f"{cls.__name__} checks its fields in __post_init__: make it with its __init__")
        if decoder_backend() == "native":
            from .._native import slots_maker as native
            if names is None:
                from ..dataclass import field_names
                names = field_names(cls)
            got = native(cls, names)
        elif names is None:
            got = cls
        else:
            got = _setting_maker(cls, names)
        _MAKERS[cls] = got
    return got


def _setting_maker(cls: Any, names: tuple[str, ...]) -> Callable[..., Any]:
    def make(*values):
        obj = cls.__new__(cls)
        for attr, value in zip(names, values, strict=True):
            object.__setattr__(obj, attr, value)
        return obj
    return make
