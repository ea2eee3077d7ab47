"""The ``azure`` fetcher: Azure Blob Storage through adlfs (and its azure-storage-blob client).

Credentials: ``remote.storage.azure.connection.string``, or ``.account.name`` with
``.account.key`` / ``.sas.token`` (anonymous otherwise); ``.endpoint`` points at Azurite or a
private endpoint.  adlfs builds and owns the async service client; the ranged download is issued
here with the SDK's retries off (``retry_total=0``) and our timeouts, so every attempt is seen.
Parts up to 32 MiB are one GET (the SDK's ``max_single_get_size``).
"""
from __future__ import annotations

from ..errors import RemoteAccessDenied, RemoteConnectionError, RemoteObjectNotFound, RemoteTimeout
from .fetcher import ObjectStoreFetcher
from .store import ByteRangeStore, classify_status


class AzureStore(ByteRangeStore):
    backend = "azure"
    requires = ("adlfs", "azure.storage.blob")

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._container = self.config.require("remote.storage.azure.container")
        self._fs = None

    def _filesystem(self):
        if self._fs is None:
            import adlfs
            c = self.config
            conn = c.option("remote.storage.azure.connection.string")
            name = c.option("remote.storage.azure.account.name")
            endpoint = c.option("remote.storage.azure.endpoint")
            key = c.option("remote.storage.azure.account.key")
            sas = c.option("remote.storage.azure.sas.token")
            if not conn and endpoint:
                if not name:
                    c.require("remote.storage.azure.account.name")
                proto = "http" if endpoint.startswith("http://") else "https"
                conn = f"DefaultEndpointsProtocol={proto};AccountName={name};BlobEndpoint={endpoint.rstrip('/')};"
                if key:
                    conn += f"AccountKey={key};"
                elif sas:
                    conn += f"SharedAccessSignature={sas.lstrip('?')};"
            if conn:
                fs = adlfs.AzureBlobFileSystem(connection_string=conn, skip_instance_cache=True)
            else:
                c.require("remote.storage.azure.account.name")
                fs = adlfs.AzureBlobFileSystem(account_name=name, account_key=key, sas_token=sas,
                                               skip_instance_cache=True)
            with self._lock:
                if self._fs is None:
                    self._fs = fs
        return self._fs

    def location(self, key: str) -> str:
        name = self.config.option("remote.storage.azure.account.name") or "account"
        return f"az://{name}/{self._container}/{key}"

    async def _aget(self, fs, key, start, end):
        c = self.config
        async with fs.service_client.get_blob_client(container=self._container, blob=key) as bc:
            stream = await bc.download_blob(
                offset=start, length=None if end is None else end - start, max_concurrency=1,
                retry_total=0, connection_timeout=c.connect_timeout_ms / 1000.0,
                read_timeout=c.read_timeout_ms / 1000.0)
            return await stream.readall()

    def get_range(self, key: str, start: int, end: int | None) -> bytes:
        return self._run(self.location(key), lambda fs: self._aget(fs, key, start, end))

    def stat(self, key: str) -> int:
        """The blob's size from its properties."""
        async def size(fs):
            async with fs.service_client.get_blob_client(container=self._container, blob=key) as bc:
                props = await bc.get_blob_properties(
                    retry_total=0, connection_timeout=self.config.connect_timeout_ms / 1000.0,
                    read_timeout=self.config.read_timeout_ms / 1000.0)
                return int(props.size)
        return self._run(self.location(key), size)

    def _run(self, location: str, make):
        """Run ``make(fs)``'s coroutine on adlfs's loop, its failures mapped onto the error table."""
        from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError,
                                           ResourceNotFoundError, ServiceRequestError,
                                           ServiceRequestTimeoutError, ServiceResponseError,
                                           ServiceResponseTimeoutError)
        from fsspec.asyn import sync
        fs = self._filesystem()
        try:
            return sync(fs.loop, make, fs)
        except ResourceNotFoundError:
            raise RemoteObjectNotFound("object not found (404)", location=location, backend=self.backend) from None
        except ClientAuthenticationError:
            raise RemoteAccessDenied("access denied (403 AuthenticationFailed)", location=location,
                                     backend=self.backend) from None
        except HttpResponseError as exc:
            status = exc.status_code or 0
            code = getattr(exc, "error_code", None)   # a StorageErrorCode enum (str subclass)
            code = str(getattr(code, "value", code)) if code is not None else None
            mapped = classify_status(status, code, str(exc.reason or ""), location=location,
                                     backend=self.backend)
            if mapped is None:
                return b""
            raise mapped from None
        except (ServiceRequestTimeoutError, ServiceResponseTimeoutError) as exc:
            kind = "connect" if isinstance(exc, ServiceRequestTimeoutError) else "read"
            ms = self.config.connect_timeout_ms if kind == "connect" else self.config.read_timeout_ms
            raise RemoteTimeout(f"{kind} timeout after {ms} ms", location=location,
                                backend=self.backend) from None
        except (ServiceRequestError, ServiceResponseError, OSError) as exc:
            raise RemoteConnectionError(f"connection failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None

    def list(self, prefix: str = ""):
        """``list_blobs(name_starts_with=prefix)`` on the container, page by page."""
        from azure.core.exceptions import AzureError, HttpResponseError
        from fsspec.asyn import sync
        fs = self._filesystem()
        location = self.location(prefix)

        async def collect():
            out = []
            async with fs.service_client.get_container_client(self._container) as cc:
                async for blob in cc.list_blobs(name_starts_with=prefix or None):
                    out.append((blob.name, int(blob.size or 0)))
            return out
        try:
            found = sync(fs.loop, collect)
        except HttpResponseError as exc:
            raise (classify_status(exc.status_code or 0, None, str(exc.reason or ""),
                                   location=location, backend=self.backend)
                   or RemoteConnectionError("listing failed", location=location,
                                            backend=self.backend)) from None
        except (AzureError, OSError) as exc:
            raise RemoteConnectionError(f"listing failed: {type(exc).__name__}", location=location,
                                        backend=self.backend) from None
        yield from found

    def __repr__(self) -> str:
        c = self.config
        return (f"AzureStore(account={c.option('remote.storage.azure.account.name')!r}, "
                f"container={self._container!r}, layout={c.layout!r}, prefix={c.prefix!r})")


class AzureFetcher(ObjectStoreFetcher):
    """The ``azure`` fetcher: :class:`AzureStore` through the configured layout."""
    store_class = AzureStore
