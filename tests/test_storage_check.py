"""Estimates check what they estimate (issue 28): ``estimate()``, ``kafka-tiered estimate`` and
``kafka-tiered segments`` (and ``scan()``) run the Spark read's storage check, so a misspelt
prefix, a wrong ``remote.storage.layout`` or a bucket that does not exist fail at once with
StoragePreflightError instead of printing a confident plan; ``check=False`` / ``--no-check``
plan without asking storage and say so.

orders-1 of the Kafka 3.9.1 fixtures is tiered to a moto S3 server (bucket ``tiered``, prefix
``kt/``, Aiven layout) by a broker that is today's Kafka: the segments are found through
``__remote_log_metadata``, so planning itself never touches the store and only the check can
tell that the storage options are wrong.
"""
from __future__ import annotations

import json
import uuid

import pytest

from broker_fixtures import s3_tiered_cluster
from storage_servers import S3_KEY_ID, S3_SECRET

import kafka_tiered_source as kts
from kafka_tiered_source.cli import main
from kafka_tiered_source.errors import ConfigError, StoragePreflightError

TOPIC = "orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with s3_tiered_cluster(tmp_path_factory.mktemp("check"), "tiered", [(TOPIC, 1)], kip1248=False,
                           remote_log_metadata_partitions=3) as c:
        yield c


def storage(c, uri="s3://tiered/kt/", **over) -> dict:
    return {"remote.storage.uri": uri, "remote.storage.s3.endpoint": c.moto.endpoint,
            "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": S3_KEY_ID,
            "remote.storage.s3.secret.access.key": S3_SECRET, **over}


def read(c, **over) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC, **storage(c, **over)}


WRONG = {
    "misspelt prefix": ({"uri": "s3://tiered/kt-typo/"}, "not found", "kt-typo/orders-"),
    "wrong layout": ({"remote.storage.layout": "kafka-local-tiered"}, "not found", "s3://tiered/kt/orders-1-"),
    "missing bucket": ({"uri": f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/kt/"}, "no such bucket", "/kt/orders-"),
}


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_args(c, over: dict) -> list[str]:
    opts = storage(c, **over)
    uri = opts.pop("remote.storage.uri")
    return ["--bootstrap-servers", c.bootstrap_servers, "--topic", TOPIC, "--remote-storage-uri", uri,
            *[x for k, v in opts.items() for x in ("-o", f"{k}={v}")]]


def test_the_right_options_are_checked_and_say_so(cluster, capsys):
    est = kts.estimate(None, read(cluster))
    assert est.storage_check == "checked" and est.gets > 0 and "storage checked" in str(est)
    code, out, _ = cli(capsys, "estimate", *cli_args(cluster, {}), "--json")
    assert code == 0 and json.loads(out)["storage_check"] == "checked"
    nothing = kts.estimate(None, read(cluster, **{"fetch.remote.fallback": "always"}))
    assert nothing.storage_check == "nothing to check" and "nothing is read from it directly" in str(nothing)


@pytest.mark.parametrize("case", sorted(WRONG))
def test_estimate_fails_on_wrong_storage_as_the_read_does(cluster, case):
    over, what, where = WRONG[case]
    with pytest.raises(StoragePreflightError) as info:
        kts.estimate(None, read(cluster, **over))
    text = str(info.value)
    assert what in text and where in info.value.location and "backend s3" in text
    assert S3_SECRET not in text
    with pytest.raises(StoragePreflightError):     # the read itself, without Spark, the same
        kts.scan(read(cluster, **over))
    # offline on purpose: the plan, saying that storage was not checked
    est = kts.estimate(None, read(cluster, **over), check=False)
    assert est.storage_check == "not checked" and est.gets > 0
    assert "storage NOT checked (check=False)" in str(est)


@pytest.mark.parametrize("case", sorted(WRONG))
@pytest.mark.parametrize("command", ["estimate", "segments"])
def test_the_command_line_fails_on_wrong_storage(cluster, capsys, case, command):
    over, what, where = WRONG[case]
    code, out, err = cli(capsys, command, *cli_args(cluster, over))
    assert code == 2 and out == ""
    assert f"kafka-tiered {command}: error: remote storage check failed" in err and what in err and where in err
    assert "--no-check plans without checking storage" in err and S3_SECRET not in err
    code, out, err = cli(capsys, command, *cli_args(cluster, over), "--no-check")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("storage: NOT checked (--no-check)")
    code, out, _ = cli(capsys, command, *cli_args(cluster, over), "--no-check", "--json")
    rows = [json.loads(out)] if command == "estimate" else [json.loads(line) for line in out.splitlines()]
    assert rows and {r["storage_check"] for r in rows} == {"not checked"}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_without_a_broker_the_listing_is_the_check(cluster, capsys, case):
    """Offline the plan comes from listing the store, so planning itself meets wrong storage:
    a missing bucket is the storage check's error; a prefix or layout under which the topic has
    no segments is an options error naming both (the Spark read fails the same ways)."""
    over, _, _ = WRONG[case]
    opts = read(cluster, **over)
    del opts["kafka.bootstrap.servers"]
    opts.setdefault("remote.storage.layout", "aiven")
    if case == "missing bucket":
        expected, text = StoragePreflightError, "no such bucket or container"
    else:
        expected = ConfigError
        text = ("under prefix 'kt-typo/' (aiven layout)" if case == "misspelt prefix"
                else "under prefix 'kt/' (kafka-local-tiered layout)")
    for call in (lambda: kts.estimate(None, opts), lambda: kts.estimate(None, opts, check=False),
                 lambda: kts.scan(opts)):
        with pytest.raises(expected) as info:
            call()
        assert text in str(info.value)
        if expected is ConfigError:
            assert "has no tiered segments" in str(info.value)
        else:
            assert info.value.location.startswith("s3://no-such-bucket-") and "backend s3" in str(info.value)
    args = [a for a in cli_args(cluster, over) if a not in ("--bootstrap-servers", cluster.bootstrap_servers)]
    code, out, err = cli(capsys, "estimate", *args, "-o", "remote.storage.layout=aiven"
                         if "remote.storage.layout" not in over else "cost.preset=aws-s3-standard")
    assert code == 2 and out == "" and text in err
