"""Small virtualenvs with other pyspark 4.x releases than the suite's own, for the checks that
must hold on every Spark the ``kafka-tiered`` format supports (tests/test_pushdown_versions.py).

Each ``.venv-pyspark-4.N`` (at the top of the checkout) holds only that pyspark (and the py4j it
pins); everything else — pyarrow, pandas, this project installed editable — comes from the
suite's ``.venv`` through a ``.pth`` file that adds its site-packages *after* the venv's own, so
the venv's pyspark wins.  Made on first use (``python tests/pyspark_venvs.py`` makes them all) and
kept until the requirements or the packaging files change; a venv that cannot be made fails the
tests loudly, as tests/spark35_venv.py does.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

from spark35_venv import run, stamp_key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: minor version -> requirement (the latest patch release of each line)
RELEASES = {"4.0": "pyspark>=4.0,<4.1", "4.1": "pyspark>=4.1,<4.2", "4.2": "pyspark>=4.2,<4.3"}


def venv_dir(minor: str) -> str:
    return os.path.join(ROOT, f".venv-pyspark-{minor}")


def ensure(minor: str) -> str:
    """The python of the pyspark ``minor`` venv, made or refreshed when needed."""
    venv = venv_dir(minor)
    python = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".installed")
    key = stamp_key(RELEASES[minor], sys.prefix)
    if os.path.exists(python) and os.path.exists(stamp) and open(stamp).read() == key:
        return python
    base = getattr(sys, "_base_executable", None) or sys.executable
    if not os.path.exists(python):
        # no pip of its own (ensurepip is ~8 s of CPU per venv): the suite's pip installs into it
        run([base, "-m", "venv", "--without-pip", venv])
    run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", RELEASES[minor]])
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    suite = sysconfig.get_paths()["purelib"]      # this interpreter's: the suite's .venv
    # "import" lines of a .pth run at start-up; addsitedir also runs the suite's own .pth files
    # (the editable install of this project), and appends, so this venv's pyspark comes first
    with open(os.path.join(own, "kafka_tiered_suite.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({suite!r})\n")
    check = subprocess.run([python, "-c", "import pyspark, pyarrow, kafka_tiered_source as k; "
                            "print(pyspark.__version__, pyarrow.__version__, k.decoder_backend())"],
                           capture_output=True, text=True, cwd="/")
    if check.returncode != 0 or not check.stdout.startswith(minor + "."):
        raise RuntimeError(f"{venv} is not a working pyspark {minor} environment:\n{check.stdout}{check.stderr}")
    with open(stamp, "w") as f:
        f.write(key)
    return python


if __name__ == "__main__":
    for m in RELEASES:
        print(m, ensure(m))
