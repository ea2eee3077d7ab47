"""Which fetcher class serves which name, fsspec-style: imported lazily, with an install hint.

Look-up order: ``remote.storage.fetcher.class`` (a dotted path to the user's own class), then the
built-in table below, then the entry-point group ``kafka_tiered_source.fetchers`` (third parties
register ``name = "pkg.mod:Class"`` there).  Built-in names cannot be shadowed.
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Mapping

from ..errors import ConfigError
from .config import FetcherConfig
from .fetcher import RemoteStorageFetcher
from .observer import FetchObserver

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


def _entry_points() -> dict[str, object]:
    from importlib.metadata import entry_points
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_fetchers() -> list[str]:
    return sorted(set(BUILTIN_FETCHERS) | set(_registered) | set(_entry_points()))


def _import_target(target: str, what: str, option: str):
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


def _missing(modules) -> list[str]:
    missing = []
    for m in modules:
        try:
            if importlib.util.find_spec(m) is None:
                missing.append(m)
        except (ImportError, ValueError):   # ValueError: sys.modules[m] is None (import blocked)
            missing.append(m)
    return missing


def fetcher_class(name: str | None = None, *, class_path: str | None = None) -> type[RemoteStorageFetcher]:
    """The class for a fetcher name or dotted class path, its dependencies checked."""
    if class_path:
        cls = _import_target(class_path, "remote.storage.fetcher.class", "remote.storage.fetcher.class")
        if not (isinstance(cls, type) and issubclass(cls, RemoteStorageFetcher)):
            raise ConfigError(f"remote.storage.fetcher.class {class_path!r} is not a subclass of "
                              "kafka_tiered_source.storage.RemoteStorageFetcher",
                              option="remote.storage.fetcher.class")
        return cls
    if not name:
        raise ConfigError("no fetcher configured: set remote.storage.fetcher to one of "
                          f"{', '.join(available_fetchers())} (or remote.storage.fetcher.class)",
                          option="remote.storage.fetcher")
    name = name.lower()
    hint = None
    if name in BUILTIN_FETCHERS:
        target, extra = BUILTIN_FETCHERS[name]
        hint = f"pip install kafka-tiered-source[{extra}]" if extra else None
        cls = _import_target(target, f"fetcher {name!r}", "remote.storage.fetcher")
    elif name in _registered:
        cls = _import_target(_registered[name], f"fetcher {name!r}", "remote.storage.fetcher")
    else:
        eps = _entry_points()
        if name not in eps:
            raise ConfigError(f"unknown fetcher {name!r} in remote.storage.fetcher; valid: "
                              f"{', '.join(available_fetchers())}", option="remote.storage.fetcher")
        try:
            cls = eps[name].load()
        except ImportError as exc:
            raise ConfigError(f"fetcher {name!r} (entry point {eps[name].value}) cannot be imported: {exc}",
                              option="remote.storage.fetcher") from exc
    missing = _missing(getattr(cls, "requires", ()))
    if missing:
        raise ConfigError(
            f"fetcher {name!r} needs {', '.join(missing)}, which cannot be imported"
            + (f"; install it with: {hint}" if hint else ""), option="remote.storage.fetcher")
    return cls


def parse_config(options: Mapping[str, str]) -> FetcherConfig:
    extra = tuple(n for n in (set(_registered) | set(_entry_points())) if n not in BUILTIN_FETCHERS)
    return FetcherConfig.from_options(options, extra_names=extra)


def create_fetcher(options: Mapping[str, str] | FetcherConfig,
                   observer: FetchObserver | None = None) -> RemoteStorageFetcher:
    """Build the configured fetcher from options (or an already parsed :class:`FetcherConfig`)."""
    config = options if isinstance(options, FetcherConfig) else parse_config(options)
    cls = fetcher_class(config.fetcher, class_path=config.fetcher_class)
    return cls(config, observer)
