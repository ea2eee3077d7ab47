"""Fetch throughput: one segment read whole through the fetchers, split into parts of 1, 8 and
16 MiB fetched with 1, 4 and 8 threads, against local files (fsspec file://), a minimal HTTP
range server (presigned fetcher) and a real moto S3 server, each server in its own process on
127.0.0.1.

    python -m benchmarks.fetch [--size MIB] [--repeat N]

The baseline of each backend is a single GET of the whole segment with one thread, measured in
the same run; every other figure is printed as a ratio of it.  GET counts come from the
fetcher's observer (every attempt is counted).  Each figure is the best of ``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from kafka_tiered_source.storage import CountingObserver, create_fetcher
from kafka_tiered_source.storage.segment import RemoteSegment

MiB = 1024 * 1024
PART_SIZES = (1, 8, 16)
CONCURRENCY = (1, 4, 8)
SEG = dict(topic="bench", topic_id="MWJ6FHTfRYy67jzwZdeqSQ", partition=0,
           segment_id="tqimKeZwStOEOwRzT3L5oQ", base_offset=0, end_offset=1)
TEMPLATE = "{topic}/{partition}/{base_offset:020d}-{segment_id}.{suffix}"
KEY = "bench/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ.log"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A minimal HTTP/1.1 server answering Range GETs straight from a file (os.pread), run in its own
# process: what a real object store does per ranged GET, without moto's per-request overhead.
RANGE_SERVER = r"""
import http.server, os, re, sys
import time
path, port = sys.argv[1], int(sys.argv[2])
first_byte_s = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.0   # per-request latency
rate = float(sys.argv[4]) * (1 << 20) if len(sys.argv) > 4 else 0.0     # bytes/s per connection
fd = os.open(path, os.O_RDONLY); size = os.fstat(fd).st_size
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        m = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start = int(m.group(1)) if m else 0
        end = min(int(m.group(2)) + 1 if m and m.group(2) else size, size)
        if first_byte_s:
            time.sleep(first_byte_s)
        self.send_response(206 if m else 200)
        self.send_header("Content-Length", str(max(end - start, 0)))
        self.end_headers()
        pos, t0 = start, time.monotonic()
        while pos < end:
            n = min(1 << 20, end - pos)
            self.wfile.write(os.pread(fd, n, pos)); pos += n
            if rate:   # pace the connection to `rate` bytes/s
                ahead = (pos - start) / rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H); s.daemon_threads = True
s.serve_forever()
"""


def _wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"moto server did not start on 127.0.0.1:{port}")


def _measure(options, segment, size, repeat):
    best, gets = None, None
    for _ in range(repeat):
        obs = CountingObserver()
        fetcher = create_fetcher(options, observer=obs)
        t0 = time.perf_counter()
        data = fetcher.fetch_log_segment(segment, 0, size)
        dt = time.perf_counter() - t0
        fetcher.close()
        if len(data) != size:
            raise SystemExit(f"short read: {len(data)} of {size} bytes")
        del data
        best = dt if best is None else min(best, dt)
        gets = obs.requests
    return best, gets


def _run_backend(name, base_options, size, repeat, presigned_url=None):
    segment = RemoteSegment(**SEG, size_bytes=size, presigned_url=presigned_url)
    rows = []
    base_opts = {**base_options, "remote.storage.layout": "template",
                 "remote.storage.layout.template": TEMPLATE}
    whole = {**base_opts, "fetch.remote.part.size.bytes": str(size), "fetch.remote.concurrency": "1"}
    _measure(whole, segment, size, 1)   # warm-up: imports, page cache, first connection
    t, gets = _measure(whole, segment, size, repeat)
    baseline = size / MiB / t
    rows.append(("whole", 1, gets, baseline, 1.0))
    for part in PART_SIZES:
        for conc in CONCURRENCY:
            t, gets = _measure({**base_opts, "fetch.remote.part.size.bytes": str(part * MiB),
                                "fetch.remote.concurrency": str(conc)}, segment, size, repeat)
            mbs = size / MiB / t
            rows.append((f"{part} MiB", conc, gets, mbs, mbs / baseline))
    print(f"\n{name}: {size // MiB} MiB segment (baseline: one GET, one thread)", flush=True)
    print(f"{'part':>8} {'threads':>7} {'GETs':>5} {'MiB/s':>9} {'vs baseline':>12}")
    for part, conc, gets, mbs, ratio in rows:
        print(f"{part:>8} {conc:>7} {gets:>5} {mbs:>9.1f} {ratio:>11.2f}x")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=256, help="segment size in MiB (default 256)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure, best kept (default 2)")
    ap.add_argument("--latency-ms", type=int, default=20, help="shaped server: first-byte latency (default 20)")
    ap.add_argument("--conn-mibps", type=int, default=50,
                    help="shaped server: MiB/s per connection (default 50)")
    ap.add_argument("--backends", default="file,http,shaped,s3",
                    help="comma list of file, http, shaped, s3 (default: all)")
    args = ap.parse_args(argv)
    chosen = set(args.backends.split(","))
    size = args.size * MiB
    data = os.urandom(size)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"{platform.platform()}")

    tmp = tempfile.mkdtemp(prefix="kts-bench-fetch-")
    try:
        path = os.path.join(tmp, KEY)
        os.makedirs(os.path.dirname(path))
        with open(path, "wb") as f:
            f.write(data)
        if "file" in chosen:
            _run_backend("file (fsspec file://)", {"remote.storage.fetcher": "fsspec",
                                                   "remote.storage.fsspec.url": f"file://{tmp}"},
                         size, args.repeat)
        if "http" in chosen:
            _run_http("presigned (HTTP range server in its own process)", path, size, args.repeat, ())
        if "shaped" in chosen:
            # The same server shaped like an object store seen over a network: a fixed first-byte
            # latency per GET and a per-connection bandwidth cap (S3-like figures).  Loopback has
            # neither, which is why splitting cannot pay off against the plain servers.
            _run_http(f"presigned (range server, {args.latency_ms} ms first byte, "
                      f"{args.conn_mibps} MiB/s per connection)", path, size, args.repeat,
                      (str(args.latency_ms), str(args.conn_mibps)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if "s3" in chosen:
        _run_moto(data, size, args.repeat)


def _run_http(name, path, size, repeat, shaping):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-c", RANGE_SERVER, path, str(port), *shaping])
    try:
        _wait_port(port)
        url = f"http://127.0.0.1:{port}/{KEY}?X-Amz-Signature=bench"
        _run_backend(name, {"remote.storage.fetcher": "presigned", "fetch.remote.read.timeout.ms": "60000"},
                     size, repeat, presigned_url=url)
    finally:
        server.terminate()
        server.wait(30)


def _run_moto(data, size, repeat):
    import boto3
    # moto in its own process, so the server does not share the client's GIL
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port)
        endpoint = f"http://127.0.0.1:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="bench", aws_secret_access_key="bench")
        s3.create_bucket(Bucket="bench")
        s3.put_object(Bucket="bench", Key=KEY, Body=data)
        _run_backend("s3 (moto server in its own process)",
                     {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "bench",
                      "remote.storage.s3.endpoint": endpoint, "remote.storage.s3.region": "us-east-1",
                      "remote.storage.s3.access.key.id": "bench",
                      "remote.storage.s3.secret.access.key": "bench",
                      "fetch.remote.read.timeout.ms": "60000"},
                     size, repeat)
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
