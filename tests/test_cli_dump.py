"""`kafka-tiered dump` on segments written by Kafka, and on damaged copies of them."""
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

from conftest import FIXTURES, ROOT
from kafka_tiered_source.cli import main
from kafka_tiered_source.records.header import iter_headers

pytestmark = pytest.mark.decoder

SEG = os.path.join(FIXTURES, "segments", "payments-0", "00000000000000000281.log")   # has ABORT + COMMIT


def expected_records(tp, lo, hi):
    with open(os.path.join(FIXTURES, "expected", f"{tp}.uncommitted.jsonl")) as f:
        return [r for r in map(json.loads, f) if lo <= r["offset"] <= hi]


def run_main(*argv):
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(list(argv))
    return rc, buf.getvalue()


def test_json_batches_and_records_match_kafka():
    rc, out = run_main("dump", SEG, "--json", "--records")
    assert rc == 0
    batches = [json.loads(line) for line in out.splitlines()]
    data = open(SEG, "rb").read()
    headers = list(iter_headers(data))
    assert [(b["position"], b["baseOffset"], b["lastOffset"], b["count"]) for b in batches] == [
        (h.position, h.base_offset, h.last_offset, h.record_count) for h in headers]
    assert all(b["crcValid"] and b["magic"] == 2 for b in batches)
    assert {b["compresscodec"] for b in batches} <= {"none", "gzip", "snappy", "lz4", "zstd"}
    controls = [b for b in batches if b["isControl"]]
    assert {b["controlType"] for b in controls} == {"ABORT", "COMMIT"}
    assert all(b["records"] == [] for b in controls)   # control records are never shown
    got = [r for b in batches for r in b.get("records", [])]
    exp = expected_records("payments-0", headers[0].base_offset, headers[-1].last_offset)
    assert got == exp


def test_text_output_like_kafka_dump_log():
    r = subprocess.run([sys.executable, "-m", "kafka_tiered_source.cli", "dump", SEG,
                        "--records"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Dumping {SEG}"
    first = lines[1]
    for field in ("position: 0", "baseOffset: 281", "compresscodec:", "producerId:",
                  "producerEpoch:", "isTransactional:", "isControl:", "crcValid: true"):
        assert field in first
    recs = [ln for ln in lines if ln.startswith("| offset:")]
    data = open(SEG, "rb").read()
    hs = list(iter_headers(data))
    assert len(recs) == len(expected_records("payments-0", hs[0].base_offset, hs[-1].last_offset))
    assert "controlType: ABORT" in r.stdout or "controlType: COMMIT" in r.stdout


def test_damaged_segment(tmp_path):
    data = bytearray(open(SEG, "rb").read())
    hs = list(iter_headers(bytes(data)))
    data[hs[1].position + 70] ^= 0x55          # inside the second batch: CRC must fail
    bad = tmp_path / "bad.log"
    bad.write_bytes(bytes(data[:-10]))         # and cut the last batch short
    rc, out = run_main("dump", str(bad), "--json", "--records")
    assert rc == 1
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["crcValid"] is True and lines[1]["crcValid"] is False
    assert "CRC mismatch" in lines[1]["error"] and lines[1]["records"] == []
    assert lines[-1] == {"position": hs[-1].position,
                         "error": f"truncated batch: {hs[-1].size - 10} of {hs[-1].size} bytes present"}


def test_subcommand_is_required():
    with pytest.raises(SystemExit) as ei:
        main([])
    assert ei.value.code == 2


def test_module_entry_point_lists_every_subcommand():
    # ``python -m kafka_tiered_source.cli`` runs a second copy of the module as __main__; the
    # subcommands registered on the importable module (dump, and broker from testing.cli) must
    # still be there.
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "kafka_tiered_source.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "dump" in out and "broker" in out
