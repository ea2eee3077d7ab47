"""The second virtualenv of the suite: pyspark 3.5 (no Python data source API) with this project
installed editable, for tests/test_spark35.py.  ``make test`` creates it before running the
suite (``python tests/spark35_venv.py``); the test module calls :func:`ensure` too, so running
pytest alone works.  It is made once and kept (``.venv-spark35`` at the top of the checkout)
until the requirements below or the project's packaging files change.

The runtime is what Spark 3.5 platforms ship (e.g. Databricks 15.4 LTS: Spark 3.5.0, Python
3.11, pyarrow 14, pandas 1.5, numpy 1.23): pyspark 3.5 with numpy 1.x, so pyarrow 14 — the
oldest pyarrow this project supports — and pandas 2.2 (``mapInArrow`` insists on pandas being
importable in 3.5).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv-spark35")
PYTHON = os.path.join(VENV, "bin", "python")
REQUIREMENTS = ["pyspark[sql]>=3.5,<3.6", "pyarrow>=14,<15", "pandas>=1.5,<2.3", "numpy<2"]
STAMP = os.path.join(VENV, ".installed")


def stamp_key(*parts: str) -> str:
    """What a venv was made from: ``parts`` (its requirements) and the packaging files."""
    h = hashlib.sha256("\n".join(parts).encode())
    for name in ("pyproject.toml", "setup.py"):
        with open(os.path.join(ROOT, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def ensure(quiet: bool = True) -> str:
    """The venv's python, creating or refreshing the venv when needed.  Fails loudly (with
    pip's output) when it cannot be made: the 3.5 tests never skip."""
    key = stamp_key(*REQUIREMENTS)
    if os.path.exists(PYTHON) and os.path.exists(STAMP) and open(STAMP).read() == key:
        return PYTHON
    base = getattr(sys, "_base_executable", None) or sys.executable
    if not os.path.exists(PYTHON):
        run([base, "-m", "venv", VENV])
    q = ["--quiet"] if quiet else []
    run([PYTHON, "-m", "pip", "install", *q, "--upgrade", "pip", "setuptools", "wheel"])
    # editable: the checkout is the package (and its native decoder) the tests exercise
    run([PYTHON, "-m", "pip", "install", *q, *REQUIREMENTS, "-e", ROOT])
    check = subprocess.run([PYTHON, "-c", "import pyspark, pyarrow, kafka_tiered_source as k; "
                            "print(pyspark.__version__, pyarrow.__version__, k.decoder_backend())"],
                           capture_output=True, text=True, cwd=ROOT)
    if check.returncode != 0 or not check.stdout.startswith("3.5."):
        raise RuntimeError(f"{VENV} is not a working pyspark 3.5 environment:\n{check.stdout}{check.stderr}")
    with open(STAMP, "w") as f:
        f.write(key)
    print(f"{VENV}: pyspark, pyarrow, decoder = {check.stdout.strip()}")
    return PYTHON


def run(cmd: list) -> None:
    """Run ``cmd`` at the top of the checkout; its output goes into the error when it fails."""
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


if __name__ == "__main__":
    ensure()
