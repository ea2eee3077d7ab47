"""The ``fsspec`` fetcher: any URL fsspec knows (``file://``, ``memory://``, ``http(s)://`` ...).

``remote.storage.fsspec.url`` is the root; object keys from the layout are joined under it.
"""
from __future__ import annotations

from ..errors import RemoteAccessDenied, RemoteObjectNotFound, RemoteStorageError, RemoteTimeout
from ..redact import redact_url
from .fetcher import ObjectStoreFetcher
from .store import ByteRangeStore


class FsspecStore(ByteRangeStore):
    """Objects under an fsspec root URL."""
    backend = "fsspec"
    requires = ("fsspec",)

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._url = self.config.require("remote.storage.fsspec.url").rstrip("/")
        self._fs = None

    def _filesystem(self):
        if self._fs is None:
            import fsspec.core
            with self._lock:
                if self._fs is None:
                    fs, root = fsspec.core.url_to_fs(self._url)
                    self._root = root.rstrip("/")
                    self._fs = fs
        return self._fs

    def location(self, key: str) -> str:
        return f"{redact_url(self._url)}/{key}"

    def _path(self, key: str) -> str:
        self._filesystem()
        return f"{self._root}/{key}" if self._root else key

    def get_range(self, key: str, start: int, end: int | None) -> bytes:
        return self._mapped(key, lambda fs, path: fs.cat_file(path, start=start) if end is None
                            else fs.cat_file(path, start=start, end=end))

    def stat(self, key: str) -> int:
        def size(fs, path):
            info = fs.info(path)
            if info.get("type", "file") != "file":
                raise IsADirectoryError(path)
            return int(info.get("size") or 0)
        return self._mapped(key, size)

    def _mapped(self, key: str, op):
        """``op(fs, path)``, its failures mapped onto the error table."""
        fs = self._filesystem()
        location = self.location(key)
        try:
            return op(fs, self._path(key))
        except FileNotFoundError:
            raise RemoteObjectNotFound("object not found", location=location, backend=self.backend) from None
        except PermissionError:
            raise RemoteAccessDenied("access denied", location=location, backend=self.backend) from None
        except TimeoutError:
            raise RemoteTimeout("timed out", location=location, backend=self.backend) from None
        except IsADirectoryError:
            raise RemoteObjectNotFound("path is a directory, not an object", location=location,
                                       backend=self.backend) from None
        except OSError as exc:
            raise RemoteStorageError(f"read failed: {type(exc).__name__}", location=location,
                                     backend=self.backend) from None

    def list(self, prefix: str = ""):
        """``find`` under the deepest directory of ``prefix``, filtered by the full prefix (a key
        prefix need not end at a directory)."""
        fs = self._filesystem()
        base = f"{self._root}/" if self._root else ""
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = (base + directory).rstrip("/") or self._root or "/"
        try:
            found = fs.find(top, detail=True)
        except FileNotFoundError:
            return
        except PermissionError:
            raise RemoteAccessDenied("access denied while listing", location=self.location(prefix),
                                     backend=self.backend) from None
        except OSError as exc:
            raise RemoteStorageError(f"listing failed: {type(exc).__name__}",
                                     location=self.location(prefix), backend=self.backend) from None
        strip = len(base)
        for path, info in found.items():
            if not path.startswith(base):
                continue
            key = path[strip:]
            if key.startswith(prefix) and info.get("type", "file") == "file":
                yield key, int(info.get("size") or 0)

    def __repr__(self) -> str:
        return f"FsspecStore(url={redact_url(self._url)!r})"


class FsspecFetcher(ObjectStoreFetcher):
    """The ``fsspec`` fetcher: :class:`FsspecStore` through the configured layout."""
    store_class = FsspecStore
