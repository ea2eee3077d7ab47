"""Object-store stand-ins for the benchmarks: a range-capable S3-compatible store over a
directory, and a TCP proxy that makes any HTTP server behave like S3 over the network.

* ``store``: serves ``{root}/{key}`` as ``s3://{bucket}/{key}`` (path-style): ``GetObject``
  with or without ``Range``, ``HeadObject``, ``ListObjectsV2``.  Enough S3 for boto3 readers
  (this project's ``s3`` fetcher and the embedded broker's remote store).  It exists because
  moto materialises the whole object for every ranged GET, so with many ranged reads of big
  objects moto, not the reader, is what gets measured (see BENCHMARKS.md, "Fetch").  Writes are
  not served: the benchmark tiers to ``file://{root}`` and then serves that directory.
* ``proxy``: a loopback TCP proxy in front of any HTTP/1.1 server.  Every request waits
  ``--latency-ms`` (default 30) before its first response byte, and every connection is capped
  at ``--mbps`` (default 90 MB/s, 10**6 bytes) — roughly one S3 GET stream — so range size and
  concurrency matter as they do against S3.  It counts requests by method and response bytes;
  ``GET /stats`` and ``POST /reset`` on ``--control-port`` read and zero the counters (JSON).

    python -m benchmarks.latency_proxy store --root DIR --bucket tiered --port 9000
    python -m benchmarks.latency_proxy proxy --upstream 127.0.0.1:9000 --port 9001 --control-port 9002

Everything binds 127.0.0.1.  Each runs in its own process in the benchmarks, so its CPU does
not compete with the measured code for one interpreter lock.
"""
from __future__ import annotations

import argparse
import email.utils
import hashlib
import http.server
import json
import os
import socket
import socketserver
import sys
import threading
import time
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

HTTP_METHODS = (b"GET", b"HEAD", b"PUT", b"POST", b"DELETE", b"OPTIONS", b"PATCH")
CHUNK = 64 * 1024
# Responses move in larger pieces: the proxy stands in for a network, and at 64 KiB per
# recv/sendall/sleep round it spent ~0.45 CPU-s per 400 MB on the client's own two cores (a real
# store costs the reader nothing).  Pacing is unchanged: the connection's rate is kept by
# sleeping until each piece is due, so a 256 KiB piece at 90 MB/s is a 2.9 ms step.
RESPONSE_CHUNK = 256 * 1024


# ---------------------------------------------------------------------------------------------
# the store

class _Threading(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def make_store(root: str, bucket: str, host: str = "127.0.0.1", port: int = 0) -> http.server.HTTPServer:
    """An HTTP server answering the S3 calls a reader makes, for objects under ``root``."""
    root = os.path.abspath(root)

    class Store(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"          # keep-alive, as boto3's connection pool expects

        def log_message(self, *a):
            pass

        def _split(self):
            parts = urlsplit(self.path)
            path = unquote(parts.path).lstrip("/")
            b, _, key = path.partition("/")
            return b, key, parse_qs(parts.query)

        def _error(self, status: int, code: str, message: str):
            body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                    f"<Message>{escape(message)}</Message></Error>").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _file(self, b, key):
            if b != bucket:
                self._error(404, "NoSuchBucket", f"no bucket {b!r}")
                return None
            path = os.path.normpath(os.path.join(root, key))
            if not path.startswith(root + os.sep) or not os.path.isfile(path):
                self._error(404, "NoSuchKey", f"no key {key!r}")
                return None
            return path

        def _object_headers(self, path, st):
            self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
            # a cheap stable ETag (size and mtime): the files never change while served
            tag = hashlib.md5(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
            self.send_header("ETag", f'"{tag}"')
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Type", "application/octet-stream")

        def do_HEAD(self):
            b, key, _ = self._split()
            path = self._file(b, key)
            if path is None:
                return
            st = os.stat(path)
            self.send_response(200)
            self._object_headers(path, st)
            self.send_header("Content-Length", str(st.st_size))
            self.end_headers()

        def do_GET(self):
            b, key, query = self._split()
            if not key and "list-type" in query:
                return self._list(b, query)
            path = self._file(b, key)
            if path is None:
                return
            st = os.stat(path)
            size = st.st_size
            start, end, status = 0, size, 200         # half-open [start, end)
            rng = self.headers.get("Range")
            if rng:
                try:
                    unit, _, spec = rng.partition("=")
                    lo, _, hi = spec.partition("-")
                    if unit.strip() != "bytes" or "," in spec:
                        raise ValueError(rng)
                    if lo == "":                  # suffix range: the last N bytes
                        start, end = max(size - int(hi), 0), size
                    else:
                        start = int(lo)
                        end = min(int(hi) + 1, size) if hi else size   # HTTP ranges are inclusive
                except ValueError:
                    return self._error(400, "InvalidArgument", f"bad Range {rng!r}")
                if start >= size:
                    return self._error(416, "InvalidRange", f"range {rng!r} starts past {size} bytes")
                status = 206
            self.send_response(status)
            self._object_headers(path, st)
            self.send_header("Content-Length", str(end - start))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            self.wfile.flush()
            with open(path, "rb") as f:
                self.connection.sendfile(f, start, end - start)

        def _list(self, b, query):
            if b != bucket:
                return self._error(404, "NoSuchBucket", f"no bucket {b!r}")
            prefix = query.get("prefix", [""])[0]
            after = query.get("continuation-token", query.get("start-after", [""]))[0]
            keys = []
            for d, _, files in os.walk(root):
                for name in files:
                    k = os.path.relpath(os.path.join(d, name), root).replace(os.sep, "/")
                    if k.startswith(prefix) and k > after:
                        keys.append(k)
            keys.sort()
            page, more = keys[:1000], len(keys) > 1000
            items = "".join(
                f"<Contents><Key>{escape(k)}</Key><Size>{os.path.getsize(os.path.join(root, k))}</Size>"
                f"<StorageClass>STANDARD</StorageClass></Contents>" for k in page)
            token = f"<NextContinuationToken>{escape(page[-1])}</NextContinuationToken>" if more else ""
            body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
                    f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}</KeyCount>"
                    f"<MaxKeys>1000</MaxKeys><IsTruncated>{'true' if more else 'false'}</IsTruncated>"
                    f"{token}{items}</ListBucketResult>").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self):
            self._error(501, "NotImplemented", "this benchmark store is read-only")

        do_PUT = do_POST = do_DELETE = _refuse

    return _Threading((host, port), Store)


# ---------------------------------------------------------------------------------------------
# the proxy

def _object_kind(request: bytes) -> str:
    """What a request is for, by the extension of its path (``.log``, ``.indexes``, ...)."""
    line = request.split(b"\r\n", 1)[0].split(b" ")
    path = line[1].split(b"?", 1) if len(line) > 1 else [b""]
    if len(path) > 1 and b"list-type" in path[1]:
        return "list"
    name = path[0].rsplit(b"/", 1)[-1]
    return "." + name.rsplit(b".", 1)[1].decode(errors="replace") if b"." in name else "other"


class ProxyStats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.requests: dict[str, int] = {}
            self.by_kind: dict[str, int] = {}      # "GET .log", "HEAD .indexes", ...
            self.response_bytes = 0
            self.connections = 0

    def snapshot(self) -> dict:
        with self.lock:
            return {"requests": dict(self.requests), "by_kind": dict(self.by_kind),
                    "gets": self.requests.get("GET", 0),
                    "response_bytes": self.response_bytes, "connections": self.connections}


class LatencyProxy:
    """Forward 127.0.0.1:``port`` to ``upstream``, shaping each connection like an S3 stream.

    A request starts when the client sends bytes after the previous response began (HTTP/1.1
    without pipelining, which is what boto3/urllib3 do); its first response byte is held until
    ``latency_s`` after that, then the response is paced at ``bytes_per_s`` for the connection.
    """

    def __init__(self, upstream: tuple[str, int], *, latency_s: float = 0.030,
                 bytes_per_s: float = 90e6, host: str = "127.0.0.1", port: int = 0):
        self.upstream = upstream
        self.latency_s = latency_s
        self.bytes_per_s = bytes_per_s
        self.stats = ProxyStats()
        self.sock = socket.create_server((host, port), backlog=256)
        self.port = self.sock.getsockname()[1]
        self._closed = False

    def serve_forever(self):
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(client,), daemon=True).start()

    def start(self) -> "LatencyProxy":
        threading.Thread(target=self.serve_forever, name="latency-proxy", daemon=True).start()
        return self

    def close(self):
        self._closed = True
        self.sock.close()

    def _connection(self, client: socket.socket):
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.stats.lock:
            self.stats.connections += 1
        state = {"phase": "idle", "t_request": 0.0}
        cond = threading.Condition()

        def requests_in():
            try:
                while True:
                    data = client.recv(CHUNK)
                    if not data:
                        break
                    with cond:
                        if state["phase"] in ("idle", "responding"):
                            method = data.split(b" ", 1)[0]
                            if method in HTTP_METHODS:   # else: more of a request body
                                state["phase"] = "requested"
                                state["t_request"] = time.monotonic()
                                m = method.decode()
                                kind = f"{m} {_object_kind(data)}"
                                with self.stats.lock:
                                    self.stats.requests[m] = self.stats.requests.get(m, 0) + 1
                                    self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    upstream.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        reader = threading.Thread(target=requests_in, daemon=True)
        reader.start()
        t_start, sent = time.monotonic(), 0        # the pacing window of the current response
        try:
            while True:
                data = upstream.recv(RESPONSE_CHUNK)
                if not data:
                    break
                with cond:
                    first = state["phase"] == "requested"
                    if first:
                        state["phase"] = "responding"
                        t_req = state["t_request"]
                if first:
                    wait = t_req + self.latency_s - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    t_start, sent = time.monotonic(), 0
                client.sendall(data)
                sent += len(data)
                with self.stats.lock:
                    self.stats.response_bytes += len(data)
                due = t_start + sent / self.bytes_per_s
                ahead = due - time.monotonic()
                if ahead > 0.0005:
                    time.sleep(ahead)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.close()
                except OSError:
                    pass


def make_control(proxy: LatencyProxy, host: str = "127.0.0.1", port: int = 0) -> http.server.HTTPServer:
    class Control(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _json(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._json(proxy.stats.snapshot())

        def do_POST(self):
            snap = proxy.stats.snapshot()
            proxy.stats.reset()
            self._json(snap)

    return _Threading((host, port), Control)


class ProxyControl:
    """Client side of the control port: ``stats()`` and ``reset()`` (returns the counters before)."""

    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/"

    def _call(self, method: str) -> dict:
        import urllib.request
        with urllib.request.urlopen(urllib.request.Request(self.url + ("reset" if method == "POST" else "stats"),
                                                           method=method, data=b"" if method == "POST" else None),
                                    timeout=10) as r:
            return json.loads(r.read())

    def stats(self) -> dict:
        return self._call("GET")

    def reset(self) -> dict:
        return self._call("POST")


# ---------------------------------------------------------------------------------------------
# command line

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("store", help="serve a directory as a read-only S3 bucket")
    s.add_argument("--root", required=True)
    s.add_argument("--bucket", default="tiered")
    s.add_argument("--port", type=int, default=0)
    p = sub.add_parser("proxy", help="shape an HTTP server like S3 (latency + per-connection cap)")
    p.add_argument("--upstream", required=True, help="host:port")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--control-port", type=int, default=0)
    p.add_argument("--latency-ms", type=float, default=30.0)
    p.add_argument("--mbps", type=float, default=90.0, help="per-connection cap, MB/s (10**6 bytes)")
    args = ap.parse_args(argv)

    if args.cmd == "store":
        server = make_store(args.root, args.bucket, port=args.port)
        print(f"store: http://127.0.0.1:{server.server_address[1]} bucket {args.bucket}", flush=True)
        server.serve_forever()
        return 0
    host, _, port = args.upstream.rpartition(":")
    proxy = LatencyProxy((host or "127.0.0.1", int(port)), latency_s=args.latency_ms / 1000,
                         bytes_per_s=args.mbps * 1e6, port=args.port).start()
    control = make_control(proxy, port=args.control_port)
    print(f"proxy: 127.0.0.1:{proxy.port} -> {args.upstream} ({args.latency_ms:g} ms first byte, "
          f"{args.mbps:g} MB/s per connection); control 127.0.0.1:{control.server_address[1]}", flush=True)
    control.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
