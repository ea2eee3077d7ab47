"""The cost model: presets, overrides through the options, the report's arithmetic and the
estimate's GET counting on plans built from the planner's own types."""
from __future__ import annotations

import pytest

from kafka_tiered_source import cost_report
from kafka_tiered_source.cost import PRESETS, CostModel
from kafka_tiered_source.errors import BudgetExceededError
from kafka_tiered_source.planning.estimate import check_budget, estimate_plan
from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.metrics.reader import ReadStats, ReadTotals
from kafka_tiered_source.planning import BrokerRange, Plan, ReadTask, RemoteRange
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.storage.segment import RemoteSegment

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}
GIB = 2 ** 30


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_prices_every_egress_class(preset):
    for egress in ("same-region", "inter-az", "inter-region", "internet"):
        m = CostModel.of(preset, egress)
        assert m.get_per_1000 == pytest.approx(0.0004)      # all three list $0.0004 per 1,000 reads
        assert m.egress_per_gb >= 0
    assert CostModel.of(preset, "same-region").egress_per_gb == 0.0
    assert CostModel.of(preset, "internet").egress_per_gb > CostModel.of(preset, "inter-region").egress_per_gb


def test_dollars_are_requests_plus_bytes():
    m = CostModel.of("aws-s3-standard", "internet")
    # 10,000 GETs and 10 GiB out to the internet: $0.004 + $0.90
    assert m.dollars(10_000, 10 * GIB) == pytest.approx(0.904)
    assert CostModel.of("gcs-standard", "internet").dollars(0, GIB) == pytest.approx(0.12)
    assert CostModel.of("azure-hot", "internet").dollars(0, GIB) == pytest.approx(0.087)


def test_options_choose_and_override_rates():
    o = ReadOptions.parse({**BASE, "cost.preset": "GCS-Standard", "cost.egress": "inter-region",
                           "cost.rate.get.per.1000": "0.001", "cost.budget.usd": "2.5"})
    assert (o.cost.preset, o.cost.egress, o.cost.get_per_1000, o.cost.egress_per_gb,
            o.cost.budget_usd) == ("gcs-standard", "inter-region", 0.001, 0.02, 2.5)
    o = ReadOptions.parse({**BASE, "cost.rate.egress.per.gb": "0.05", "cost.rate.broker.per.gb": "0"})
    assert (o.cost.preset, o.cost.egress_per_gb, o.cost.broker_per_gb) == ("aws-s3-standard", 0.05, 0.0)
    assert ReadOptions.parse(BASE).cost == CostModel.of()
    for name, bad in (("cost.preset", "s3"), ("cost.egress", "lan"), ("cost.rate.get.per.1000", "-1"),
                      ("cost.rate.egress.per.gb", "free"), ("cost.budget.usd", "")):
        with pytest.raises(ConfigError) as info:
            ReadOptions.parse({**BASE, name: bad})
        assert info.value.option == name and name in str(info.value)


def test_metrics_options():
    o = ReadOptions.parse({**BASE, "metrics.jsonl.path": " /tmp/m.jsonl ", "telemetry.push.enabled": "false"})
    assert (o.metrics_jsonl_path, o.telemetry_push) == ("/tmp/m.jsonl", False)
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse({**BASE, "telemetry.push.enabled": "maybe"})
    assert info.value.option == "telemetry.push.enabled"
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse({**BASE, "cost.presets": "azure-hot"})
    assert "Did you mean 'cost.preset'" in str(info.value)


def test_report_per_client_and_topic():
    a, b, c = ReadStats(), ReadStats(), ReadStats()
    a.remote_requests, a.remote_bytes, a.broker_equivalent_bytes, a.records = 10, 4 * GIB, 4 * GIB, 100
    a.remote_errors.update({"RemoteTimeout": 1})
    b.remote_requests, b.remote_bytes, b.broker_equivalent_bytes = 30, 2 * GIB, 2 * GIB
    c.remote_requests, c.remote_bytes = 5, 1000
    totals = ReadTotals({("etl", "orders", 0, "s3"): a, ("etl", "orders", 1, "s3"): b,
                         ("adhoc", "orders", 0, "s3"): c}, tasks=3,
                        cost=CostModel.of("aws-s3-standard", "internet"))
    report = cost_report(totals)
    rows = {(r.client_id, r.topic): r for r in report.rows}
    etl = rows[("etl", "orders")]
    assert (etl.remote_requests, etl.remote_bytes, etl.remote_failed) == (40, 6 * GIB, 1)
    assert etl.dollars == pytest.approx(40 * 0.0004 / 1000 + 6 * 0.09)
    assert etl.bytes_per_get == pytest.approx(6 * GIB / 40)
    assert etl.error_rate == pytest.approx(1 / 40)
    assert etl.broker_path_dollars == pytest.approx(6 * 0.02)   # EC2 inter-AZ, both directions
    assert rows[("adhoc", "orders")].remote_requests == 5
    assert report.remote_requests == 45 and report.dollars == pytest.approx(sum(r.dollars for r in report.rows))
    # a model given explicitly wins over the read's own
    same_region = cost_report(totals, preset="aws-s3-standard", egress="same-region")
    assert same_region.dollars == pytest.approx(45 * 0.0004 / 1000)
    assert "etl" in str(report) and "adhoc" in str(report)
    with pytest.raises(TypeError):
        cost_report({"remote_requests": 1})


def _segment(i, size, topic="orders"):
    return RemoteSegment(topic, "AAAAAAAAAAAAAAAAAAAAAA", 0, f"seg{i}", i * 100, i * 100 + 99, size)


def _plan(tasks):
    return Plan([ReadTask(n, tuple(rs)) for n, rs in enumerate(tasks)], [])


def test_estimate_counts_parts_and_manifests_per_task():
    opts = ReadOptions.parse({**BASE, "fetch.remote.part.size.bytes": "1000"})
    s0, s1 = _segment(0, 2500), _segment(1, 900)
    plan = _plan([
        [RemoteRange(s0, 0, 1800, 0, 60, 1800, 60), RemoteRange(s1, 0, 900, 100, 200, 900, 100)],
        # the same segment split into a second task: that task's fetcher reads its manifest again
        [RemoteRange(s0, 1700, 2500, 60, 100, 800, 40),
         BrokerRange("orders", 0, "AAAAAAAAAAAAAAAAAAAAAA", 200, 300, 5000)],
    ])
    est = estimate_plan(plan, opts)
    assert est.log_gets == 2 + 1 + 1           # ceil(1800/1000) + ceil(900/1000) + ceil(800/1000)
    assert est.manifest_gets == 3              # (task 0: s0, s1) + (task 1: s0)
    assert est.bytes == 1800 + 900 + 800
    assert (est.partitions, est.remote_ranges, est.broker_ranges, est.broker_bytes) == (2, 3, 1, 5000)
    assert est.dollars == pytest.approx(7 * 0.0004 / 1000)
    # layouts without manifests: the parts, and the driver's storage check (one byte of a
    # planned range) that the Aiven layout makes with a manifest a task would read anyway
    flat = ReadOptions.parse({**BASE, "fetch.remote.part.size.bytes": "1000",
                              "remote.storage.layout": "kafka-local-tiered"})
    assert (estimate_plan(plan, flat).gets, estimate_plan(plan, flat).check_gets) == (4 + 1, 1)
    assert est.check_gets == 0
    # a segment that carries its manifest info (the planner read the manifest) costs no GET
    from dataclasses import replace
    from kafka_tiered_source.storage.aiven import ManifestInfo
    carried = replace(s0, manifest_info=ManifestInfo(2500, 4 << 20))
    plan.tasks[:] = [ReadTask(t.index, tuple(replace(r, segment=carried) if isinstance(r, RemoteRange)
                                             and r.segment == s0 else r for r in t.ranges))
                     for t in plan.tasks]
    assert estimate_plan(plan, opts).manifest_gets == 1      # task 0: s1


def test_budget_refusal_names_the_option_and_the_figures():
    opts = ReadOptions.parse({**BASE, "cost.budget.usd": "0.000001"})
    plan = _plan([[RemoteRange(_segment(i, 100), 0, 100, i * 100, i * 100 + 100, 100, 100)
                   for i in range(10)]])
    est = estimate_plan(plan, opts)
    with pytest.raises(BudgetExceededError) as info:
        check_budget(est)
    assert "cost.budget.usd" in str(info.value) and "20 GETs" in str(info.value)
    check_budget(estimate_plan(plan, ReadOptions.parse({**BASE, "cost.budget.usd": "1"})))
    check_budget(estimate_plan(plan, ReadOptions.parse(BASE)))     # no budget: never refused
