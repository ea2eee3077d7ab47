"""The ``s3`` fetcher: boto3 ranged ``GetObject`` against AWS or any S3-compatible endpoint
(:class:`S3Store`), through the configured layout.

Credentials come from ``remote.storage.s3.access.key.id`` / ``.secret.access.key`` /
``.session.token`` when given, else from boto3's standard chain (env, profile, IMDS ...).
botocore's own retries are switched off: retries, back-off and their accounting happen in
:class:`~.fetcher.ObjectStoreFetcher`, so every GET attempt reaches the observer.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from ..errors import RemoteConnectionError, RemoteTimeout
from ..options.table import BY_KEY
from .fetcher import ObjectStoreFetcher
from .store import ByteRangeStore, classify_status

# boto3 clients by what they are made from, shared in the process: a client costs ~60 ms of CPU
# to build (a session parses the service model), and every Spark task has a fetcher of its own.
# Clients are thread-safe; a fetcher's per-task accounting is in the fetcher, not the client.
# Least recently used first out: credentials that rotate (STS session tokens) make a new key
# every hour, and a long-lived executor must not keep a client for each of them.
CLIENT_CACHE_SIZE = 16
_clients: OrderedDict = OrderedDict()
_clients_lock = threading.Lock()

PATH_STYLE = "remote.storage.s3.path.style.access"


def path_style(config) -> bool:
    """Path-style addressing: the option (the table's boolean rule), else on with an endpoint
    (MinIO, moto and most S3-compatible stores want it)."""
    raw = config.option(PATH_STYLE)
    if raw is None:
        return bool(config.option("remote.storage.s3.endpoint"))
    return BY_KEY[PATH_STYLE].value(raw)


def cached_client(key, make):
    """The client cached under ``key``, made by ``make()`` when absent (the least recently
    used one leaves when the cache is full)."""
    with _clients_lock:
        client = _clients.get(key)
        if client is not None:
            _clients.move_to_end(key)
            return client
    client = make()   # outside the lock: building one takes ~60 ms
    with _clients_lock:
        client = _clients.setdefault(key, client)
        _clients.move_to_end(key)
        while len(_clients) > CLIENT_CACHE_SIZE:
            _clients.popitem(last=False)
    return client


class S3Store(ByteRangeStore):
    backend = "s3"
    requires = ("boto3", "botocore")
    #: keys per ListObjectsV2 request (S3's maximum)
    list_page_size = 1000

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._bucket = self.config.require("remote.storage.s3.bucket")
        self._client_obj = None

    def _client(self):
        if self._client_obj is None:
            c = self.config
            endpoint = c.option("remote.storage.s3.endpoint")
            style = path_style(c)
            secrets = hashlib.sha256(repr((c.option("remote.storage.s3.secret.access.key"),
                                           c.option("remote.storage.s3.session.token"))).encode()).digest()
            key = (endpoint, style, c.option("remote.storage.s3.access.key.id"), secrets,
                   c.option("remote.storage.s3.region"), c.connect_timeout_ms, c.read_timeout_ms,
                   max(10, c.concurrency * 2))
            client = cached_client(key, lambda: self._new_client(endpoint, style))
            with self._lock:
                if self._client_obj is None:
                    self._client_obj = client
        return self._client_obj

    def _new_client(self, endpoint, path_style: bool):
        import boto3
        from botocore.config import Config
        c = self.config
        cfg = Config(connect_timeout=c.connect_timeout_ms / 1000.0,
                     read_timeout=c.read_timeout_ms / 1000.0,
                     retries={"total_max_attempts": 1, "mode": "standard"},
                     max_pool_connections=max(10, c.concurrency * 2),
                     s3={"addressing_style": "path" if path_style else "auto"})
        session = boto3.session.Session(
            aws_access_key_id=c.option("remote.storage.s3.access.key.id"),
            aws_secret_access_key=c.option("remote.storage.s3.secret.access.key"),
            aws_session_token=c.option("remote.storage.s3.session.token"),
            region_name=c.option("remote.storage.s3.region"))
        return session.client("s3", endpoint_url=endpoint, config=cfg,
                              region_name=session.region_name or "us-east-1")

    def location(self, key: str) -> str:
        return f"s3://{self._bucket}/{key}"

    def get_range(self, key: str, start: int, end: int | None) -> bytes:
        from botocore.exceptions import (ClientError, ConnectTimeoutError, ReadTimeoutError,
                                         EndpointConnectionError, ConnectionClosedError,
                                         ResponseStreamingError, HTTPClientError,
                                         FlexibleChecksumError, IncompleteReadError)
        from urllib3.exceptions import ProtocolError, ReadTimeoutError as U3ReadTimeout
        location = self.location(key)
        rng = f"bytes={start}-" if end is None else f"bytes={start}-{end - 1}"
        try:
            resp = self._client().get_object(Bucket=self._bucket, Key=key, Range=rng)
            body = resp["Body"]
            try:
                return body.read()
            finally:
                body.close()
        except ClientError as exc:
            err = exc.response.get("Error", {})
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            mapped = classify_status(status, err.get("Code"), str(err.get("Message") or ""),
                                     location=location, backend=self.backend)
            if mapped is None:
                return b""
            raise mapped from None
        except (ConnectTimeoutError, ReadTimeoutError, U3ReadTimeout) as exc:
            kind = "connect" if isinstance(exc, ConnectTimeoutError) else "read"
            ms = self.config.connect_timeout_ms if kind == "connect" else self.config.read_timeout_ms
            raise RemoteTimeout(f"{kind} timeout after {ms} ms", location=location,
                                backend=self.backend) from None
        except (EndpointConnectionError, ConnectionClosedError, ResponseStreamingError, ProtocolError,
                HTTPClientError) as exc:
            raise RemoteConnectionError(f"connection failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None
        except (FlexibleChecksumError, IncompleteReadError) as exc:
            # The body was damaged or cut in transit (botocore checked it against the answer's
            # checksum or Content-Length): worth another GET, like a dropped connection.
            raise RemoteConnectionError(f"body did not arrive intact: {type(exc).__name__}",
                                        location=location, backend=self.backend) from None

    def stat(self, key: str) -> int:
        """HeadObject's ContentLength."""
        from botocore.exceptions import BotoCoreError, ClientError
        location = self.location(key)
        try:
            return int(self._client().head_object(Bucket=self._bucket, Key=key)["ContentLength"])
        except ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            code = exc.response.get("Error", {}).get("Code")
            raise (classify_status(status, None if code in (None, str(status)) else code, "", location=location,
                                   backend=self.backend)
                   or RemoteConnectionError(f"stat failed ({status})", location=location,
                                            backend=self.backend)) from None
        except BotoCoreError as exc:
            raise RemoteConnectionError(f"stat failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None

    def list(self, prefix: str = ""):
        """ListObjectsV2, page by page (1,000 keys per request)."""
        from botocore.exceptions import BotoCoreError, ClientError
        location = self.location(prefix)
        try:
            pages = self._client().get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket, Prefix=prefix, PaginationConfig={"PageSize": self.list_page_size})
            for page in pages:
                for obj in page.get("Contents", ()):
                    yield obj["Key"], int(obj["Size"])
        except ClientError as exc:
            err = exc.response.get("Error", {})
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            raise (classify_status(status, err.get("Code"), str(err.get("Message") or ""),
                                   location=location, backend=self.backend)
                   or RemoteConnectionError(f"listing failed ({status})", location=location,
                                            backend=self.backend)) from None
        except BotoCoreError as exc:
            raise RemoteConnectionError(f"listing failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None

    def __repr__(self) -> str:
        c = self.config
        return (f"S3Store(bucket={self._bucket!r}, endpoint={c.option('remote.storage.s3.endpoint')!r}, "
                f"layout={c.layout!r}, prefix={c.prefix!r})")


class S3Fetcher(ObjectStoreFetcher):
    """The ``s3`` fetcher: :class:`S3Store` through the configured layout."""
    store_class = S3Store
