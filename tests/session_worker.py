"""A Spark session in an interpreter of its own, driven by a test module over stdin/stdout,
and pyspark's own Spark Connect server as a process of its own.

A process holds one kind of session: the suite's local[2] classic session lives in the pytest
process, and pyspark marks a whole process as Spark Connect once a Connect session starts there
(``SPARK_CONNECT_MODE_ENABLED``).  So a Spark Connect client and a pyspark 3.5 session (another
venv's interpreter) each run here, one per test module, and the tests send them Python
snippets.

The Connect server is pyspark's ``SparkConnectServer`` (what ``sbin/start-connect-server.sh``
runs) with a local[2] master on a port of our choosing, started by :func:`connect_server`: the
client then runs in another process than the driver and its executors, as on a shared cluster.
(``SparkSession.builder.remote("local[2]")`` would start the same server inside the client's
process, but always on port 15002 outside pyspark's own test mode, so two suites on one machine
would collide.)

Protocol: one JSON object per line each way.  Request ``{"code": str, "vars": {...}}``: the
code runs with ``spark``, ``kts`` (kafka_tiered_source), ``rows(df)`` (the rows of ``df`` in
the fixtures' shape, keyed ``"topic-partition"``), ``json`` and ``vars`` in scope and leaves
its answer in ``result`` (JSON-able).  Reply ``{"ok": true, "result": ...}`` or ``{"ok":
false, "type": ..., "types": [...], "message": ...}``.

    python session_worker.py connect sc://127.0.0.1:PORT APP   # a Spark Connect client
    python session_worker.py classic local[2] APP              # a classic session (e.g. pyspark 3.5)
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings


# ---------------------------------------------------------------------------------------------
# the worker (child) side

def _rows(df) -> dict:
    from spark_helpers import collect_rows
    return {f"{t}-{p}": rows for (t, p), rows in collect_rows(df).items()}


def _serve(mode: str, master: str, app: str) -> None:
    out = sys.stdout
    sys.stdout = sys.stderr             # prints of the code under test stay off the channel
    warnings.simplefilter("ignore")     # static confs a Connect session cannot set, pandas notes
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app)
    if mode == "connect":
        spark = builder.remote(master).getOrCreate()     # the server has its own configuration
    else:
        spark = (builder.master(master).config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    import kafka_tiered_source as kts
    out.write(json.dumps({"ok": True, "result": {"version": spark.version, "type": type(spark).__module__}}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        ns = {"spark": spark, "kts": kts, "rows": _rows, "json": json, "vars": req.get("vars", {})}
        try:
            exec(compile(req["code"], "<test snippet>", "exec"), ns)
            reply = {"ok": True, "result": ns.get("result")}
        except BaseException as exc:    # the test decides what an error means
            reply = {"ok": False, "type": type(exc).__name__,
                     "types": [c.__name__ for c in type(exc).__mro__], "message": str(exc)}
        out.write(json.dumps(reply, default=str) + "\n")
        out.flush()
    spark.stop()


# ---------------------------------------------------------------------------------------------
# the test (parent) side

class SnippetError(Exception):
    """An exception raised by a snippet in the worker: ``type`` and ``types`` name its class
    and bases, the message is the worker's ``str(exc)``."""

    def __init__(self, reply: dict):
        self.type = reply["type"]
        self.types = reply["types"]
        super().__init__(f"{reply['type']}: {reply['message']}")


class SessionWorker:
    def __init__(self, python: str, mode: str, master: str, app: str, log_path: str,
                 env: dict | None = None, start_timeout_s: float = 180):
        here = os.path.dirname(os.path.abspath(__file__))
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([python, os.path.join(here, "session_worker.py"), mode, master, app],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     env=env, cwd=os.path.dirname(log_path), text=True, bufsize=1,
                                     start_new_session=True)   # its JVM goes with it at close()
        try:
            self.info = self._reply(start_timeout_s)
        except BaseException:
            self.close(kill=True)
            raise

    def _reply(self, timeout_s: float):
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                if not sel.select(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"the Spark session worker did not answer within {timeout_s:.0f} s; "
                                       f"log tail:\n{self.log_tail()}")
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"the Spark session worker exited ({self.proc.poll()}); log tail:\n"
                                       f"{self.log_tail()}")
                reply = json.loads(line)
                if reply["ok"]:
                    return reply["result"]
                raise SnippetError(reply)
        finally:
            sel.close()

    def run(self, code: str, timeout_s: float = 240, **variables):
        """Run ``code`` in the worker; its ``result``, or :class:`SnippetError`."""
        self.proc.stdin.write(json.dumps({"code": code, "vars": variables}) + "\n")
        self.proc.stdin.flush()
        return self._reply(timeout_s)

    def log_tail(self, n: int = 4000) -> str:
        self._log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-n:]

    def close(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            if kill:
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()


@contextlib.contextmanager
def connect_server(base, env: dict, master: str = "local[2]", timeout_s: float = 120):
    """pyspark's Spark Connect server (``SparkConnectServer``) on 127.0.0.1 and a free port, in
    its own process group; yields its ``sc://`` URL and stops it at the end."""
    import pyspark
    from storage_servers import free_port, wait_port
    spark_home = os.path.dirname(pyspark.__file__)
    port = free_port()
    log_path = os.path.join(str(base), "connect-server.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [os.path.join(spark_home, "bin", "spark-submit"), "--class",
             "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", master,
             "--name", "kafka-tiered-connect-tests",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
             "--conf", "spark.driver.host=127.0.0.1",
             "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.sql.shuffle.partitions=2"],
            env={**env, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1"}, stdout=log,
            stderr=subprocess.STDOUT, cwd=str(base), start_new_session=True)
    try:
        try:
            wait_port(port, timeout_s, proc)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; server log tail:\n{open(log_path, errors='replace').read()[-3000:]}") \
                from None
        yield f"sc://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


if __name__ == "__main__":
    _serve(*sys.argv[1:4])
