"""Where the metadata catalog keeps its snapshots between processes (:mod:`.catalog`).

One JSON document per metadata partition (the replayed state in columns,
:mod:`.remote_log_columns`), named by what it is a snapshot of::

    <cache dir>/remote-log-metadata/<cluster id>/<metadata topic>-<its topic id>/<partition>.json

so a snapshot is only ever found for the log it was read from.  ``<cache dir>`` is the option
``remote.log.metadata.cache.dir``: a local path, or an fsspec URL (``s3://bucket/kt-cache``,
``gs://...``, ``abfs://...``, ``/dbfs/...`` as a path) that several drivers share; by default
``$KAFKA_TIERED_CACHE_DIR``, else the user's cache directory (``~/.cache/kafka-tiered`` on
Linux, ``~/Library/Caches/kafka-tiered`` on macOS, ``%LOCALAPPDATA%\\kafka-tiered`` on
Windows); ``none`` keeps the catalog in the process only.

Writers never leave a half-written snapshot where a reader looks: on a local disk the document
is written to a file of its own and renamed over the old one; on an object store one PUT
replaces the object whole.  Each document carries the SHA-256 of its content, so whatever else
went wrong (a torn write on a file system without atomic renames, an edited or truncated file)
is found on load: :class:`SnapshotError`, and the catalog rescans.  Concurrent writers of the
same snapshot each write a whole, consistent one; the last one stays.  A snapshot that cannot be
written costs the next process a rescan, never a plan: saving warns once per location.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from ..logs import get_logger
from ..redact import redact_url

log = get_logger(__name__)

OPTION = "remote.log.metadata.cache.dir"
ENV = "KAFKA_TIERED_CACHE_DIR"
OFF = "none"
# 2: the state in columns (remote_log_columns), not an object per copy
FORMAT = 2
_SAFE = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
_warned: set[str] = set()


class SnapshotError(Exception):
    """A snapshot that cannot be used: why, in words."""


def default_cache_dir() -> str:
    """``$KAFKA_TIERED_CACHE_DIR``, else ``kafka-tiered`` under the user's cache directory."""
    given = os.environ.get(ENV)
    if given:
        return given
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        base = os.path.join(home, "Library", "Caches")
    elif os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return os.path.join(base, "kafka-tiered")


def _component(value: str) -> str:
    """A path component: the value when it is plain (Kafka's ids and topic names are), else its
    hex (never a path of its own)."""
    return value if _SAFE.match(value) and value not in (".", "..") else "x" + value.encode().hex()


class SnapshotStore:
    """Snapshots under ``location`` (a path or an fsspec URL)."""

    def __init__(self, location: str):
        self.location = location.rstrip("/") if "://" in location else location

    @classmethod
    def from_option(cls, value: str | None) -> "SnapshotStore | None":
        """The store the option names (None: the default; ``none``: no store)."""
        if value is not None and value.strip().lower() == OFF:
            return None
        return cls(value or default_cache_dir())

    def __repr__(self) -> str:
        return f"SnapshotStore({self.shown!r})"

    @property
    def shown(self) -> str:
        """The location as logs may show it (no user-info, no query string)."""
        return (redact_url(self.location) or "") if "://" in self.location else self.location

    def shown_path(self, path: str) -> str:
        """``path`` as logs may show it."""
        return path if self.local else (redact_url(path) or "")

    @property
    def local(self) -> bool:
        return "://" not in self.location or self.location.startswith("file://")

    def path(self, cluster_id: str, topic: str, topic_id: str, partition: int) -> str:
        """Where the snapshot of that metadata partition is: a local path, or a URL."""
        rel = ("remote-log-metadata", _component(cluster_id), _component(f"{topic}-{topic_id}"),
               f"{int(partition)}.json")
        if self.local:
            root = self.location[len("file://"):] if self.location.startswith("file://") else self.location
            return os.path.join(os.path.expanduser(root), *rel)
        return "/".join((self.location, *rel))

    def _filesystem(self, url: str) -> tuple[Any, str]:
        import fsspec
        return fsspec.core.url_to_fs(url)

    # -- reading
    def load(self, path: str) -> dict | None:
        """The document at ``path``; None when there is none; :class:`SnapshotError` when it
        cannot be read or is not a whole snapshot."""
        try:
            if self.local:
                with open(path, "rb") as f:
                    raw = f.read()
            else:
                fs, where = self._filesystem(path)
                raw = fs.cat_file(where)
        except FileNotFoundError:
            return None
        except Exception as exc:   # any backend's failure (no such fsspec backend installed, ...)
            raise SnapshotError(f"cannot be read ({type(exc).__name__}: {exc})") from None
        return parse(raw)

    # -- writing
    def save(self, path: str, doc: dict) -> bool:
        """Write ``doc`` (:func:`seal` adds its checksum) so no reader ever sees it half
        written.  False, with one warning per location, when it cannot be written."""
        data = seal(doc)
        try:
            if self.local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                import uuid
                tmp = f"{path}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
                try:
                    with open(tmp, "wb") as f:
                        f.write(data)
                    os.replace(tmp, path)
                finally:
                    if os.path.exists(tmp):
                        os.remove(tmp)
            else:
                fs, where = self._filesystem(path)
                fs.makedirs(where.rsplit("/", 1)[0], exist_ok=True)
                fs.pipe_file(where, data)      # one PUT: the object is replaced whole
            return True
        except Exception as exc:   # any backend's failure: a rescan later, never a failed plan
            if self.location not in _warned:
                _warned.add(self.location)
                log.warning("kafka-tiered: cannot write metadata catalog snapshots under %s (%s: %s); "
                            "later processes will rescan __remote_log_metadata (set %s to a writable "
                            "location, or to 'none')", self.shown, type(exc).__name__, exc, OPTION)
            return False


_HEAD = b'{"sha256":"'
_MID = b'","snapshot":'


def seal(doc: dict) -> bytes:
    """``doc`` as JSON with the SHA-256 of its content: ``{"sha256":...,"snapshot":...}``,
    the content encoded once and hashed as written."""
    import hashlib   # here: a process that keeps no snapshot (most plans) does not load OpenSSL
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return b"".join((_HEAD, hashlib.sha256(body).hexdigest().encode(), _MID, body, b"}"))


def parse(raw: bytes) -> dict:
    """The snapshot in ``raw``, checked whole (:class:`SnapshotError` says what is wrong)."""
    import hashlib
    start = len(_HEAD) + 64 + len(_MID)
    if raw[:len(_HEAD)] == _HEAD and raw[start - len(_MID):start] == _MID and raw[-1:] == b"}":
        # as seal() writes it: the content's bytes are hashed as they are
        body = raw[start:-1]
        digest = raw[len(_HEAD):len(_HEAD) + 64].decode("ascii", "replace")
    else:            # any other spelling of the same JSON: the content as seal() would encode it
        try:
            outer = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SnapshotError(f"is not JSON ({exc})") from None
        if not isinstance(outer, dict) or not isinstance(outer.get("snapshot"), dict):
            raise SnapshotError("is not a snapshot document")
        body = json.dumps(outer["snapshot"], sort_keys=True, separators=(",", ":")).encode()
        digest = str(outer.get("sha256"))
    if hashlib.sha256(body).hexdigest() != digest:
        raise SnapshotError("does not match its checksum (torn or edited)")
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SnapshotError(f"is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SnapshotError("is not a snapshot document")
    if doc.get("format") != FORMAT:
        raise SnapshotError(f"has format {doc.get('format')!r}, this version reads {FORMAT}")
    return doc
