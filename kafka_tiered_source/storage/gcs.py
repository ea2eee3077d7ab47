"""The ``gcs`` fetcher: Google Cloud Storage through gcsfs.

gcsfs supplies the endpoint (``remote.storage.gcs.endpoint`` for an emulator), the credentials
(``remote.storage.gcs.credentials``, gcsfs's ``token``) and the HTTP session.  The ranged GET
itself is issued here, one attempt at a time, because gcsfs's own request wrapper retries up to
six times with sleeps of up to 32 s — invisible to the observer and to our timeouts.
"""
from __future__ import annotations

import asyncio
import json

from ..errors import RemoteConnectionError, RemoteObjectNotFound, RemoteTimeout
from .fetcher import ObjectStoreFetcher
from .store import ByteRangeStore, classify_status


class _Timeout(Exception):
    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


class GCSStore(ByteRangeStore):
    backend = "gcs"
    requires = ("gcsfs", "aiohttp")

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._bucket = self.config.require("remote.storage.gcs.bucket")
        self._fs = None

    def _filesystem(self):
        if self._fs is None:
            # The plain filesystem: gcsfs.GCSFileSystem may be the "extended" one that probes
            # bucket types over gRPC first (a 60 s stall against emulators and private endpoints).
            from gcsfs.core import GCSFileSystem
            c = self.config
            kwargs = {"token": c.option("remote.storage.gcs.credentials") or "google_default"}
            if c.option("remote.storage.gcs.project"):
                kwargs["project"] = c.option("remote.storage.gcs.project")
            if c.option("remote.storage.gcs.endpoint"):
                kwargs["endpoint_url"] = c.option("remote.storage.gcs.endpoint").rstrip("/")
            # skip_instance_cache: a fetcher owns its filesystem (and event loop usage).
            fs = GCSFileSystem(skip_instance_cache=True, **kwargs)
            with self._lock:
                if self._fs is None:
                    self._fs = fs
        return self._fs

    def location(self, key: str) -> str:
        return f"gs://{self._bucket}/{key}"

    async def _aget(self, fs, url, headers):
        import aiohttp
        c = self.config
        await fs._set_session()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=c.connect_timeout_ms / 1000.0,
                                        sock_read=c.read_timeout_ms / 1000.0)
        try:
            async with fs.session.get(url, headers=headers, timeout=timeout) as r:
                return r.status, await r.read()
        except aiohttp.ConnectionTimeoutError:
            # classified here: fsspec's sync() turns every TimeoutError into FSTimeoutError,
            # which would lose connect-vs-read
            raise _Timeout("connect") from None
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            raise _Timeout("read") from None

    def get_range(self, key: str, start: int, end: int | None) -> bytes:
        import aiohttp
        from fsspec.asyn import sync
        location = self.location(key)
        fs = self._filesystem()
        url = fs.url(f"{self._bucket}/{key}")
        headers = fs._get_headers({"Range": f"bytes={start}-" if end is None else f"bytes={start}-{end - 1}"})
        try:
            status, body = sync(fs.loop, self._aget, fs, url, headers)
        except _Timeout as exc:
            kind = exc.kind
            ms = self.config.connect_timeout_ms if kind == "connect" else self.config.read_timeout_ms
            raise RemoteTimeout(f"{kind} timeout after {ms} ms", location=location,
                                backend=self.backend) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise RemoteConnectionError(f"connection failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None
        if status in (200, 206):
            if status == 200 and (start or end is not None):
                return body[start:] if end is None else body[start:end]
            return body
        code, msg = None, ""
        try:
            err = json.loads(body)["error"]
            msg = str(err.get("message", ""))
            errors = err.get("errors") or [{}]
            code = errors[0].get("reason")
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            msg = body[:200].decode("utf-8", "replace") if body else ""
        mapped = classify_status(status, code, msg, location=location, backend=self.backend)
        if mapped is None:
            return b""
        raise mapped

    def stat(self, key: str) -> int:
        """The object's size from its metadata (gcsfs ``info``)."""
        location = self.location(key)
        try:
            return int(self._filesystem().info(f"{self._bucket}/{key}")["size"])
        except FileNotFoundError:
            raise RemoteObjectNotFound("object not found", location=location, backend=self.backend) from None
        except (OSError, ValueError, KeyError) as exc:
            raise RemoteConnectionError(f"stat failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None

    def list(self, prefix: str = ""):
        """gcsfs ``find`` with a server-side key prefix."""
        fs = self._filesystem()
        location = self.location(prefix)
        base = f"{self._bucket}/"
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        try:
            found = fs.find(base + directory, prefix=prefix[len(directory) + 1 if directory else 0:],
                            detail=True)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise RemoteConnectionError(f"listing failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None
        for path, info in found.items():
            key = path[len(base):] if path.startswith(base) else path
            if key.startswith(prefix) and info.get("type", "file") == "file":
                yield key, int(info.get("size") or 0)

    def __repr__(self) -> str:
        c = self.config
        return (f"GCSStore(bucket={self._bucket!r}, endpoint={c.option('remote.storage.gcs.endpoint')!r}, "
                f"layout={c.layout!r}, prefix={c.prefix!r})")


class GCSFetcher(ObjectStoreFetcher):
    """The ``gcs`` fetcher: :class:`GCSStore` through the configured layout."""
    store_class = GCSStore
