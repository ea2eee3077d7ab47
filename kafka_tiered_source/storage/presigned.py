"""The ``presigned`` fetcher: a plain HTTP ``Range`` GET of ``segment.presigned_url``.

The URL's query string carries the signature (and often credentials), so it never leaves this
module: errors, reprs and observer calls see :func:`~kafka_tiered_source.redact.redact_url`
only, and the stdlib ``http.client`` is used because it logs nothing (urllib3 logs full URLs
at DEBUG).  Exceptions are raised ``from None`` so no chained message can carry the URL.
"""
from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
from urllib.parse import urlsplit

from ..errors import ListingNotSupported, RemoteConnectionError, RemoteStorageError, RemoteTimeout
from ..redact import redact_url
from .fetcher import ObjectStoreFetcher
from .layouts import PresignedLayout
from .store import ByteRangeStore, classify_status

_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")


class PresignedStore(ByteRangeStore):
    """Keys are presigned URLs: each one object, reachable without credentials of ours."""
    backend = "presigned"
    requires = ()
    can_list = False      # one object per URL the broker hands out

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._local = threading.local()     # one HTTP connection per thread and host
        self._all: list = []                # every connection made, for close()

    def list(self, prefix: str = ""):
        raise ListingNotSupported(
            "the presigned fetcher reads one object per URL the broker hands out and cannot list "
            "a bucket; without kafka.bootstrap.servers use the s3, gcs, azure or fsspec fetcher",
            backend=self.backend)

    def location(self, key: str) -> str:
        return redact_url(key) or ""

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    def _connection(self, scheme: str, host: str, port: int | None):
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        k = (scheme, host, port)
        conn = conns.get(k)
        if conn is None:
            t = self.config.connect_timeout_ms / 1000.0
            if scheme == "https":
                conn = http.client.HTTPSConnection(host, port, timeout=t, context=ssl.create_default_context())
            else:
                conn = http.client.HTTPConnection(host, port, timeout=t)
            conns[k] = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _drop(self, scheme, host, port):
        conn = self._local.conns.pop((scheme, host, port), None)
        if conn is not None:
            conn.close()
            with self._lock:
                if conn in self._all:
                    self._all.remove(conn)

    def get_range(self, key: str, start: int, end: int | None) -> bytes:
        location = self.location(key)
        parts = urlsplit(key)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RemoteStorageError("presigned URL is not an http(s) URL", location=location,
                                     backend=self.backend)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        headers = {"Range": f"bytes={start}-" if end is None else f"bytes={start}-{end - 1}"}
        conn_key = (parts.scheme, parts.hostname, parts.port)
        stage = "connect"
        try:
            conn = self._connection(*conn_key)
            if conn.sock is None:
                conn.connect()
            conn.sock.settimeout(self.config.read_timeout_ms / 1000.0)
            stage = "read"
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            status = resp.status
            if resp.getheader("Connection", "").lower() == "close":
                self._drop(*conn_key)
        except (socket.timeout, TimeoutError):
            self._drop(*conn_key)
            ms = self.config.connect_timeout_ms if stage == "connect" else self.config.read_timeout_ms
            raise RemoteTimeout(f"{stage} timeout after {ms} ms", location=location,
                                backend=self.backend) from None
        except (OSError, http.client.HTTPException) as exc:
            self._drop(*conn_key)
            raise RemoteConnectionError(f"connection failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None
        if status == 206:
            return body
        if status == 200:   # the server ignored Range: cut the range out ourselves
            return body[start:] if end is None else body[start:end]
        m = _CODE.search(body or b"")
        code = m.group(1).decode("ascii", "replace") if m else None
        mapped = classify_status(status, code, body[:200].decode("utf-8", "replace") if body else "",
                                 location=location, backend=self.backend)
        if mapped is None:
            return b""
        raise mapped

    def __repr__(self) -> str:
        return "PresignedStore()"


class PresignedFetcher(ObjectStoreFetcher):
    """The ``presigned`` fetcher: a segment's presigned URL (:class:`~.layouts.PresignedLayout`)
    through :class:`PresignedStore`, whatever layout is configured."""
    store_class = PresignedStore

    def _make_layout(self):
        return PresignedLayout(self)

    def __repr__(self) -> str:
        return f"PresignedFetcher(part_size={self.config.part_size}, concurrency={self.config.concurrency})"
