"""Backend selection: native by default, pure Python with KAFKA_TIERED_NO_EXTENSIONS=1, and no
silent fallback when the extension is missing; both backends agree on the fixtures."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from kafka_tiered_source.records import ReadCommittedFilter, decode_batches
from test_records_fixtures import PARTITIONS, segments

pytestmark = pytest.mark.decoder


def run(code, **env):
    e = dict(os.environ)
    e.pop("KAFKA_TIERED_NO_EXTENSIONS", None)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=120)


def test_env_selects_the_backend():
    code = "import kafka_tiered_source as k; print(k.decoder_backend())"
    assert run(code).stdout.strip() == "native"
    assert run(code, KAFKA_TIERED_NO_EXTENSIONS="1").stdout.strip() == "python"


def test_missing_extension_is_a_clear_error_not_a_fallback():
    code = (
        "import sys; sys.modules['kafka_tiered_source._native'] = None\n"
        "import kafka_tiered_source as k\n"
        "from kafka_tiered_source.errors import KafkaTieredError\n"
        "for f in (k.decoder_backend, lambda: k.decode(b'')):\n"
        "    try:\n"
        "        f(); print('no error')\n"
        "    except KafkaTieredError as e:\n"
        "        print('KafkaTieredError', 'KAFKA_TIERED_NO_EXTENSIONS' in str(e))\n")
    r = run(code)
    assert r.stdout.split("\n")[:2] == ["KafkaTieredError True"] * 2, r.stderr
    # with the pure-Python backend chosen explicitly the extension is not needed
    r = run(code.replace("KafkaTieredError as e", "Exception as e"),
            KAFKA_TIERED_NO_EXTENSIONS="1")
    assert r.stdout.split("\n")[:2] == ["no error"] * 2, r.stderr


@pytest.mark.parametrize("committed", [False, True])
@pytest.mark.parametrize("tp", sorted(PARTITIONS))
def test_native_and_python_agree_on_fixtures(tp, committed):
    m = PARTITIONS[tp]
    data = b"".join(segments(tp))
    tables = []
    for backend in ("native", "python"):
        filt = ReadCommittedFilter([(a["producerId"], a["firstOffset"])
                                    for a in m["abortedTransactions"]],
                                   m["lastStableOffset"]) if committed else None
        res = decode_batches(data, topic=m["topic"], partition=m["partition"], filter=filt,
                             backend=backend, max_batch_bytes=50_000)
        tables.append((res.table(), res.consumed, res.next_offset,
                       [b.num_rows for b in res.batches]))
    assert tables[0][0].equals(tables[1][0])
    assert tables[0][1:] == tables[1][1:]
