"""Fetcher names: which import path serves which ``remote.storage.fetcher`` name, fsspec-style.

Look-up order: the built-in table below, then names registered in this process
(:func:`register_fetcher`), then the entry-point group ``kafka_tiered_source.fetchers`` (third
parties register ``name = "pkg.mod:Class"`` there).  Built-in names cannot be shadowed.

The table lives with the options because the validator needs it: a third-party fetcher may declare
its own options as a class attribute ``options = {"remote.storage.<name>.<setting>": "doc", ...}``,
and then only those pass; a built-in backend's options are rows of the option table, so a
misspelt one is refused whether or not that backend is the configured fetcher.  The classes
are imported lazily, by name, by :mod:`kafka_tiered_source.storage.registry`.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:     # importlib.metadata costs a new process ~25 ms: only where entry points are read
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = "kafka_tiered_source.fetchers"

# name -> (import path, pip extra or None)
BUILTIN_FETCHERS: dict[str, tuple[str, str | None]] = {
    "s3": ("kafka_tiered_source.storage.s3:S3Fetcher", "s3"),
    "gcs": ("kafka_tiered_source.storage.gcs:GCSFetcher", "gcs"),
    "azure": ("kafka_tiered_source.storage.azure:AzureFetcher", "azure"),
    "fsspec": ("kafka_tiered_source.storage.fsspec_fetcher:FsspecFetcher", None),
    "presigned": ("kafka_tiered_source.storage.presigned:PresignedFetcher", None),
}

_registered: dict[str, str] = {}


def register_fetcher(name: str, target: str) -> None:
    """Register ``name`` -> ``"pkg.mod:Class"`` in this process (entry points do it for packages)."""
    name = name.lower()
    if name in BUILTIN_FETCHERS:
        raise ValueError(f"{name!r} is a built-in fetcher name")
    _registered[name] = target


def entry_points() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points as eps
    return {ep.name.lower(): ep for ep in eps(group=ENTRY_POINT_GROUP)}


def available_fetchers() -> list[str]:
    return sorted(set(BUILTIN_FETCHERS) | set(_registered) | set(entry_points()))


def import_target(target: str, what: str, option: str):
    """The object a ``pkg.mod:Attr`` (or ``pkg.mod.Attr``) path names."""
    if ":" in target:
        mod_name, _, attr = target.partition(":")
    else:
        mod_name, _, attr = target.rpartition(".")
    if not mod_name or not attr:
        raise ConfigError(f"{what} {target!r} is not a dotted path like pkg.module:Class", option=option)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigError(f"{what} {target!r}: cannot import module {mod_name!r} ({exc})",
                          option=option) from exc
    obj = mod
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{what} {target!r}: module {mod_name!r} has no {attr!r}",
                              option=option) from None
    return obj


def third_party_class(name: str):
    """The class registered for a non-built-in fetcher ``name``, or None when none is."""
    if name in _registered:
        return import_target(_registered[name], f"fetcher {name!r}", "remote.storage.fetcher")
    eps = entry_points()
    if name not in eps:
        return None
    try:
        return eps[name].load()
    except ImportError as exc:
        raise ConfigError(f"fetcher {name!r} (entry point {eps[name].value}) cannot be imported: {exc}",
                          option="remote.storage.fetcher") from exc


def plugin_options(name: str | None):
    """What passes through for a third-party fetcher ``name``: ``(prefix, declared)``, where
    ``declared`` are the lower-cased option names it declares (``options`` class attribute) or
    None when it declares none (or is not installed here: its name is then refused when the
    fetcher is looked up) and everything under ``remote.storage.<name>.`` passes.  None for no
    name or a built-in one: their options are rows of the option table."""
    if not name or name in BUILTIN_FETCHERS:
        return None
    prefix = f"remote.storage.{name}."
    cls = third_party_class(name)
    declared = getattr(cls, "options", None) if cls is not None else None   # optional attribute
    if declared is None:
        return prefix, None
    return prefix, tuple(sorted(k.lower() for k in declared if k.lower().startswith(prefix)))
