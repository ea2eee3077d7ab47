"""Before a read: what a plan will cost, counted the way the reader issues its GETs, and the
budget check that refuses a read before any GET (``cost.budget.usd``).  Prices and the report
after a read are :mod:`kafka_tiered_source.cost`'s."""
from __future__ import annotations

import math

from ..cost import CostModel
from ..dataclass import dataclass, field
from ..errors import BudgetExceededError
from .plan import Plan
from .preflight import check_gets, checks_storage
from .tasks import BrokerRange, RemoteRange
from .txn_ends import MarkerCost

# What an estimate says of the store (Estimate.storage_check).
CHECKED = "checked"              # one request with the read's options answered, as the read's will
NOT_CHECKED = "not checked"      # check=False / --no-check: planned without asking storage
NOTHING_TO_CHECK = "nothing to check"   # nothing is read from storage directly


@dataclass(frozen=True)
class Estimate:
    """What a planned read will do, counted the way the reader issues its GETs: one GET per
    ``fetch.remote.part.size.bytes`` part of each remote range, plus, for the ``aiven`` layout,
    one manifest GET per segment per task (each task's fetcher caches manifests) for the segments
    whose manifest the planner did not hand the tasks (``RemoteSegment.manifest_info``), plus
    the driver's storage check before any task (``check_gets``: a byte of a planned range in
    the layouts without manifests, :mod:`.preflight`)."""
    gets: int                 # total GETs: log parts + manifests + the storage check
    log_gets: int
    manifest_gets: int
    bytes: int                # .log bytes to be read (manifests, a few hundred bytes each, excluded)
    dollars: float
    partitions: int           # Spark partitions (tasks) planned
    remote_ranges: int
    broker_ranges: int
    broker_bytes: int         # the planner's guess for offsets still on the brokers
    model: CostModel = field(default_factory=CostModel)
    locators: dict = field(default_factory=dict)   # locator name -> partitions it served
    # "topic-partition" -> {"gets", "bytes", "segments", "broker_bytes", "start", "end"}
    by_partition: dict = field(default_factory=dict)
    where: str = ""           # the pushed-down filters the plan read less with ("" = none)
    check_gets: int = 0       # the driver's storage check (preflight.check_gets)
    # CHECKED, NOT_CHECKED or NOTHING_TO_CHECK; "" for a count alone (estimate_plan: the budget
    # check, a job description), which says nothing about storage
    storage_check: str = ""
    # read_committed: what planning spent finding the markers of transactions open at each
    # range's end (txn_ends.MarkerCost totals: later .txnindex GETs and bytes, broker fetches
    # and their bytes); spent already, so not in gets/bytes/dollars, which count the read
    markers: MarkerCost = field(default_factory=MarkerCost)

    @property
    def storage_note(self) -> str:
        """One clause on whether storage was asked: an estimate made offline on purpose says so."""
        if self.storage_check == CHECKED:
            return "storage checked: it answered with these options"
        if self.storage_check == NOTHING_TO_CHECK:
            return "storage not needed: nothing is read from it directly"
        if self.storage_check == NOT_CHECKED:
            return ("storage NOT checked (check=False): a wrong prefix, layout, bucket or key would only "
                    "show when the read starts")
        return ""

    def __str__(self) -> str:
        return (f"{self.gets:,} GETs ({self.log_gets:,} ranged + {self.manifest_gets:,} manifests), "
                f"{self.bytes:,} bytes from storage, ${self.dollars:.6f} ({self.model.describe()}); "
                f"{self.partitions} Spark partitions, {self.remote_ranges} remote ranges, "
                f"{self.broker_ranges} broker ranges (~{self.broker_bytes:,} bytes via brokers); "
                f"segments located by " + (", ".join(f"{n} ({k} partitions)" for n, k in
                                                      sorted(self.locators.items())) or "none")
                + (f"; rows where {self.where}" if self.where else "")
                + (f"; read_committed markers past the ends: {self.markers.describe()}" if self.markers else "")
                + (f"; {self.storage_note}" if self.storage_check else ""))

    def as_dict(self) -> dict:
        """JSON-able: every count, the dollars, the price model and the per-partition figures."""
        return {"gets": self.gets, "log_gets": self.log_gets, "manifest_gets": self.manifest_gets,
                "bytes": self.bytes, "dollars": self.dollars, "spark_partitions": self.partitions,
                "remote_ranges": self.remote_ranges, "broker_ranges": self.broker_ranges,
                "broker_bytes": self.broker_bytes, "price_model": self.model.describe(),
                "locators": dict(self.locators), "where": self.where or None,
                "storage_check": self.storage_check or None, "markers": self.markers.as_dict(),
                "partitions": {k: dict(v) for k, v in self.by_partition.items()}}


def estimate_plan(plan: Plan, options) -> Estimate:
    """Count the GETs and bytes of a :class:`~kafka_tiered_source.planning.plan.Plan`."""
    storage = options.storage
    part = max(1, storage.part_size)
    aiven = storage.layout == "aiven"
    model = options.cost
    log_gets = nbytes = manifests = remote = broker = broker_bytes = 0
    per = {f"{pr.topic}-{pr.partition}": {"start": pr.start, "end": pr.end, "gets": 0, "bytes": 0,
                                           "segments": 0, "broker_bytes": 0} for pr in plan.partitions}
    segments: set = set()
    for task in plan.tasks:
        seen = set()
        for r in task.ranges:
            mine = per.setdefault(f"{r.topic}-{r.partition}", {"start": r.offset_start, "end": r.offset_end,
                                                              "gets": 0, "bytes": 0, "segments": 0,
                                                              "broker_bytes": 0})
            if isinstance(r, RemoteRange):
                remote += 1
                size = r.segment.size_bytes
                end = min(r.byte_end, size) if size is not None else r.byte_end
                length = max(0, end - r.byte_start)
                nbytes += length
                log_gets += math.ceil(length / part)
                mine["bytes"] += length
                mine["gets"] += math.ceil(length / part)
                if r.segment.segment_id not in segments:
                    segments.add(r.segment.segment_id)
                    mine["segments"] += 1
                if aiven and r.segment.manifest_info is None and r.segment.segment_id not in seen:
                    seen.add(r.segment.segment_id)
                    manifests += 1
                    mine["gets"] += 1
            elif isinstance(r, BrokerRange):
                broker += 1
                broker_bytes += r.estimated_bytes
                mine["broker_bytes"] += r.estimated_bytes
    checks = check_gets(plan, options)
    if checks:   # a byte of the first planned range, counted under its partition as the read does
        first = plan.remote_ranges[0]
        per[f"{first.topic}-{first.partition}"]["gets"] += checks
        per[f"{first.topic}-{first.partition}"]["bytes"] += checks
    gets = log_gets + manifests + checks
    nbytes += checks
    locators: dict = {}
    for name in plan.locators.values():
        locators[name] = locators.get(name, 0) + 1
    markers = MarkerCost()
    for (topic, p), spent in plan.marker_costs.items():
        markers += spent
        per.setdefault(f"{topic}-{p}", {})["markers"] = spent.as_dict()
    return Estimate(gets, log_gets, manifests, nbytes, model.dollars(gets, nbytes), len(plan.tasks),
                    remote, broker, broker_bytes, model, locators, per, check_gets=checks, markers=markers)


def check_budget(estimate: Estimate) -> None:
    """Raise :class:`BudgetExceededError` when the estimate exceeds ``cost.budget.usd``."""
    budget = estimate.model.budget_usd
    if budget is not None and estimate.dollars > budget:
        raise BudgetExceededError(
            f"kafka-tiered: the read is estimated at ${estimate.dollars:.6f}, over the budget of "
            f"${budget:g} (option 'cost.budget.usd'); nothing was read. Estimate: {estimate}")


def estimate_checked(planned: Plan, options, check: bool = True) -> Estimate:
    """:func:`estimate_plan`, after the storage check the read would make (``check``; raises
    :class:`~kafka_tiered_source.errors.StoragePreflightError`), saying which it was.  The plan
    is counted as planned: the check's own GET is the one a task would make (or
    :func:`~.preflight.check_gets` counts it)."""
    from ..dataclass import replace
    from .preflight import preflight
    est = estimate_plan(planned, options)
    if not checks_storage(planned, options):
        return replace(est, storage_check=NOTHING_TO_CHECK)
    if not check:
        return replace(est, storage_check=NOT_CHECKED)
    preflight(planned, options)
    return replace(est, storage_check=CHECKED)
