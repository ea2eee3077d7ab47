"""Reading tiered segments out of remote storage (the consumer side of KIP-1254): per backend a
byte-range store (:mod:`.store`), a layout above it (:mod:`.layouts`: keys, manifests, chunk
transforms), and the fetcher that joins them (:mod:`.fetcher`).

Backends are imported lazily (``create_fetcher`` / the registry), so importing this package
pulls in no cloud SDK.
"""
from ..options.storage import FetcherConfig
from .fetcher import ObjectStoreFetcher, RemoteConnectionError, RemoteStorageFetcher
from .layout import Layout
from .observer import CountingObserver, FetchObserver
from .registry import (BUILTIN_FETCHERS, available_fetchers, create_fetcher, fetcher_class,
                       register_fetcher)
from .segment import RemoteSegment
from .store import ByteRangeStore

__all__ = ["RemoteSegment", "RemoteStorageFetcher", "ObjectStoreFetcher", "ByteRangeStore", "Layout",
           "FetcherConfig",
           "FetchObserver", "CountingObserver", "create_fetcher", "fetcher_class", "register_fetcher",
           "available_fetchers", "BUILTIN_FETCHERS", "RemoteConnectionError"]
