"""``kafka-tiered export`` (issue 28): a topic to Parquet without Spark, partitioned by topic and
partition as Spark's ``partitionBy`` writes it, read back equal to the fixtures' records."""
from __future__ import annotations

import os
import re

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster
from spark_helpers import arrow_rows, expected_rows, first_difference

from kafka_tiered_source.cli import build_parser, main
from kafka_tiered_source.cli.export import export

pytestmark = pytest.mark.decoder


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("export")) as c:
        yield c


def args(c, to, *extra) -> list[str]:
    return ["export", "--bootstrap-servers", c.bootstrap_servers, "--topic", "orders,payments,compacted",
            "--remote-storage-uri", f"file://{c.remote_dir}", "--to", str(to), *extra]


def read_back(to):
    table = ds.dataset(str(to), format="parquet", partitioning="hive").to_table()
    return table, arrow_rows(table.to_batches())


def test_export_reads_back_equal_with_the_cost_line(cluster, tmp_path, capsys):
    to = tmp_path / "out"
    code = main(args(cluster, to, "--isolation-level", "read_committed", "--workers", "2"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""                                   # not a terminal: no progress line
    table, got = read_back(to)
    assert sorted(got) == sorted(FIXTURE_PARTITIONS)
    for t, p in FIXTURE_PARTITIONS:
        want = expected_rows(t, p, True)
        assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"
    lines = out.splitlines()
    assert re.match(rf"exported {table.num_rows:,} records of {len(FIXTURE_PARTITIONS)} topic-partitions to "
                    rf"{re.escape(str(to))}: {len(FIXTURE_PARTITIONS)} Parquet files, [\d.,]+ MB \(zstd\), in ",
                    lines[0]), lines[0]
    assert re.match(r"the read cost: \$\d+\.\d{6} for [1-9][\d,]* GETs and [\d.,]+ MB from storage, "
                    r"[\d.,]+ MB through the brokers, 0 fallbacks$", lines[1]), lines[1]
    assert os.path.exists(to / "_SUCCESS")
    files = sorted(os.path.relpath(os.path.join(d, f), to) for d, _, fs in os.walk(to) for f in fs if f != "_SUCCESS")
    assert files == [f"topic={t}/partition={p}/part-{expected_rows(t, p, True)[0]['offset']:020d}.parquet"
                     for t, p in FIXTURE_PARTITIONS]
    # topic and partition live in the directory names, as Spark's partitionBy writes them
    assert pq.read_schema(to / files[0]).names == ["key", "value", "offset", "timestamp", "timestampType",
                                                    "headers"]


def test_row_groups_and_files_are_cut_by_size(cluster, tmp_path, capsys):
    to = tmp_path / "small"
    code = main(args(cluster, to, "--partition", "0", "--where", "topic = 'orders'", "--row-group-mib", "1",
                     "--file-mib", "1", "--compression", "snappy", "--no-headers"))
    assert code == 0, capsys.readouterr().err
    files = sorted((to / "topic=orders" / "partition=0").iterdir())
    assert len(files) > 1
    offsets = []
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert meta.row_group(0).column(0).compression == "SNAPPY"
        first = pq.read_table(f, columns=["offset"]).column("offset").to_pylist()
        assert f.name == f"part-{first[0]:020d}.parquet"
        offsets += first
        for i in range(meta.num_row_groups):
            assert meta.row_group(i).total_byte_size < 3 << 20      # about 1 MiB of Arrow data each
    assert offsets == [r["offset"] for r in expected_rows("orders", 0, False)]
    assert "headers" not in pq.read_schema(files[0]).names


def _drain(fd: int) -> str:
    """Everything written to the pty so far: one read may return only part of it (the line
    discipline hands it over in pieces)."""
    import select
    chunks = []
    while select.select([fd], [], [], 0.2)[0]:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_the_progress_line_shows_on_a_terminal(cluster, tmp_path):
    import io
    import pty

    master, slave = pty.openpty()
    out = io.StringIO()
    with open(slave, "w", closefd=True) as err:
        parsed = build_parser().parse_args(args(cluster, tmp_path / "tty", "--where", "topic = 'orders'"))
        assert export(parsed, out, err) == 0
        shown = _drain(master)
    os.close(master)
    assert re.search(r"\[#*\s*\]\s+\d+%\s+[\d,]+ records, [\d,]+ MB, [\d,]+ rec/s, ETA (\d+:\d\d|\?)", shown), shown
    assert shown.endswith("\r")            # cleared before the summary
    assert out.getvalue().startswith("exported ")


def test_a_directory_in_use_is_refused_and_an_earlier_export_replaced(cluster, tmp_path, capsys):
    to = tmp_path / "again"
    assert main(args(cluster, to, "--where", "topic = 'payments'")) == 0
    capsys.readouterr()
    assert main(args(cluster, to, "--where", "topic = 'payments'")) == 2
    assert "is not empty (give --overwrite" in capsys.readouterr().err
    assert main(args(cluster, to, "--where", "topic = 'compacted'", "--overwrite")) == 0
    assert {k[0] for k in read_back(to)[1]} == {"compacted"}
    (to / "notes.txt").write_text("mine")
    assert main(args(cluster, to, "--overwrite")) == 2
    assert "holds 'notes.txt', which no export wrote" in capsys.readouterr().err
