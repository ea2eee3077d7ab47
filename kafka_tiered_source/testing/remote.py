"""The embedded broker's remote store: where tier() writes segment objects and remote reads come from.

``open_remote_store(url, ...)`` understands ``file:///dir``, ``memory://name`` (both through
fsspec) and ``s3://bucket/prefix`` (boto3, with endpoint, region and credentials, so a moto server
on 127.0.0.1 works).  Keys are relative to the URL's root/prefix; byte ranges are half-open
``[start, end)`` and converted to HTTP's inclusive Range only in the S3 backend.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from ..dataclass import dataclass, field
from ..errors import ConfigError, RemoteObjectNotFound, RemoteStorageError
from ..redact import Secret, redact_url


@dataclass(frozen=True)
class S3Options:
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: Secret | None = field(default=None, repr=False)
    session_token: Secret | None = field(default=None, repr=False)
    presign_expiry_s: int = 3600


class RemoteStore:
    """Put/get/ranged-get/delete of objects under one root."""

    url: str
    backend: str

    def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of the object (``end`` None = to the end)."""
        raise NotImplementedError

    def size(self, key: str) -> int:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def exists(self, key: str) -> bool:
        raise NotImplementedError

    def list(self, prefix: str = "") -> list[str]:
        raise NotImplementedError

    def presign(self, key: str) -> str | None:
        """A URL that lets a client GET the object directly; None where the backend has none."""
        return None

    def location(self, key: str) -> str:
        """Where ``key`` lives, for clients and error messages (no secrets)."""
        return f"{self.url.rstrip('/')}/{key}"

    def _missing(self, key: str) -> RemoteObjectNotFound:
        return RemoteObjectNotFound("object not found", location=self.location(key), backend=self.backend)


class FsspecStore(RemoteStore):
    def __init__(self, url: str):
        import fsspec
        parts = urlsplit(url)
        self.url = url
        self.backend = parts.scheme
        self.fs = fsspec.filesystem(parts.scheme)
        self.root = (parts.netloc + parts.path) if parts.scheme == "memory" else parts.path
        self.root = self.root.rstrip("/") or "/"
        if parts.scheme == "file":
            self.fs.makedirs(self.root, exist_ok=True)

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def put(self, key, data):
        p = self._path(key)
        self.fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
        with self.fs.open(p, "wb") as f:
            f.write(data)

    def get(self, key, start=0, end=None):
        p = self._path(key)
        try:
            if start == 0 and end is None:
                return self.fs.cat_file(p)
            size = self.fs.size(p)
            end = size if end is None else min(end, size)
            if start >= end:
                return b""
            return self.fs.cat_file(p, start=start, end=end)
        except FileNotFoundError:
            raise self._missing(key) from None

    def size(self, key):
        try:
            return self.fs.size(self._path(key))
        except FileNotFoundError:
            raise self._missing(key) from None

    def delete(self, key):
        try:
            self.fs.rm_file(self._path(key))
        except FileNotFoundError:
            pass

    def exists(self, key):
        return self.fs.exists(self._path(key))

    def list(self, prefix=""):
        base = self.root.rstrip("/") + "/"
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        out = []
        for p in found:
            p = "/" + p.lstrip("/") if base.startswith("/") else p
            rel = p[len(base):] if p.startswith(base) else p
            if rel.startswith(prefix):
                out.append(rel)
        return sorted(out)


class S3Store(RemoteStore):
    backend = "s3"

    def __init__(self, url: str, options: S3Options):
        import boto3
        from botocore.config import Config
        parts = urlsplit(url)
        if not parts.netloc:
            raise ConfigError(f"remote storage URL {redact_url(url)!r} names no bucket", option="remote_storage")
        self.url = url
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        self.options = options
        self.client = boto3.client(
            "s3", endpoint_url=options.endpoint_url, region_name=options.region or "us-east-1",
            aws_access_key_id=options.access_key_id,
            aws_secret_access_key=options.secret_access_key.get() if options.secret_access_key else None,
            aws_session_token=options.session_token.get() if options.session_token else None,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}))

    def _key(self, key):
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, key, fn, **kw):
        from botocore.exceptions import ClientError
        try:
            return fn(Bucket=self.bucket, Key=self._key(key), **kw)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise self._missing(key) from None
            raise RemoteStorageError(f"S3 error {code}", location=self.location(key), backend="s3") from None

    def put(self, key, data):
        self._call(key, self.client.put_object, Body=data)

    def get(self, key, start=0, end=None):
        if end is not None and start >= end:
            return b""
        kw = {}
        if start or end is not None:
            # HTTP ranges are inclusive: [start, end) -> bytes=start-(end-1)
            kw["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        return self._call(key, self.client.get_object, **kw)["Body"].read()

    def size(self, key):
        return self._call(key, self.client.head_object)["ContentLength"]

    def delete(self, key):
        self._call(key, self.client.delete_object)

    def exists(self, key):
        try:
            self.size(key)
            return True
        except RemoteObjectNotFound:
            return False

    def list(self, prefix=""):
        full = self._key(prefix)
        out = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
            for o in page.get("Contents", []):
                k = o["Key"]
                out.append(k[len(self.prefix) + 1:] if self.prefix else k)
        return sorted(out)

    def presign(self, key):
        return self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self._key(key)},
            ExpiresIn=self.options.presign_expiry_s)


def open_remote_store(url: str, s3: S3Options | None = None) -> RemoteStore:
    scheme = urlsplit(url).scheme
    if scheme in ("file", "memory"):
        return FsspecStore(url)
    if scheme == "s3":
        return S3Store(url, s3 or S3Options())
    raise ConfigError(f"remote storage URL {redact_url(url)!r}: scheme {scheme!r} is not one of "
                      "file, memory, s3", option="remote_storage")
