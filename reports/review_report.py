"""The review report: one row per budget node over a period, with every figure defined once.

The period, shares in force, capacity, entitlement, delivered, unallocated and demand
GPU-hours are defined in ``reports.accounting``, which computes them; this module adds:

* Attainment = delivered / min(entitlement, demand): 100% means the budget got all it asked
  for up to its entitlement; above 100% it used idle capacity beyond its entitlement; empty
  when it neither asked nor was entitled.
* Waits: for allocated workloads that started in the period, the time from submission (or
  requeue) to start; median and p95 with linear interpolation. Workloads still waiting at the
  end are not in the waits (they are in demand).
* Preemptions: runs that ended preempted in the period (allocated and unallocated).
* GPU-h lost to preemption, counted in the period the run ended: for a non-resumable run its
  whole GPU-time (its work is gone); for a resumable run the grace period from the signal to
  the stop (time spent checkpointing instead of computing).
* Utilization = busy / measured GPU-seconds of the budget's runs (allocated and unallocated),
  from the hourly utilization rollups of the fleet's telemetry; empty when the fleet reports
  none.
* Impact (dashboards): over leaf budgets with demand, min(1, attainment) averaged with the
  budgets' time-weighted fractions as weights (capped so one budget's use of idle capacity
  cannot hide another's shortfall).
"""


from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from budgets.models import BudgetNode
from reports.accounting import (
    HOUR,
    Busy,
    Capacity,
    Tree,
    delivered_by_period,
    entitlement_seconds,
    period_until,
    quantile,
    queue_stays,
    run_facts,
    seconds,
    share_segments,
    utilization_by_period,
)

DEFINITIONS = [
    ("Shares", "shares in force, weighted by the time each value held (from the audit log)"),
    ("% of cluster", "fraction of the cluster (product of shares over siblings' shares down "
     "the path), time-weighted"),
    ("Entitlement", "fraction x GPUs on healthy hosts, integrated over the elapsed period"),
    ("Delivered", "allocated GPU-hours charged to the budget (hourly usage rollups)"),
    ("Unallocated", "GPU-hours of free, preemptible runs (min_runtime 0); never charged"),
    ("Demand", "delivered + GPU-hours the budget's allocated workloads spent pending"),
    ("Attainment", "delivered / min(entitlement, demand); empty without demand or entitlement"),
    ("Waits", "submission or requeue to start, allocated workloads started in the period; "
     "median and p95"),
    ("Preemptions", "runs ended by preemption in the period"),
    ("GPU-h lost", "non-resumable preempted runs: all their GPU-time; resumable ones: the grace "
     "period from signal to stop"),
    ("Utilization", "GPU busy fraction the fleet's telemetry reports for the budget's runs: busy "
     "/ measured GPU-hours (hourly utilization rollups); empty when the fleet reports none"),
]



@dataclass
class ReportRow:
    node: BudgetNode
    depth: int
    leaf: bool
    shares: float | None
    fraction: float
    entitlement_h: float
    delivered_h: float
    unallocated_h: float
    demand_h: float
    waits: list[float]  # seconds
    preemptions: int
    lost_h: float
    busy: Busy = field(default_factory=Busy)

    @property
    def utilization(self) -> float | None:
        return self.busy.fraction

    @property
    def attainment(self) -> float | None:
        basis = min(self.entitlement_h, self.demand_h)
        return self.delivered_h / basis if basis > 0 else None

    @property
    def wait_median(self) -> float | None:
        return quantile(self.waits, 0.5)

    @property
    def wait_p95(self) -> float | None:
        return quantile(self.waits, 0.95)


@dataclass
class Report:
    cluster: object
    start: datetime
    end: datetime
    until: datetime  # end of the elapsed part
    rows: list[ReportRow]
    capacity_h: float

    @property
    def hours(self) -> float:
        return max(0.0, seconds(self.start, self.until)) / HOUR


def budget_report(cluster, start: datetime, end: datetime, now: datetime | None = None,
                  tree: Tree | None = None) -> Report:
    """One row per budget node in tree order; every figure of a node covers its subtree, so a
    parent's row is the subtotal of its children's."""
    return budget_reports(cluster, [(start, end)], now=now, tree=tree)[0]


def budget_reports(cluster, periods: list[tuple[datetime, datetime]],
                   now: datetime | None = None, tree: Tree | None = None) -> list[Report]:
    """The `budget_report` of each period of ``periods`` (oldest first, none overlapping),
    reading each kind of data once over their whole span rather than once per period."""
    now = now or timezone.now()
    tree = tree or Tree()
    untils = [period_until(start, end, now) for start, end in periods]
    # Shares in force are averaged over the part of the period the cluster existed: before it
    # nobody held shares, and that must not dilute the average.
    existed = [max(start, min(cluster.created, until))
               for (start, _), until in zip(periods, untils, strict=True)]
    segments = share_segments(cluster, tree, existed[0], untils[-1])
    cuts = [seg.start for seg in segments]
    span_capacity = Capacity.load(cluster, existed[0], untils[-1], cuts=[*existed, *cuts])
    delivered = delivered_by_period(cluster, periods)
    facts = run_facts(cluster, periods, now)
    used = utilization_by_period(cluster, periods)
    pending, waits = _queue_by_period(cluster, periods, untils)
    reports = []
    for index, (start, end) in enumerate(periods):
        until = untils[index]
        capacity = span_capacity.window(cluster, existed[index], until, cuts)
        reports.append(_report(
            cluster, tree, start, end, until, existed[index], segments, capacity,
            delivered[index], facts[index], used[index], pending[index], waits[index],
        ))
    return reports


def _queue_by_period(cluster, periods, untils) -> tuple[list[dict[int, float]],
                                                         list[dict[int, list[float]]]]:
    """Per period: GPU-seconds each budget's allocated workloads spent pending in its elapsed
    part, and the waits of those that started in it, from the queue stays of the whole span.
    A stay counts in the periods it overlaps, found by bisection (most stay in one)."""
    pending: list[dict[int, float]] = [defaultdict(float) for _ in periods]
    waits: list[dict[int, list[float]]] = [defaultdict(list) for _ in periods]
    starts = [start.timestamp() for start, _ in periods]
    bounds = [(start.timestamp(), until.timestamp(), end.timestamp())
              for (start, end), until in zip(periods, untils, strict=True)]
    last = len(periods) - 1
    for stay in queue_stays(cluster, periods[0][0], periods[-1][1], allocated_only=True):
        first = max(0, bisect.bisect_right(starts, stay.opened) - 1)
        final = last if stay.closed is None else bisect.bisect_right(starts, stay.closed) - 1
        for index in range(first, final + 1):
            s0, s1, s_end = bounds[index]
            if stay.finished is not None and stay.finished < s0:
                continue  # the period's own queue_stays leaves out workloads over before it
            pending[index][stay.budget_id] += stay.gpus * stay.pending_seconds(s0, s1)
            if stay.started and s0 <= stay.closed < s_end:
                waits[index][stay.budget_id].append(stay.wait)
    return pending, waits


def _report(cluster, tree: Tree, start, end, until, existed, segments, capacity: Capacity,
            delivered, facts, used, pending, waits) -> Report:
    entitled, share_time, fraction_time = entitlement_seconds(segments, capacity, existed, until)
    delivered = tree.subtree_sums(delivered)
    unallocated = tree.subtree_sums(facts.unallocated_seconds)
    preemptions = tree.subtree_sums(facts.preemptions)
    lost = tree.subtree_sums(facts.lost_seconds)
    measured = tree.subtree_sums({pk: b.measured for pk, b in used.items()})
    busy = tree.subtree_sums({pk: b.busy for pk, b in used.items()})
    pending = tree.subtree_sums(pending)
    waits_sub = tree.subtree_lists(waits)
    span = seconds(existed, until)
    rows = []
    for node in tree.nodes:
        pk = node.pk
        rows.append(
            ReportRow(
                node=node,
                depth=node.depth,
                leaf=tree.is_leaf(node),
                shares=(share_time[pk] / span) if span and pk in share_time else None,
                fraction=(fraction_time.get(pk, 0.0) / span) if span else 0.0,
                entitlement_h=entitled.get(pk, 0.0) / HOUR,
                delivered_h=delivered[pk] / HOUR,
                unallocated_h=unallocated[pk] / HOUR,
                demand_h=(delivered[pk] + pending[pk]) / HOUR,
                waits=waits_sub[pk],
                preemptions=int(preemptions[pk]),
                lost_h=lost[pk] / HOUR,
                busy=Busy(measured[pk], busy[pk]),
            )
        )
    return Report(cluster, start, end, until, rows, capacity.gpu_seconds(start, until) / HOUR)


# The table shown on the page and downloaded as CSV: one definition for both.
COLUMNS = [
    ("budget", "Budget"),
    ("kind", "Kind"),
    ("shares", "Shares"),
    ("percent", "% of cluster"),
    ("entitlement", "Entitlement GPU-h"),
    ("delivered", "Delivered GPU-h"),
    ("unallocated", "Unallocated GPU-h"),
    ("demand", "Demand GPU-h"),
    ("attainment", "Attainment %"),
    ("wait_median", "Median wait (min)"),
    ("wait_p95", "p95 wait (min)"),
    ("waits", "Starts"),
    ("preemptions", "Preemptions"),
    ("lost", "GPU-h lost"),
    ("utilization", "Utilization %"),
]


def _num(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def table(rows: list[ReportRow]) -> list[list[str]]:
    """The cells of the report table, formatted once; empty string means "no value"."""
    out = []
    for row in rows:
        attainment = row.attainment
        out.append([
            row.node.path,
            row.node.kind,
            _num(row.shares),
            _num(100 * row.fraction, 2),
            _num(row.entitlement_h),
            _num(row.delivered_h),
            _num(row.unallocated_h),
            _num(row.demand_h),
            _num(None if attainment is None else 100 * attainment),
            _num(None if row.wait_median is None else row.wait_median / 60),
            _num(None if row.wait_p95 is None else row.wait_p95 / 60),
            str(len(row.waits)),
            str(row.preemptions),
            _num(row.lost_h),
            _num(None if row.utilization is None else 100 * row.utilization),
        ])
    return out



def weighted_impact(leaves) -> float | None:
    """`leaves`: (fraction, entitlement, delivered, demand) of each leaf budget. The
    fraction-weighted mean of min(1, delivered / min(entitlement, demand)) over the budgets
    with a fraction and something to attain."""
    weight = total = 0.0
    for fraction, entitled, delivered, demand in leaves:
        basis = min(entitled, demand)
        if fraction > 0 and basis > 0:
            weight += fraction
            total += fraction * min(1.0, delivered / basis)
    return total / weight if weight else None


def impact(rows: list[ReportRow]) -> float | None:
    return weighted_impact(
        (row.fraction, row.entitlement_h, row.delivered_h, row.demand_h)
        for row in rows if row.leaf
    )
