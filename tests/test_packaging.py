"""What the project declares about where it runs, and the runtime checks that hold to it: the
Spark versions in pyproject.toml's extras are the ones kafka_tiered_source.read() and the
format accept, and every other version is refused by name before anything runs."""
from __future__ import annotations

import os
import tomllib

import pytest

from kafka_tiered_source import UnsupportedSparkError
from kafka_tiered_source.spark import session

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_pyproject_declares_the_supported_spark_versions_the_code_checks():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert extras["spark"] == [session.PYSPARK_REQUIREMENT]
    low, high = session.READ_API_VERSIONS
    assert session.PYSPARK_REQUIREMENT == f"pyspark>={low[0]}.{low[1]},<{high[0]}"
    assert session.FORMAT_VERSIONS[1] == high
    # Spark Connect clients get pyspark's connect dependencies (grpcio, pandas, ...)
    assert any(r.startswith("pyspark[connect]>=4.0,<5") for r in extras["connect"])
    assert "build>=1.0" in extras["dev"]


class _Session:
    """Only the version string, which is all the checks read (any classic or Connect session)."""

    def __init__(self, version):
        self.version = version


@pytest.mark.parametrize("version, read_ok, format_ok", [
    ("3.3.4", False, False), ("3.4.0", True, False), ("3.5.9", True, False), ("4.0.0", True, True),
    ("4.3.0", True, True), ("4.3.0-SNAPSHOT", True, True), ("5.0.0", False, False),
])
def test_spark_versions_outside_the_range_are_refused_by_name(version, read_ok, format_ok):
    s = _Session(version)
    for check, ok, what in ((session.check_read_api, read_ok, "kafka_tiered_source.read"),
                            (session.check_format, format_ok, '"kafka-tiered" format')):
        if ok:
            assert check(s)[:2] == session.parse_version(version)[:2]
        else:
            with pytest.raises(UnsupportedSparkError) as info:
                check(s)
            assert what in str(info.value) and f"runs Spark {version}" in str(info.value)
    if version.startswith("3.") and read_ok:
        with pytest.raises(UnsupportedSparkError, match=r"use kafka_tiered_source.read\(spark"):
            session.check_format(s)


def test_an_unreadable_version_is_an_error():
    with pytest.raises(UnsupportedSparkError, match="cannot tell the Spark version"):
        session.parse_version("unknown")



def test_the_version_is_pyproject_s():
    """One place states the version: pyproject.toml; the package root and the telemetry's client
    software version read it from the installed distribution's metadata."""
    import re

    import kafka_tiered_source
    from kafka_tiered_source.version import package_version
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        declared = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert kafka_tiered_source.__version__ == package_version() == declared
