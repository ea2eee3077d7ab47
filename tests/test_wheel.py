"""A plain wheel install, as a user gets it: ``python -m build`` makes an sdist and, from that
sdist, a wheel that compiles the native decoder; a fresh venv with only that wheel and pyspark
then reads a tiered topic from a neutral directory with ``spark.read.format("kafka-tiered")``
and no ``register()`` call (Spark finds ``pyspark_kafka_tiered`` in site-packages by itself)."""
from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pyspark
import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster, fixture_expected

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def neutral_env() -> dict:
    """This process's environment without what points at the checkout or this venv (the Spark
    tests put the checkout on PYTHONPATH)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


def pip_into(venv) -> list:
    """The suite's pip, installing into ``venv`` (pip 22.3+)."""
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]


@pytest.fixture(scope="module")
def venv_job(tmp_path_factory):
    """A new venv with this suite's pyspark version installed, made by a background process
    while the wheel is built (``dist`` asks for this first); the test installs the wheel into
    it.  The venv gets no pip of its own (``ensurepip`` alone cost 8 s of CPU): the suite's pip
    installs into it (``pip --python``), as a user's pip or uv installs into any environment.
    Yields (venv path, the Popen, its log path)."""
    base = tmp_path_factory.mktemp("fresh-venv")
    venv, log = base / "venv", base / "venv.log"
    python = getattr(sys, "_base_executable", sys.executable)
    script = (f"{shlex.quote(python)} -m venv --without-pip {shlex.quote(str(venv))} && "
              f"{' '.join(map(shlex.quote, pip_into(venv)))} install --quiet pyspark=={pyspark.__version__}")
    with open(log, "wb") as out:
        proc = subprocess.Popen(["/bin/sh", "-c", script], env=neutral_env(), cwd=base, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        yield venv, proc, log
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def dist(tmp_path_factory, venv_job):
    out = tmp_path_factory.mktemp("dist")
    egg_info = os.path.join(ROOT, "kafka_tiered_source.egg-info")
    had_egg_info = os.path.exists(egg_info)
    try:
        done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), ROOT], cwd=ROOT,
                              env=neutral_env(), capture_output=True, text=True, timeout=600)
    finally:
        if not had_egg_info:   # the sdist step leaves one; with the checkout on a path it shadows installs
            shutil.rmtree(egg_info, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sdists, wheels = glob.glob(str(out / "*.tar.gz")), glob.glob(str(out / "*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, os.listdir(out)
    return sdists[0], wheels[0]


def test_the_sdist_carries_the_native_sources_and_the_wheel_the_built_decoder(dist):
    sdist, wheel = dist
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    native = {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "native", "*.[ch]"))}
    assert native and native <= names, f"missing from the sdist: {sorted(native - names)}"
    assert {"pyspark_kafka_tiered.py", "setup.py", "pyproject.toml", "README.md"} <= names

    with zipfile.ZipFile(wheel) as zf:
        members = set(zf.namelist())
    package = {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "kafka_tiered_source", "**", "*.py"),
                                                            recursive=True)}
    assert package <= members, f"missing from the wheel: {sorted(package - members)[:10]}"
    assert "pyspark_kafka_tiered.py" in members          # Spark's discovery hook, top level
    assert "kafka_tiered_source/py.typed" in members
    assert any(m.startswith("kafka_tiered_source/_native.") and m.endswith(".so") for m in members), \
        "the wheel has no compiled decoder"
    assert not any(m.startswith(("tests/", "native/", "benchmarks/")) for m in members)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("wheel-cluster")) as c:
        yield c


def test_a_fresh_venv_with_only_the_wheel_and_pyspark_reads_a_tiered_topic(dist, venv_job, cluster, tmp_path):
    _, wheel = dist
    venv, proc, log = venv_job
    env = neutral_env()
    assert proc.wait(timeout=900) == 0, log.read_text(errors="replace")[-3000:]   # venv + pyspark
    python = str(venv / "bin" / "python")
    done = subprocess.run([*pip_into(venv), "install", "--quiet", wheel, f"pyspark=={pyspark.__version__}"],
                          capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    neutral = tmp_path / "neutral"
    neutral.mkdir()
    topic, partition = FIXTURE_PARTITIONS[0]
    script = textwrap.dedent(f"""
        import json
        from pyspark.sql import SparkSession
        import kafka_tiered_source as kts
        spark = (SparkSession.builder.master("local[2]").appName("wheel")
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        df = (spark.read.format("kafka-tiered")
              .option("kafka.bootstrap.servers", {cluster.bootstrap_servers!r})
              .option("assign", json.dumps({{{topic!r}: [{partition}]}}))
              .option("remote.storage.uri", "file://" + {cluster.remote_dir!r})
              .load())
        offsets = [r.offset for r in df.orderBy("offset").select("offset").collect()]
        print("RESULT", json.dumps({{"offsets": offsets, "module": kts.__file__,
                                     "decoder": kts.decoder_backend()}}))
        spark.stop()
    """)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = python
    run = subprocess.run([python, "-c", script], cwd=neutral, env=env, capture_output=True, text=True, timeout=300)
    errors = [ln for ln in run.stderr.splitlines() if "Exception" in ln or "Error" in ln][:5]
    assert run.returncode == 0, "\n".join(errors) or run.stderr[-3000:]
    result = json.loads(next(ln for ln in run.stdout.splitlines() if ln.startswith("RESULT "))[len("RESULT "):])
    # the installed copy, not the checkout, with its compiled decoder
    assert result["module"].startswith(str(venv)), result["module"]
    assert result["decoder"] == "native"
    assert result["offsets"] == [r["offset"] for r in fixture_expected(topic, partition, committed=False)]
