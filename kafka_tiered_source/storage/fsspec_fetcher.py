"""The ``fsspec`` fetcher: any URL fsspec knows (``file://``, ``memory://``, ``http(s)://`` ...).

``remote.storage.fsspec.url`` is the root; object keys from the layout are joined under it.
"""
from __future__ import annotations

import os
import stat
from typing import Any

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
        self._fs: Any = None      # an fsspec filesystem, or _LocalFiles for a file:/// root

    def _filesystem(self):
        if self._fs is None:
            with self._lock:
                if self._fs is None and _local_root(self._url) is not None:
                    self._root = _local_root(self._url) or ""
                    self._fs = _LocalFiles()
                elif self._fs is None:
                    import fsspec.core
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


def _local_root(url: str) -> str | None:
    """The directory of a plain ``file:///...`` URL (no chained protocol, no host), else None."""
    if not url.startswith("file:///") or "::" in url:
        return None
    return url[len("file://"):].rstrip("/")


class _LocalFiles:
    """What :class:`FsspecStore` asks of fsspec's local filesystem, through the OS: a ranged read
    and a stat are one ``open``/``read`` and one ``stat`` either way, and fsspec's import (asyncio,
    its compression registry: ~70 ms in a new process) is left to the processes that list (the listing locator)
    or read other URLs.  Errors are the ones fsspec's local filesystem raises."""

    def cat_file(self, path: str, start: int = 0, end: int | None = None):
        """Bytes ``[start, end)`` of the file: a ``bytes`` copy, or for a range of at least
        :data:`MAP_MIN_BYTES` a read-only ``memoryview`` of the file mapped into memory (see
        :func:`_mapped_range`)."""
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if start < 0 or (end is not None and end < 0):   # fsspec's from-the-end positions
                start = max(0, size + start) if start < 0 else start
                end = max(0, size + end) if end is not None and end < 0 else end
            stop = size if end is None else min(end, size)
            if stop - start >= MAP_MIN_BYTES:
                return _mapped_range(f.fileno(), start, stop)
            f.seek(start)
            return f.read() if end is None else f.read(max(0, end - start))

    def info(self, path: str) -> dict:
        st = os.stat(path)
        return {"type": "file" if stat.S_ISREG(st.st_mode) else "directory", "size": st.st_size}

    def find(self, path: str, detail: bool = False):
        import fsspec
        return fsspec.filesystem("file").find(path, detail=detail)


#: Ranges of a local file at least this long are mapped, not copied (:func:`_mapped_range`).
MAP_MIN_BYTES = 1 << 20


def _mapped_range(fd: int, start: int, stop: int) -> memoryview:
    """``[start, stop)`` of the open file ``fd`` as a read-only view of a shared mapping, its
    pages mapped at once (``MAP_POPULATE``): a segment's part (16 MiB by default) is read
    straight from the page cache, without the copy into a new ``bytes`` object and the page
    faults and zeroing of that object's fresh memory (a quarter of a Spark task's decoding CPU on
    uncompressed data, ``benchmarks/spark_read.py``).  The decoder checks every batch's CRC-32C
    over these bytes as over a copy.  The mapping lives as long as a view of it does and is
    unmapped with the last (the part is done); the file may be unlinked meanwhile (retention),
    which keeps its pages.  Tiered segment objects are written once and never rewritten in place
    (RemoteLogManager.copyLogSegment uploads a finished segment), so nothing truncates them
    under a reader."""
    import mmap
    base = start - start % mmap.ALLOCATIONGRANULARITY
    m = mmap.mmap(fd, stop - base, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                  prot=mmap.PROT_READ, offset=base)
    return memoryview(m)[start - base:]


class FsspecFetcher(ObjectStoreFetcher):
    """The ``fsspec`` fetcher: :class:`FsspecStore` through the configured layout."""
    store_class = FsspecStore
