"""Real storage servers for the storage tests, all on 127.0.0.1 with free ports, started and
stopped by the tests: moto's ThreadedMotoServer (S3), gcp-storage-emulator (GCS), Azurite
(Azure Blob, from node_modules/.bin — run ``npm install`` at the repo root), and a small
HTTP proxy that sits in front of any of them, injects faults (403 / 503 / stalls / damaged
bodies) and records the requests it answered.

Each ``Backend`` knows how to upload an object and how to configure a fetcher that reads it.
"""
from __future__ import annotations

import dataclasses
import http.client
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

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
        import logging
        logging.getLogger("werkzeug").setLevel(logging.ERROR)   # moto's access log: a line per request
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
            # in-memory, nothing to save: Azurite's graceful close waits for clients' idle
            # keep-alive connections (10 s at the end of the conformance suite), so not for long
            self.proc.terminate()
            try:
                self.proc.wait(1)
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
# fault-injecting, request-recording proxy

#: S3's answer to too many requests, what :meth:`FaultProxy.fail` answers with (status 503).
SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b'<Message>Please reduce your request rate.</Message></Error>')

#: What ``Rule.damage`` can do to a body (see :class:`Rule`).
DAMAGES = ("close-early", "short-length", "short-length-checksum", "corrupt")

_HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection")
_NOT_COPIED_BACK = ("connection", "keep-alive", "transfer-encoding", "content-length")


def _half(n: int) -> int:
    return n // 2


@dataclass
class Rule:
    """Applies to requests whose path (query included) contains ``match``, of any method or only
    of ``method``, ``times`` times (None = always); a request takes the first rule that applies
    and adds one to its ``hits``.  The rule stalls ``stall_s`` seconds, then:

    * with a ``status``, answers it itself, with ``body`` and ``headers``;
    * with a ``damage``, forwards the request and damages the body of a successful (< 300)
      answer, of which it keeps ``keep(len(body))`` bytes (other answers pass unchanged):

      - ``"close-early"``: promises the real Content-Length, sends the kept bytes, then closes
        the connection (a body cut off in transit);
      - ``"short-length"``: a well-formed answer whose Content-Length (and body) hold only the
        kept bytes, without the object checksum headers (a store or middlebox that answers
        fewer bytes than asked for, as real S3 sends no checksum for a ranged GET);
      - ``"short-length-checksum"``: the same, keeping the store's ``x-amz-checksum-*``
        headers, which then no longer match the body;
      - ``"corrupt"``: the whole body, one byte flipped at ``keep(len)``, no checksum headers:
        only the decoder's CRC-32C check can tell;
    * with neither, forwards the request untouched (it only counts, or lets ``times``
      requests past the rules after it).
    """
    match: str
    status: int | None = None
    body: bytes = b""
    headers: dict = field(default_factory=dict)
    times: int | None = None
    stall_s: float = 0.0
    method: str | None = None
    damage: str | None = None
    keep: Callable[[int], int] = _half
    hits: int = 0

    def __post_init__(self):
        if self.damage is not None and (self.damage not in DAMAGES or self.status is not None):
            raise ValueError(f"damage must be one of {DAMAGES} (and without a status), got {self.damage!r}")

    def applies(self, method: str, path: str) -> bool:
        return (self.match in path and (self.method is None or self.method == method)
                and (self.times is None or self.hits < self.times))


@dataclasses.dataclass(frozen=True)
class Answer:
    """A request the proxy answered: its ``Range`` header, when it arrived (``start``) and when
    the answer's body began to be written (``answering``: no client can have read the whole
    answer before then, so a request it sent on reading it arrives later), and when it was
    written (``end``)."""
    method: str
    path: str
    range: str | None
    status: int
    sent: int
    start: float
    answering: float
    end: float

    @property
    def first_byte(self) -> int:
        return int(self.range.split("=", 1)[1].split("-", 1)[0]) if self.range else 0


class _ProxyServer(http.server.ThreadingHTTPServer):
    """A client that hangs up before its answer is written (a cancelled read, a killed task) is
    no error of the proxy's: it is not printed over the test's output."""

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy: "FaultProxy"     # set on the subclass each FaultProxy makes

    def log_message(self, *args):   # quiet
        pass

    def _handle(self):
        proxy = self.proxy
        start = time.monotonic()
        self.writing = False
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request_body = self.rfile.read(length) if length else b""
            rule = proxy._arrived(self.command, self.path)
            if rule is not None and rule.stall_s:
                proxy.stop_event.wait(rule.stall_s)
            if rule is not None and rule.status is not None:
                status, sent = rule.status, self._answer(rule)
            else:
                status, sent = self._forward(request_body, rule)
            end = time.monotonic()
            with proxy.lock:
                proxy.answers.append(Answer(self.command, self.path.split("?", 1)[0], self.headers.get("Range"),
                                            status, len(sent), start, self.answering_at, end))
        finally:
            if self.writing:
                with proxy.lock:
                    proxy.writing -= 1
                    proxy.recorded.notify_all()

    def _answering(self) -> None:
        """The body is about to go out: from here the client may have its answer before this
        thread records it, so :attr:`FaultProxy.log` waits for the record."""
        self.answering_at = time.monotonic()
        with self.proxy.lock:
            self.proxy.writing += 1
        self.writing = True

    def _answer(self, rule: Rule) -> bytes:
        self.send_response(rule.status)
        for k, v in rule.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rule.body)))
        self.end_headers()
        self._answering()
        self.wfile.write(rule.body)
        return rule.body

    def _forward(self, request_body: bytes, rule: Rule | None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.proxy.upstream_port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            conn.request(self.command, self.path, body=request_body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        damage = rule.damage if rule is not None and resp.status < 300 else None
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() in _NOT_COPIED_BACK:
                continue
            if damage in ("short-length", "corrupt") and k.lower().startswith("x-amz-checksum"):
                continue
            self.send_header(k, v)
        length = len(data)
        if damage is not None:
            keep = rule.keep(len(data))
            if damage == "corrupt":
                data = data[:keep] + bytes([data[keep] ^ 0xFF]) + data[keep + 1:]
            else:
                data = data[:keep]
                if damage != "close-early":
                    length = keep
        self.send_header("Content-Length", str(length))
        if damage == "close-early":
            self.send_header("Connection", "close")
        self.end_headers()
        sent = b"" if self.command == "HEAD" else data
        self._answering()
        self.wfile.write(sent)
        if damage == "close-early":
            self.wfile.flush()
            self.close_connection = True
        return resp.status, sent

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle


class FaultProxy:
    """A threaded HTTP/1.1 reverse proxy in front of ``upstream_port`` that applies rules
    (:meth:`add`, :meth:`fail`) and records what it answered.

    ``answers`` holds one :class:`Answer` per request answered (the path without its query;
    times from ``time.monotonic()``); ``log`` gives each as ``(method, path, status, body bytes
    sent, start, end)``: :meth:`gets` and :meth:`served_bytes` read it, so tests can hold a reader's
    counts to what the server really served.  :meth:`gets_for` counts GETs by path as they
    arrive (a stalled GET counts before it is answered).
    """

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.rules: list[Rule] = []
        self.answers: list[Answer] = []
        self.arrivals: dict[str, int] = {}      # GETs by path without the query
        self.lock = threading.Lock()
        self.writing = 0                        # answers being written, not yet in ``answers``
        self.recorded = threading.Condition(self.lock)
        self.stop_event = threading.Event()
        self.port = free_port()
        handler = type("Handler", (_ProxyHandler,), {"proxy": self})
        self.httpd = _ProxyServer(("127.0.0.1", self.port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def log(self) -> list[tuple]:
        """``(method, path, status, body bytes sent, start, end)`` of each answer, in order; an
        answer whose body is going out is waited for (up to 10 s), so a client that has read its
        answer finds it here."""
        with self.lock:
            self.recorded.wait_for(lambda: self.writing == 0, timeout=10)
            return [(a.method, a.path, a.status, a.sent, a.start, a.end) for a in self.answers]

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
            self.answers.clear()
            self.arrivals.clear()

    def add(self, rule: Rule) -> Rule:
        with self.lock:
            self.rules.append(rule)
        return rule

    def fail(self, match: str, times: int) -> Rule:
        """Answer the next ``times`` GETs whose path contains ``match`` with an S3 503 SlowDown."""
        return self.add(Rule(match=match, status=503, body=SLOW_DOWN, times=times, method="GET",
                             headers={"Content-Type": "application/xml"}))

    def _arrived(self, method: str, path: str) -> Rule | None:
        """Count a request in and take the rule that applies to it, if any."""
        with self.lock:
            if method == "GET":
                key = path.split("?", 1)[0]
                self.arrivals[key] = self.arrivals.get(key, 0) + 1
            rule = next((r for r in self.rules if r.applies(method, path)), None)
            if rule is not None:
                rule.hits += 1
            return rule

    def gets_for(self, fragment: str) -> int:
        """GETs that have arrived so far whose path contains ``fragment``."""
        with self.lock:
            return sum(n for p, n in self.arrivals.items() if fragment in p)

    def gets(self, match: str = "") -> list[tuple]:
        """The ``log`` entries of GETs answered whose path contains ``match``."""
        return [e for e in self.log if e[0] == "GET" and match in e[1]]

    def served_bytes(self, match: str = "") -> int:
        """Object bytes of successful GETs (error bodies are not object data)."""
        return sum(e[3] for e in self.gets(match) if 200 <= e[2] < 300)


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


from kafka_tiered_source.storage.store import ByteRangeStore  # noqa: E402


class DictStore(ByteRangeStore):
    """The same in-house store as a byte-range store, the shape a third party writes now: only
    the bytes (GET, list, stat); layouts, retries and parts are the library's."""
    backend = "dict"

    def _objects(self) -> dict:
        return DictFetcher.STORES[self.config.require("remote.storage.custom.store")]

    def get_range(self, key, start, end):
        from kafka_tiered_source.errors import RemoteObjectNotFound
        data = self._objects().get(key)
        if data is None:
            raise RemoteObjectNotFound("no such key", location=key, backend=self.backend)
        return data[start:] if end is None else data[start:end]

    def stat(self, key):
        return len(self.get_range(key, 0, None))

    def list(self, prefix=""):
        return [(k, len(v)) for k, v in list(self._objects().items()) if k.startswith(prefix)]


from kafka_tiered_source.storage.fsspec_fetcher import FsspecStore  # noqa: E402


class LoggedStore(FsspecStore):
    """The fsspec store with every ranged GET recorded, ``(key, start, end)``, in :attr:`GETS`
    (process-wide): what storage was asked for, so a test can tell which object served which
    offsets without asking the code under test."""
    GETS: list[tuple[str, int, int | None]] = []

    def get_range(self, key, start, end):
        LoggedStore.GETS.append((key, start, end))
        return super().get_range(key, start, end)


def rm_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
