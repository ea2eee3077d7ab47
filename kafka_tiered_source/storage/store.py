"""A byte-range store: one backend's objects, as bytes (fsspec's ``cat_file``/``find``/``info``
and pyarrow.fs's input files, reduced to what reading tiered segments needs).

This is what a backend implements, built-in or third party: a ranged GET, a listing and a stat,
each one attempt that maps its failures onto the error table below.  Everything above it is
shared: the layout (:mod:`.layouts`: keys, Aiven manifests, chunk indexes, decryption and
decompression) and the fetcher (:class:`~.fetcher.ObjectStoreFetcher`: retries with back-off,
splitting, coalescing, concurrency, the metrics observer).  A third-party store plugs in by
``remote.storage.fetcher.class`` (its dotted path) or a registered fetcher name, and can run
the conformance suite against itself (tests/test_storage_conformance.py).

Ranges are half-open ``[start, end)`` here as everywhere in the project; a backend converts to
HTTP's inclusive ``bytes=start-(end-1)`` at its own edge.

Error table (one attempt):

=========================  ==============================  =========
storage answer             raised                          retried
=========================  ==============================  =========
404 / no such key          RemoteObjectNotFound             no
403 / access denied        RemoteAccessDenied               no
429, 503 SlowDown, ...     RemoteThrottled                  yes
other 5xx                  RemoteServerError                yes
connection refused/reset   RemoteConnectionError            yes
connect/read timeout       RemoteTimeout                    no (the reader falls back to the broker)
416 (start past the end)   returns b""                      --
=========================  ==============================  =========
"""
from __future__ import annotations

import abc
import threading
from typing import Iterator

from ..errors import (ListingNotSupported, RemoteAccessDenied, RemoteConnectionError, RemoteObjectNotFound,
                      RemoteServerError, RemoteStorageError, RemoteThrottled)
from ..options.storage import FetcherConfig

# Error classes a retry may cure.  Timeouts are deliberately absent: a slow store is better
# left to the broker fallback than waited on again.
RETRIABLE = (RemoteThrottled, RemoteServerError, RemoteConnectionError)

# Error codes (S3 / GCS / Azure names) that mean "slow down".
THROTTLE_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
    "TooManyRequests", "TooManyRequestsException", "RequestThrottled", "ProvisionedThroughputExceededException",
    "ServerBusy", "rateLimitExceeded", "userRateLimitExceeded", "EgressIsOverAccountLimit",
    "IngressIsOverAccountLimit",
})


def classify_status(status: int, code: str | None, message: str, *, location: str,
                    backend: str) -> RemoteStorageError | None:
    """Map an HTTP status (+ storage error code) to the error table; None for 416."""
    if status == 416:
        return None
    if status == 404 or code in ("NoSuchKey", "NotFound", "BlobNotFound", "NoSuchBucket",
                                 "ContainerNotFound", "ResourceNotFound"):
        return RemoteObjectNotFound(f"object not found ({status} {code or ''})".rstrip(),
                                    location=location, backend=backend)
    if status in (401, 403) or code in ("AccessDenied", "AuthorizationFailure",
                                        "AuthenticationFailed", "InvalidAccessKeyId",
                                        "SignatureDoesNotMatch", "AuthorizationPermissionMismatch"):
        return RemoteAccessDenied(f"access denied ({status} {code or ''})".rstrip(),
                                  location=location, backend=backend)
    if status == 429 or (code in THROTTLE_CODES) or (status == 503 and (code is None or "slow" in message.lower()
                                                                         or code in THROTTLE_CODES)):
        return RemoteThrottled(f"throttled ({status} {code or ''})".rstrip(), location=location,
                               backend=backend)
    if status >= 500:
        return RemoteServerError(f"server error ({status} {code or ''})".rstrip(), location=location,
                                 backend=backend)
    return RemoteStorageError(f"unexpected answer {status} {code or ''}".rstrip(), location=location,
                              backend=backend)


class ByteRangeStore(abc.ABC):
    """One backend's objects: ranged GET, list, stat.  Built from the fetcher's
    :class:`FetcherConfig` (its ``remote.storage.<backend>.*`` options say where and who);
    clients are made lazily, in the process that reads, and never pickled (a store travels as
    its config).  Thread-safe: a fetcher's parts are fetched from a pool.

    Keys are relative to the bucket / container / root URL, as the layout makes them (the
    presigned store's keys are whole URLs)."""

    #: the name metrics and errors give this backend
    backend = "custom"
    #: Python modules the backend needs, checked by the registry for a clear install hint
    requires: tuple[str, ...] = ()
    #: A third-party store's own options, ``{"remote.storage.<name>.<setting>": "doc"}``: only
    #: these pass the option validator (None: every ``remote.storage.<name>.*`` passes).
    options: dict | None = None
    #: whether :meth:`list` works (offline planning, the listing locator)
    can_list = True

    def __init__(self, config: FetcherConfig | None = None):
        self.config = config if config is not None else FetcherConfig()
        self._init_runtime()

    def _init_runtime(self) -> None:
        """Set up what the store needs in this process (lazily made clients start as None);
        subclasses extend it."""
        self._lock = threading.Lock()

    def __reduce__(self):
        return (self.__class__, (self.config,))

    @abc.abstractmethod
    def get_range(self, key: str, start: int, end: int | None) -> bytes:
        """One ranged GET of object bytes ``[start, end)`` (``end`` None: to the end).  Returns
        fewer bytes when the object is shorter, ``b""`` when ``start`` is past its end.  Raises
        the error table's classes; never retries (the fetcher does, and counts each attempt)."""

    def list(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object whose key starts with ``prefix``, in no particular
        order; a store that cannot list raises :class:`ListingNotSupported`."""
        raise ListingNotSupported(f"store {type(self).__name__} cannot list objects, so it cannot "
                                  "discover segments without kafka.bootstrap.servers", backend=self.backend)

    def stat(self, key: str) -> int:
        """The size of the object ``key`` in bytes; :class:`RemoteObjectNotFound` when there is
        none.  By default one ranged GET of its last byte cannot tell the size, so a store
        without a cheap metadata request says so."""
        raise RemoteStorageError(f"store {type(self).__name__} cannot stat objects", location=self.location(key),
                                 backend=self.backend)

    def location(self, key: str) -> str:
        """A human, secret-free name of the object for errors and observers."""
        return key

    def close(self) -> None:  # noqa: B027 - a hook: most stores hold nothing to release
        """Release clients and connections (a closed store may be used again: it reconnects)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(backend={self.backend!r})"
