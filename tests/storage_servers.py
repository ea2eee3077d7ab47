"""Real storage servers for the storage tests, all on 127.0.0.1 with free ports, started and
stopped by the tests: moto's ThreadedMotoServer (S3), gcp-storage-emulator (GCS), Azurite
(Azure Blob, from node_modules/.bin — run ``npm install`` at the repo root), and a small
fault-injecting HTTP proxy that sits in front of any of them (403 / 503 / stalls).

Each ``Backend`` knows how to upload an object and how to configure a fetcher that reads it.
"""
from __future__ import annotations

import http.client
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AZURITE = os.path.join(ROOT, "node_modules", ".bin", "azurite-blob")
# Azurite's well-known development account (public, documented by Microsoft).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# Fake S3 credentials that the tests check never leak.
S3_KEY_ID = "AKIAKTSTESTKEYID0001"
S3_SECRET = "kts-s3-secret-Zm9vYmFyYmF6cXV4"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"server exited with {proc.returncode}: {out[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


# ------------------------------------------------------------------------------------------
# servers

class MotoS3:
    def __init__(self):
        from moto.server import ThreadedMotoServer
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.server.start()
        wait_port(self.port)
        return self

    def stop(self):
        self.server.stop()

    def client(self, endpoint: str | None = None):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name="us-east-1",
                            aws_access_key_id=S3_KEY_ID, aws_secret_access_key=S3_SECRET,
                            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))


class GcsEmulator:
    def __init__(self):
        from gcp_storage_emulator.server import create_server
        self.port = free_port()
        self.server = create_server("127.0.0.1", self.port, in_memory=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.server.start()
        wait_port(self.port)
        return self

    def stop(self):
        self.server.stop()

    def filesystem(self):
        from gcsfs.core import GCSFileSystem   # the plain one: no gRPC bucket-type probe
        return GCSFileSystem(endpoint_url=self.endpoint, token="anon", project="kts",
                             skip_instance_cache=True)


class Azurite:
    def __init__(self):
        if not os.path.exists(AZURITE):
            pytest.fail(f"Azurite is missing ({AZURITE}); run `npm install --no-audit --no-fund` in {ROOT}",
                        pytrace=False)
        self.port = free_port()
        self.proc = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT}"

    def start(self):
        self.proc = subprocess.Popen(
            [AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence",
             "--skipApiVersionCheck", "--loose", "--silent"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
        wait_port(self.port, 60, self.proc)
        return self

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def connection_string(self, endpoint: str | None = None) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
                f"BlobEndpoint={endpoint or self.endpoint};")

    def filesystem(self):
        import adlfs
        return adlfs.AzureBlobFileSystem(connection_string=self.connection_string(), skip_instance_cache=True)


# ------------------------------------------------------------------------------------------
# fault-injecting proxy

@dataclass
class Rule:
    """Applies to requests whose path contains ``match``: answer ``status`` with ``body``
    (``times`` times, None = always), or stall ``stall_s`` seconds before forwarding."""
    match: str
    status: int | None = None
    body: bytes = b""
    headers: dict = field(default_factory=dict)
    times: int | None = None
    stall_s: float = 0.0
    hits: int = 0


class FaultProxy:
    """A threaded HTTP/1.1 reverse proxy in front of ``upstream_port`` that applies rules.

    It counts every GET it sees by path (``gets``), so tests can check how many GETs a fetcher
    really sent.
    """

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.rules: list[Rule] = []
        self.gets: dict[str, int] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):   # quiet
                pass

            def _handle(self):
                path = self.path
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy.lock:
                    if self.command == "GET":
                        key = path.split("?", 1)[0]
                        proxy.gets[key] = proxy.gets.get(key, 0) + 1
                    rule = None
                    for r in proxy.rules:
                        if r.match in path and (r.times is None or r.hits < r.times):
                            r.hits += 1
                            rule = r
                            break
                if rule is not None and rule.stall_s:
                    proxy.stop_event.wait(rule.stall_s)
                if rule is not None and rule.status is not None:
                    self.send_response(rule.status)
                    for k, v in rule.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(rule.body)))
                    self.end_headers()
                    self.wfile.write(rule.body)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in ("connection", "keep-alive", "proxy-connection")}
                    conn.request(self.command, path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

        self.port = free_port()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.thread.start()
        wait_port(self.port)
        return self

    def stop(self):
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self):
        with self.lock:
            self.rules.clear()
            self.gets.clear()

    def add(self, rule: Rule) -> Rule:
        with self.lock:
            self.rules.append(rule)
        return rule

    def gets_for(self, fragment: str) -> int:
        with self.lock:
            return sum(n for p, n in self.gets.items() if fragment in p)


class Blackhole:
    """A listening socket whose accept queue is full and never drained: further TCP connects
    get no answer (Linux drops the SYN), so a client's connect timeout must fire."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers = []
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            self.fillers.append(c)
        time.sleep(0.1)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        for c in self.fillers:
            c.close()
        self.sock.close()


# ------------------------------------------------------------------------------------------
# backends: upload + fetcher options, one per storage kind

class Backend:
    name: str
    #: whether fault injection through a FaultProxy is possible
    proxied: bool = False
    proxy: FaultProxy | None = None

    def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    def options(self, *, via_proxy: bool = False) -> dict:
        raise NotImplementedError

    def segment_url(self, key: str, *, via_proxy: bool = False) -> str | None:
        return None


class S3Backend(Backend):
    name = "s3"
    proxied = True

    def __init__(self, moto: MotoS3, proxy: FaultProxy, bucket: str):
        self.moto, self.proxy, self.bucket = moto, proxy, bucket
        self.client = moto.client()
        self.client.create_bucket(Bucket=bucket)

    def put(self, key, data):
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def options(self, *, via_proxy=False):
        return {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": self.bucket,
                "remote.storage.s3.endpoint": self.proxy.endpoint if via_proxy else self.moto.endpoint,
                "remote.storage.s3.region": "us-east-1",
                "remote.storage.s3.access.key.id": S3_KEY_ID,
                "remote.storage.s3.secret.access.key": S3_SECRET}


class PresignedBackend(S3Backend):
    """boto3-generated presigned GET URLs against moto, served through the local proxy."""
    name = "presigned"

    def options(self, *, via_proxy=False):
        return {"remote.storage.fetcher": "presigned"}

    def segment_url(self, key, *, via_proxy=False):
        # Always through the local HTTP server in front of moto; the URL carries a real SigV4
        # signature (X-Amz-Signature=...) that must never leak.
        client = self.moto.client(self.proxy.endpoint)
        return client.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": key},
                                             ExpiresIn=3600)


class GcsBackend(Backend):
    name = "gcs"
    proxied = True

    def __init__(self, emulator: GcsEmulator, proxy: FaultProxy, bucket: str):
        self.emulator, self.proxy, self.bucket = emulator, proxy, bucket
        self.fs = emulator.filesystem()
        self.fs.mkdir(bucket)

    def put(self, key, data):
        self.fs.pipe(f"{self.bucket}/{key}", data)

    def options(self, *, via_proxy=False):
        return {"remote.storage.fetcher": "gcs", "remote.storage.gcs.bucket": self.bucket,
                "remote.storage.gcs.endpoint": self.proxy.endpoint if via_proxy else self.emulator.endpoint,
                "remote.storage.gcs.credentials": "anon", "remote.storage.gcs.project": "kts"}


class AzureBackend(Backend):
    name = "azure"
    proxied = True

    def __init__(self, azurite: Azurite, proxy: FaultProxy, container: str):
        self.azurite, self.proxy, self.container = azurite, proxy, container
        self.fs = azurite.filesystem()
        self.fs.mkdir(container)

    def put(self, key, data):
        self.fs.pipe(f"{self.container}/{key}", data)

    def options(self, *, via_proxy=False):
        endpoint = (f"{self.proxy.endpoint}/{AZURITE_ACCOUNT}" if via_proxy else self.azurite.endpoint)
        return {"remote.storage.fetcher": "azure", "remote.storage.azure.container": self.container,
                "remote.storage.azure.account.name": AZURITE_ACCOUNT,
                "remote.storage.azure.account.key": AZURITE_KEY,
                "remote.storage.azure.endpoint": endpoint}


class FileBackend(Backend):
    name = "file"

    def __init__(self, root: str):
        self.root = root

    def put(self, key, data):
        path = os.path.join(self.root, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def options(self, *, via_proxy=False):
        return {"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{self.root}"}


class MemoryBackend(Backend):
    name = "memory"

    def __init__(self, root: str):
        import fsspec
        self.root = root
        self.fs = fsspec.filesystem("memory")

    def put(self, key, data):
        self.fs.pipe(f"{self.root}/{key}", data)

    def options(self, *, via_proxy=False):
        return {"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"memory://{self.root}"}


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


# ------------------------------------------------------------------------------------------
# a user's own fetcher, for remote.storage.fetcher.class tests

from kafka_tiered_source.storage.fetcher import ObjectStoreFetcher  # noqa: E402


class DictFetcher(ObjectStoreFetcher):
    """Serves objects from a process-wide dict (what a user's in-house store adapter looks like);
    ``remote.storage.custom.store`` names the dict."""
    STORES: dict[str, dict[str, bytes]] = {}
    backend = "dict"

    def _get_object_range(self, key, start, end):
        store = self.STORES[self.config.require("remote.storage.custom.store")]
        if key not in store:
            from kafka_tiered_source.errors import RemoteObjectNotFound
            raise RemoteObjectNotFound("no such key", location=key, backend=self.backend)
        data = store[key]
        return data[start:] if end is None else data[start:end]


def rm_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
