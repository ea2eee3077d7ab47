"""Which fetcher class serves which name, fsspec-style: imported lazily, with an install hint.

Look-up order: ``remote.storage.fetcher.class`` (a dotted path to the user's own class), then the
names of :mod:`kafka_tiered_source.options.fetchers` (built-in, registered in this process, entry
points of the group ``kafka_tiered_source.fetchers``).  Built-in names cannot be shadowed.
"""
from __future__ import annotations

from typing import Mapping

from ..errors import ConfigError
from ..options.fetchers import (BUILTIN_FETCHERS, ENTRY_POINT_GROUP, available_fetchers,
                                import_target, register_fetcher, third_party_class)
from ..options.storage import FetcherConfig
from .fetcher import ObjectStoreFetcher, RemoteStorageFetcher
from .observer import FetchObserver
from .store import ByteRangeStore

__all__ = ["BUILTIN_FETCHERS", "ENTRY_POINT_GROUP", "available_fetchers", "create_fetcher",
           "fetcher_class", "parse_config", "register_fetcher"]

def _missing(modules) -> list[str]:
    import importlib.util   # here: a file:// store, which needs no SDK, never asks

    missing = []
    for m in modules:
        try:
            if importlib.util.find_spec(m) is None:
                missing.append(m)
        except (ImportError, ValueError):   # ValueError: sys.modules[m] is None (import blocked)
            missing.append(m)
    return missing


def fetcher_class(name: str | None = None, *,
                  class_path: str | None = None) -> type[RemoteStorageFetcher] | type[ByteRangeStore]:
    """The class for a fetcher name or dotted class path, its dependencies checked: a
    :class:`RemoteStorageFetcher`, or a :class:`~.store.ByteRangeStore` (a third party's store,
    which :func:`create_fetcher` runs in an :class:`ObjectStoreFetcher`)."""
    if class_path:
        cls = import_target(class_path, "remote.storage.fetcher.class", "remote.storage.fetcher.class")
        if not (isinstance(cls, type) and issubclass(cls, (RemoteStorageFetcher, ByteRangeStore))):
            raise ConfigError(f"remote.storage.fetcher.class {class_path!r} is not a subclass of "
                              "kafka_tiered_source.storage.ByteRangeStore or RemoteStorageFetcher",
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
        cls = import_target(target, f"fetcher {name!r}", "remote.storage.fetcher")
    else:
        cls = third_party_class(name)
        if cls is None:
            raise ConfigError(f"unknown fetcher {name!r} in remote.storage.fetcher; valid: "
                              f"{', '.join(available_fetchers())}", option="remote.storage.fetcher")
    missing = _missing(cls.requires)
    if missing:
        raise ConfigError(
            f"fetcher {name!r} needs {', '.join(missing)}, which cannot be imported"
            + (f"; install it with: {hint}" if hint else ""), option="remote.storage.fetcher")
    return cls


def parse_config(options: Mapping[str, str]) -> FetcherConfig:
    return FetcherConfig.from_options(options)


def create_fetcher(options: Mapping[str, str] | FetcherConfig,
                   observer: FetchObserver | None = None) -> RemoteStorageFetcher:
    """Build the configured fetcher from options (or an already parsed :class:`FetcherConfig`)."""
    config = options if isinstance(options, FetcherConfig) else parse_config(options)
    cls = fetcher_class(config.fetcher, class_path=config.fetcher_class)
    if issubclass(cls, ByteRangeStore):
        return ObjectStoreFetcher(config, observer, store=cls)
    return cls(config, observer)
