"""The first hour (issue 18): what a new user sees.

* ``kafka-tiered --help`` and every subcommand's help carry examples that parse;
* a read's Spark jobs carry a description (``kafka-tiered: orders, ...``), checked in a real
  session against Spark's own record of the job;
* README's first screen says what, for whom, and the two commands;
* the demo (small) is quiet — no librdkafka log lines, no moto access log — reads encrypted
  segments from S3, writes Parquet partitioned by topic and partition, checks it against the
  broker read, prints the benchmark's recorded direct-versus-broker figure beside its own, and
  ends with where the files are and what the read cost.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from spark_session import ROOT, spark_env

from kafka_tiered_source import cli


def _first_lines_of_examples(epilog: str) -> list[str]:
    return [line.strip() for line in epilog.splitlines()[1:] if line.strip()]


def test_help_and_every_subcommand_have_examples_that_parse(capsys):
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert sub.choices, "no subcommands"
    top = parser.format_help()
    assert "examples:" in top
    for name, p in sub.choices.items():
        text = p.format_help()
        assert "examples:" in text, f"{name} --help has no examples"
        commands = [line.split(" #")[0].strip() for line in _first_lines_of_examples(p.epilog)]
        runnable = [c[c.index("kafka-tiered "):].split(" | ")[0] for c in commands
                    if "kafka-tiered " in c and not c.endswith("\\")]
        assert runnable and all(c.startswith(f"kafka-tiered {name}") for c in runnable), (name, commands)
        assert commands[0] in top                       # --help shows each command's first example
        for command in runnable:
            args = parser.parse_args(shlex.split(command)[1:])   # a valid command line
            assert args.command == name, command


def test_readme_first_screen_says_what_for_whom_and_the_two_commands():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    assert lines[0] == "# kafka-tiered"
    screen = [line for line in lines[1:6] if line.strip()][:3]
    assert [s.split(":", 1)[0] for s in screen] == ["**What", "**For", "**Try it"], screen
    assert "tiered storage" in screen[0] and "Spark" in screen[0]
    assert "`make demo`" in screen[2] and "`make test`" in screen[2]


@pytest.mark.spark
def test_each_read_carries_a_job_description_spark_records(fixture_cluster, spark):
    import kafka_tiered_source as kts
    options = {"kafka.bootstrap.servers": fixture_cluster.bootstrap_servers, "subscribe": "orders",
               "remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{fixture_cluster.remote_dir}"}
    sc = spark.sparkContext
    text = kts.describe_read(spark, options)
    assert re.fullmatch(r"kafka-tiered: orders, \d+ tiered ranges, [\d.,]+ MB( \+ \d+ broker ranges)?, \d+ tasks",
                        text), text
    try:
        reader = spark.read.format("kafka-tiered")
        for k, v in options.items():
            reader = reader.option(k, v)
        assert reader.load().count() > 0
    finally:
        sc.setJobDescription(None)
    jobs = sc._jsc.sc().statusStore().jobsList(None)          # a Scala Seq of JobData
    described = [jobs.apply(i).description().get() for i in range(jobs.length())
                 if jobs.apply(i).description().isDefined()]
    assert text in described, described[-5:]


@pytest.mark.slow
def test_the_demo_is_quiet_and_ends_with_the_parquet_files_and_the_cost(tmp_path):
    out = tmp_path / "parquet"
    env = {**os.environ, **spark_env()}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "backfill.py"), "--s3", "--encrypt",
                           "--records", "12000", "--value-bytes", "150", "--partitions", "2", "--min-partitions", "2",
                           "--segment-bytes", str(64 << 10), "--rounds", "1", "--output", str(out)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-2].startswith(f"Parquet: {out}  (") and "partitioned by topic and partition" in lines[-2]
    assert lines[-1].startswith("the read cost: $") and "GETs" in lines[-1]
    assert "identical (count and digest): True" in proc.stdout
    # the benchmark's figure, printed beside the demo's, is the recorded one: the results file's
    # walls (largest size, local[2]), the same figure BENCHMARKS.md's table shows
    with open(os.path.join(ROOT, "benchmarks", "results", "backfill.json"), encoding="utf-8") as fh:
        bench = json.load(fh)
    size = max(bench["config"]["sizes"])
    wall = {r["way"]: r["wall_s"] for r in bench["rows"] if (r["size"], r["cores"]) == (size, 2)}
    ratio = wall["broker"] / wall["direct"]
    assert (f"the benchmark: direct {ratio:.1f}x as fast as broker-mediated through Spark, local[2], "
            f"{bench['data'][str(size)]['records']:,} records, ") in proc.stdout, proc.stdout[-3000:]
    assert f"benchmarks/results/backfill.json, {bench['date']})" in proc.stdout
    assert re.search(r"^why they differ: this run read \d+ MB into a digest of every row, from moto with no added "
                     r"latency, .*load average [\d.]+; the benchmark read into a noop sink", proc.stdout, re.M)
    with open(os.path.join(ROOT, "BENCHMARKS.md"), encoding="utf-8") as fh:
        assert re.search(rf"^\| direct \| 2 \| {size}x \|.*\| {ratio:.2f}x \|", fh.read(), re.M)
    plan_tasks = re.search(r"plan: (\d+) Spark partitions", proc.stdout).group(1)
    assert f"({plan_tasks} Spark partitions, as planned" in proc.stdout
    assert sorted(os.listdir(out / "topic=orders")) == ["partition=0", "partition=1"]
    everything = proc.stdout + proc.stderr
    assert not re.search(r"^%\d\|", everything, re.M), "librdkafka log lines in the demo output"
    assert '"GET /' not in everything and '"PUT /' not in everything, "moto access log in the demo output"
    assert "[Stage " not in everything
