"""``kafka_tiered_source.logs``: a module's logger that imports ``logging`` only when a record
could be emitted (issue 36's cold start), and then is ``logging.getLogger(name)``."""
from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import sys
from kafka_tiered_source.logs import INFO, get_logger
log = get_logger("kafka_tiered_source.x")
log.debug("not shown %s", 1)
log.info("not shown %s", 2)
print(log.isEnabledFor(INFO), log.isEnabledFor(30), "logging" in sys.modules, flush=True)
log.warning("shown %s", 3)   # unconfigured logging's last resort: the message, on stderr
print("logging" in sys.modules, flush=True)
if sys.argv[1] == "configured":
    import logging
    logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
    log.debug("now shown %s", 4)
    log.info("now shown %s", 5)
    print(log.isEnabledFor(INFO), log.logger is logging.getLogger("kafka_tiered_source.x"), flush=True)
"""


def _run(mode: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True)
    return done.stdout, done.stderr


def test_debug_and_info_are_dropped_without_importing_logging_as_unconfigured_logging_drops_them():
    out, err = _run("plain")
    assert out.splitlines() == ["False True False", "True"]
    assert err.splitlines() == ["shown 3"]


def test_once_logging_is_configured_every_record_goes_to_the_named_logger():
    out, err = _run("configured")
    assert out.splitlines()[-1] == "True True"
    assert err.splitlines() == ["shown 3", "kafka_tiered_source.x DEBUG now shown 4", "kafka_tiered_source.x INFO now shown 5"]
