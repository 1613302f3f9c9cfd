"""The figures of the review report and the dashboards, computed from one cluster's history.

Every figure is defined once here; the pages print `DEFINITIONS` next to the numbers.

A period is a half-open interval ``[start, end)``. Only its elapsed part counts: time after
``now`` (a report for the current month) and time before the cluster existed have no
capacity, so nobody looks under-served by a future that has not happened.

* Shares in force: the allocation audit log (``AllocationChange``) replayed up to the period,
  then every change inside it starts a new segment, so a change at 12:00 on Wednesday counts
  from 12:00 exactly. A node's shares and fraction are weighted by the time each was in force.
  Fractions always come from ``scheduler.engine.fractions`` (the 35% rule). The tree's shape is
  today's: a budget moved to another parent is reported under its new parent for past periods.
* Capacity: GPU-seconds of healthy hosts, from the hourly ``CapacityRollup`` rows the live
  loop charges (the capacity its fair share uses; no rollup, no capacity). An hour cut by a
  share change or the start of a window is split exactly with the occupancy samples (the
  healthy GPUs in force at each moment of the hour); the two pieces add up to the rollup.
* Entitlement GPU-h = integral over the period of fraction(t) x healthy GPUs(t).
* Delivered GPU-h = allocated GPU-seconds charged to the budget's subtree, from the hourly
  ``UsageRollup``: exact to the clock hour (an hour counts when it starts inside the period).
* Unallocated GPU-h = GPU-time of unallocated runs (``min_runtime = 0``) overlapping the
  period, clipped to it. Free, never charged.
* Demand GPU-h = delivered GPU-h + GPU-time the budget's allocated workloads spent pending in
  the period (GPUs x time from submission or requeue to start, cancellation or the end of the
  period). What the budget asked for, whether it got it or not.
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
* Impact (dashboards): over leaf budgets with demand, min(1, attainment) averaged with the
  budgets' time-weighted fractions as weights (capped so one budget's use of idle capacity
  cannot hide another's shortfall).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace

from django.db.models import Case, Count, Exists, Max, OuterRef, Q, Subquery, Sum, When
from django.utils import timezone

from budgets.models import Allocation, AllocationChange, BudgetNode
from budgets.services import depth_first, shares_by_path
from fleet.models import CapacityRollup, Host, HostEvent
from reports.sql import Epoch, bucket_start, moment, time_bucket
from scheduler.engine import BudgetTree, Standing, fractions
from scheduler.engine.contract import workload_class
from scheduler.models import Event, OccupancySample, Run, UsageRollup, Workload

HOUR = 3600.0

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
]


def seconds(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


def quantile(values: list[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default, Excel's PERCENTILE)."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# ---------------------------------------------------------------------------------------------
# The tree


class Tree:
    """Every budget node in tree order, with subtree sums."""

    def __init__(self, nodes: list[BudgetNode] | None = None):
        self.nodes = depth_first(nodes if nodes is not None else list(BudgetNode.objects.all()))
        self.by_pk = {node.pk: node for node in self.nodes}
        self.children: dict[int | None, list[BudgetNode]] = defaultdict(list)
        for node in self.nodes:
            self.children[node.parent_id].append(node)

    def is_leaf(self, node: BudgetNode) -> bool:
        return not self.children.get(node.pk)

    def subtree_sums(self, values: dict[int, float]) -> dict[int, float]:
        """Per node id: its own value plus all its descendants'."""
        total = {node.pk: values.get(node.pk, 0.0) for node in self.nodes}
        for node in reversed(self.nodes):  # children come after their parents
            if node.parent_id in total:
                total[node.parent_id] += total[node.pk]
        return total

    def subtree_lists(self, values: dict[int, list]) -> dict[int, list]:
        total = {node.pk: list(values.get(node.pk, ())) for node in self.nodes}
        for node in reversed(self.nodes):
            if node.parent_id in total:
                total[node.parent_id].extend(total[node.pk])
        return total


# ---------------------------------------------------------------------------------------------
# Shares in force


@dataclass
class ShareSegment:
    start: datetime
    end: datetime
    shares: dict[int, int]  # node id -> shares (nodes with an allocation)
    fraction: dict[int, float]  # node id -> fraction of the cluster


def share_segments(cluster, tree: Tree, start: datetime, end: datetime) -> list[ShareSegment]:
    """The allocation history replayed: piecewise-constant shares and fractions on [start, end)."""
    if end <= start:
        return []
    changes = (
        AllocationChange.objects.filter(cluster=cluster, at__lt=end)
        .order_by("at", "id")
        .values_list("node_id", "new_shares", "at")
    )
    state: dict[int, int] = {}
    points: list[tuple[datetime, dict[int, int]]] = [(start, {})]
    for node_id, new_shares, at in changes:
        state[node_id] = new_shares
        moment = max(at, start)  # everything up to the start is the state in force at it
        if points[-1][0] == moment:
            points[-1] = (moment, dict(state))
        else:
            points.append((moment, dict(state)))
    segments = []
    for index, (at, shares) in enumerate(points):
        until = points[index + 1][0] if index + 1 < len(points) else end
        segments.append(ShareSegment(at, until, shares, _fractions(tree, shares)))
    return segments


def _fractions(tree: Tree, shares: dict[int, int]) -> dict[int, float]:
    allocations = {pk: SimpleNamespace(shares=value) for pk, value in shares.items()}
    by_path = fractions(shares_by_path(tree.nodes, allocations))
    return {node.pk: by_path.get(node.path, 0.0) for node in tree.nodes}


# ---------------------------------------------------------------------------------------------
# Capacity


class Capacity:
    """Healthy GPU-seconds of one cluster over time, from the hourly ``CapacityRollup`` rows the
    live loop charges (the very capacity its fair share uses).

    ``F(t)``, the GPU-seconds from the start of the loaded stretch up to ``t``, is a prefix
    sum over whole hours plus, inside the hour ``t`` falls in, the part of that hour before
    ``t``. That part is exact when the hour was announced as a cut at load time (a share
    change, a window start): the occupancy samples give the healthy GPUs in force at each
    moment of the hour (the last sample before the hour, then each sample until the next),
    and the rest of the hour's rollup is after the cut, so the two pieces add up to the
    rollup. An hour not announced is split in proportion to time. The end of the stretch
    takes its whole last hour (that rollup is only charged up to the last tick anyway).
    """

    def __init__(self, hours: dict[float, float], begin: float, end: float,
                 cut_hours: dict[float, tuple[float | None, list[tuple[float, float]]]]):
        self.begin, self.end = begin, end
        self.hours = hours
        self.starts = sorted(hours)
        self.cumulative = [0.0]
        for hour in self.starts:
            self.cumulative.append(self.cumulative[-1] + hours[hour])
        self.cut_hours = cut_hours

    @classmethod
    def load(cls, cluster, start: datetime, end: datetime, cuts=()) -> Capacity:
        """Rollups of the hours overlapping ``[start, end)`` (nothing before the cluster
        existed); ``cuts``: moments inside where figures will be split."""
        begin = max(start, cluster.created)
        if end <= begin:
            return cls({}, begin.timestamp(), begin.timestamp(), {})
        first = begin.timestamp() // HOUR * HOUR
        hours = dict(
            CapacityRollup.objects.filter(cluster=cluster, hour__gte=moment(first), hour__lt=end)
            .values_list(Epoch("hour"), "gpu_seconds")
        )
        wanted = sorted({
            t // HOUR * HOUR
            for t in (begin.timestamp(), *(c.timestamp() for c in cuts))
            if t % HOUR and begin.timestamp() <= t < end.timestamp() and t // HOUR * HOUR in hours
        })
        cut_hours: dict[float, tuple[float | None, list[tuple[float, float]]]] = {}
        if wanted:
            within = Q()
            for hour in wanted:
                within |= Q(at__gte=moment(hour), at__lt=moment(hour + HOUR))
            inside: dict[float, list[tuple[float, float]]] = defaultdict(list)
            for at, available in (
                OccupancySample.objects.filter(within, cluster=cluster)
                .order_by("at").values_list(Epoch("at"), "available")
            ):
                inside[at // HOUR * HOUR].append((at, float(available)))
            # the healthy GPUs in force as each cut hour begins: the last sample before it
            before = {
                hour: value
                for hour, value in CapacityRollup.objects.filter(
                    cluster=cluster, hour__in=[moment(h) for h in wanted]
                ).annotate(
                    before=Subquery(
                        OccupancySample.objects.filter(cluster=cluster, at__lt=OuterRef("hour"))
                        .order_by("-at").values("available")[:1]
                    )
                ).values_list(Epoch("hour"), "before")
            }
            for hour in wanted:
                cut_hours[hour] = (before.get(hour), inside.get(hour, []))
        return cls(hours, begin.timestamp(), end.timestamp(), cut_hours)

    def _head(self, hour: float, t: float) -> float:
        """GPU-seconds of the hour starting at ``hour`` before ``t``."""
        total = self.hours.get(hour, 0.0)
        if t <= hour or not total:
            return 0.0
        known = self.cut_hours.get(hour)
        if known is None or (known[0] is None and not known[1]):
            return total * (t - hour) / HOUR
        gpus, since, used = known[0], hour, 0.0
        for at, available in known[1]:
            if at >= t:
                break
            if gpus is not None:
                used += gpus * (at - since)
            gpus, since = available, at
        if gpus is not None:
            used += gpus * (t - since)
        return min(total, used)

    def _integral_to(self, t: float) -> float:
        if t >= self.end:
            return self.cumulative[-1]
        i = bisect.bisect_left(self.starts, t // HOUR * HOUR)
        whole = self.cumulative[i]
        if i < len(self.starts) and self.starts[i] == t // HOUR * HOUR:
            whole += self._head(self.starts[i], t)
        return whole

    def gpu_seconds(self, a: datetime, b: datetime) -> float:
        a_s, b_s = max(a.timestamp(), self.begin), b.timestamp()
        if b_s <= a_s:
            return 0.0
        return max(0.0, self._integral_to(b_s) - self._integral_to(a_s))


def entitlement_seconds(
    segments: list[ShareSegment], capacity: Capacity, a: datetime, b: datetime
) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
    """Per node over [a, b): entitlement GPU-seconds, time-weighted shares x seconds and
    time-weighted fraction x seconds."""
    entitled: dict[int, float] = defaultdict(float)
    share_time: dict[int, float] = defaultdict(float)
    fraction_time: dict[int, float] = defaultdict(float)
    for segment in segments:
        s0, s1 = max(a, segment.start), min(b, segment.end)
        if s1 <= s0:
            continue
        gpu_s = capacity.gpu_seconds(s0, s1)
        span = seconds(s0, s1)
        for pk, fraction in segment.fraction.items():
            if fraction:
                entitled[pk] += fraction * gpu_s
                fraction_time[pk] += fraction * span
        for pk, shares in segment.shares.items():
            share_time[pk] += shares * span
    return entitled, share_time, fraction_time


# ---------------------------------------------------------------------------------------------
# Usage, queue and preemption


def delivered_seconds(cluster, start: datetime, end: datetime) -> dict[int, float]:
    """Allocated GPU-seconds per budget id, from the hourly rollups starting in [start, end)."""
    rows = (
        UsageRollup.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
        .values("budget_id")
        .annotate(total=Sum("gpu_seconds"))
        .values_list("budget_id", "total")
    )
    return {budget_id: total or 0.0 for budget_id, total in rows}


def delivered_by_bucket(cluster, start, end, kind: str) -> dict[tuple[int, datetime], float]:
    """Allocated GPU-seconds per (budget id, bucket start), buckets "hour" or "day"."""
    rows = (
        UsageRollup.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
        .annotate(bucket=time_bucket("hour", kind))
        .values("budget_id", "bucket")
        .annotate(total=Sum("gpu_seconds"))
        .values_list("budget_id", "bucket", "total")
        .order_by()
    )
    return {(budget_id, bucket_start(at, kind)): total or 0.0 for budget_id, at, total in rows}


@dataclass
class Wait:
    """A workload's stay in the queue: from submission or requeue to start or giving up.
    Times are seconds since 1970 (thousands of stays per page: floats, not datetimes)."""

    budget_id: int
    gpus: int
    min_runtime: int
    opened: float
    closed: float | None  # None: still pending
    started: bool
    requeued: bool = False  # opened by a requeue (else by the submission)

    @property
    def allocated(self) -> bool:
        return self.min_runtime > 0

    @property
    def wait(self) -> float:
        return self.closed - self.opened

    def pending_seconds(self, a: float, b: float) -> float:
        end = b if self.closed is None or self.closed > b else self.closed
        begin = a if a > self.opened else self.opened
        return end - begin if end > begin else 0.0

    def kind(self, host_gpus: int) -> str:
        return workload_class(self.gpus, self.min_runtime, host_gpus)


# A stay in the queue ends at the first of these events after it began.
CLOSES = {
    Event.Kind.STARTED: True,
    Event.Kind.CANCELLED: False,
    Event.Kind.FAILED: False,
    Event.Kind.COMPLETED: False,
    Event.Kind.PREEMPTED: False,
}


def queue_stays(cluster, start: datetime, end: datetime, allocated_only: bool = False
                ) -> list[Wait]:
    """Every queue stay overlapping [start, end) or starting in it. A workload enters the
    queue at its submission and again at each requeue (which follows the end of a run); the
    stay ends at the workload's next start, cancellation or end. The database pairs each
    opening with its close (two queries, one row per stay)."""
    workloads = Workload.objects.filter(cluster=cluster, submitted__lt=end).filter(
        Q(finished__isnull=True) | Q(finished__gte=start)
    )
    if allocated_only:
        workloads = workloads.filter(min_runtime__gt=0)

    def closing(workload, after=False):
        """The first closing event's time, positive when it is a start, negative otherwise
        (one correlated subquery on the event's workload index instead of two)."""
        events = Event.objects.filter(workload=workload, kind__in=list(CLOSES))
        if after:
            events = events.filter(Q(at__gt=OuterRef("at")) | Q(at=OuterRef("at"),
                                                                 id__gt=OuterRef("id")))
        signed = Case(When(kind=Event.Kind.STARTED, then=Epoch("at")), default=-Epoch("at"))
        return Subquery(events.order_by("at", "id").values(signed=signed)[:1])

    submissions = workloads.annotate(close=closing(OuterRef("pk"))).values_list(
        "budget_id", "gpus", "min_runtime", Epoch("submitted"), "close"
    )
    requeues = (
        Event.objects.filter(workload__in=workloads, kind=Event.Kind.REQUEUED, at__lt=end)
        .annotate(close=closing(OuterRef("workload_id"), after=True))
        .values_list("workload__budget_id", "workload__gpus", "workload__min_runtime",
                     Epoch("at"), "close")
    )
    first = start.timestamp()
    stays = []
    for rows, requeued in ((submissions, False), (requeues, True)):
        for budget_id, gpus, min_runtime, opened, close in rows.order_by():
            closed = None if close is None else abs(close)
            if closed is not None and closed < first:
                continue
            stays.append(Wait(budget_id, gpus, min_runtime, opened, closed,
                              close is not None and close > 0, requeued))
    return stays


@dataclass
class RunFacts:
    unallocated_seconds: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    preemptions: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    lost_seconds: dict[int, float] = field(default_factory=lambda: defaultdict(float))


def lost_gpu_seconds(gpus, started, ended, signalled_at, resumable) -> float:
    if not resumable:
        return gpus * seconds(started, ended)
    return gpus * seconds(signalled_at, ended) if signalled_at else 0.0


def run_facts(cluster, start: datetime, end: datetime, now: datetime) -> RunFacts:
    until = min(end, now)
    runs = (
        Run.objects.filter(workload__cluster=cluster, started__lt=until)
        .filter(Q(ended__isnull=True) | Q(ended__gt=start))
        .filter(
            Q(allocated=False)
            | Q(end_reason=Run.EndReason.PREEMPTED, ended__gte=start, ended__lt=end)
        )
        .values_list(
            "workload__budget_id", "allocated", "gpus", Epoch("started"), Epoch("ended"),
            Epoch("signalled_at"), "end_reason", "workload__resumable",
        )
        .order_by()
    )
    facts = RunFacts()
    for budget_id, allocated, gpus, started, ended, signalled_at, reason, resumable in runs:
        started, ended, signalled_at = moment(started), moment(ended), moment(signalled_at)
        if not allocated:
            stop = min(until, ended) if ended else until
            held = max(0.0, seconds(max(start, started), stop))
            facts.unallocated_seconds[budget_id] += gpus * held
        if reason == Run.EndReason.PREEMPTED and ended and start <= ended < end:
            facts.preemptions[budget_id] += 1
            facts.lost_seconds[budget_id] += lost_gpu_seconds(
                gpus, started, ended, signalled_at, resumable
            )
    return facts


# ---------------------------------------------------------------------------------------------
# The review report


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


def period_until(start: datetime, end: datetime, now: datetime | None) -> datetime:
    now = now or timezone.now()
    return max(start, min(end, now))


def budget_report(cluster, start: datetime, end: datetime, now: datetime | None = None,
                  tree: Tree | None = None) -> Report:
    """One row per budget node in tree order; every figure of a node covers its subtree, so a
    parent's row is the subtotal of its children's."""
    now = now or timezone.now()
    until = period_until(start, end, now)
    tree = tree or Tree()
    # Shares in force are averaged over the part of the period the cluster existed: before it
    # nobody held shares, and that must not dilute the average.
    existed = max(start, min(cluster.created, until))
    segments = share_segments(cluster, tree, existed, until)
    capacity = Capacity.load(cluster, existed, until, cuts=[seg.start for seg in segments])
    entitled, share_time, fraction_time = entitlement_seconds(segments, capacity, existed, until)
    delivered = tree.subtree_sums(delivered_seconds(cluster, start, end))
    facts = run_facts(cluster, start, end, now)
    unallocated = tree.subtree_sums(facts.unallocated_seconds)
    preemptions = tree.subtree_sums(facts.preemptions)
    lost = tree.subtree_sums(facts.lost_seconds)
    pending: dict[int, float] = defaultdict(float)
    waits: dict[int, list[float]] = defaultdict(list)
    s0, s1, s_end = start.timestamp(), until.timestamp(), end.timestamp()
    for stay in queue_stays(cluster, start, end, allocated_only=True):
        pending[stay.budget_id] += stay.gpus * stay.pending_seconds(s0, s1)
        if stay.started and s0 <= stay.closed < s_end:
            waits[stay.budget_id].append(stay.wait)
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
        ])
    return out


# ---------------------------------------------------------------------------------------------
# Time series for the dashboards


def buckets(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    out, t = [], start
    while t < end:
        out.append(t)
        t += step
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


def step_for(start: datetime, end: datetime) -> tuple[timedelta, str]:
    """Chart buckets: hours up to two days, days beyond."""
    if end - start <= timedelta(days=2):
        return timedelta(hours=1), "hour"
    return timedelta(days=1), "day"


def occupancy_series(cluster, start: datetime, end: datetime, kind: str) -> list[dict]:
    """Mean GPUs per state per bucket (samples are taken every tick, evenly spaced, so the
    mean of the samples is the time average): allocated, unallocated, idle (healthy, free)
    and unavailable (on hosts that are not healthy)."""
    rows = (
        OccupancySample.objects.filter(cluster=cluster, at__gte=start, at__lt=end)
        .annotate(bucket=time_bucket("at", kind))
        .values("bucket")
        .annotate(
            total=Sum("total"), available=Sum("available"), allocated=Sum("allocated"),
            unallocated=Sum("unallocated"), pending=Sum("pending_gpus"), n=Count("id"),
        )
        .order_by("bucket")
    )
    out = []
    for row in rows:
        n = row["n"]
        out.append({
            "at": bucket_start(row["bucket"], kind),
            "allocated": row["allocated"] / n,
            "unallocated": row["unallocated"] / n,
            "idle": (row["available"] - row["allocated"] - row["unallocated"]) / n,
            "unavailable": (row["total"] - row["available"]) / n,
            "total": row["total"] / n,
            "available": row["available"] / n,
            "pending": row["pending"] / n,
        })
    return out


@dataclass
class Pyramid:
    """The four metrics of one cluster over one stretch of time."""

    availability: float | None
    occupancy_allocated: float | None
    occupancy_unallocated: float | None
    impact: float | None
    utilization: float | None = None  # the simulated fleet reports no GPU busy fraction

    @property
    def occupancy(self) -> float | None:
        if self.occupancy_allocated is None:
            return None
        return self.occupancy_allocated + self.occupancy_unallocated


def pyramid_from_samples(total, available, allocated, unallocated, impact_value) -> Pyramid:
    return Pyramid(
        availability=available / total if total else None,
        occupancy_allocated=allocated / available if available else None,
        occupancy_unallocated=unallocated / available if available else None,
        impact=impact_value,
    )


def pyramid(cluster, start: datetime, end: datetime, tree: Tree, now=None,
            report: Report | None = None) -> Pyramid:
    """Availability and occupancy as ratios of summed samples (time-weighted: ticks are even);
    impact from the budget report of the same stretch."""
    sums = OccupancySample.objects.filter(cluster=cluster, at__gte=start, at__lt=end).aggregate(
        total=Sum("total"), available=Sum("available"), allocated=Sum("allocated"),
        unallocated=Sum("unallocated"),
    )
    report = report or budget_report(cluster, start, end, now=now, tree=tree)
    return pyramid_from_samples(
        sums["total"] or 0, sums["available"] or 0, sums["allocated"] or 0,
        sums["unallocated"] or 0, impact(report.rows),
    )


def latest_pyramid(cluster, tree: Tree, now=None, report: Report | None = None
                   ) -> tuple[Pyramid, datetime | None]:
    """Now: the last sample's occupancy; impact over the cluster's fair-share window
    (``report``: the budget report of that window, when the caller has it already)."""
    now = now or timezone.now()
    last = OccupancySample.objects.filter(cluster=cluster, at__lte=now).order_by("-at").first()
    report = report or budget_report(
        cluster, now - timedelta(seconds=cluster.window), now, now=now, tree=tree
    )
    if last is None:
        return Pyramid(None, None, None, impact(report.rows)), None
    return pyramid_from_samples(
        last.total, last.available, last.allocated, last.unallocated, impact(report.rows)
    ), last.at


@dataclass
class History:
    """What the cluster charts read of the budgets, loaded once per page: the shares in force,
    the capacity and the allocated usage per chart bucket, from a fair-share window before the
    range (``lead``: the window rounded to whole buckets, at least one) to its elapsed end."""

    start: datetime
    until: datetime
    step: timedelta
    kind: str
    lead: timedelta
    segments: list[ShareSegment]
    capacity: Capacity
    delivered: dict[datetime, dict[int, float]]  # bucket start -> budget id -> GPU-seconds

    @classmethod
    def load(cls, cluster, tree: Tree, start: datetime, end: datetime, now=None) -> History:
        now = now or timezone.now()
        until = period_until(start, end, now)
        step, kind = step_for(start, end)
        lead = step * max(1, round(cluster.window / step.total_seconds()))
        first = start - lead
        segments = share_segments(cluster, tree, first, until)
        capacity = Capacity.load(cluster, first, until,
                                 cuts=[start, *(seg.start for seg in segments)])
        delivered: dict[datetime, dict[int, float]] = defaultdict(dict)
        for (budget_id, bucket), total in delivered_by_bucket(cluster, first, until,
                                                              kind).items():
            delivered[bucket][budget_id] = total
        return cls(start, until, step, kind, lead, segments, capacity, delivered)


def budget_series(cluster, tree: Tree, nodes: list[BudgetNode], start: datetime,
                  end: datetime, now=None, history: History | None = None) -> dict:
    """Delivered and entitlement GPU-h per bucket for each of `nodes` (subtree sums)."""
    history = history or History.load(cluster, tree, start, end, now)
    until, step = history.until, history.step
    times = buckets(start, until, step)
    series = {node.pk: {"delivered": [], "entitlement": []} for node in nodes}
    for t in times:
        b = min(t + step, until)
        entitled, _, _ = entitlement_seconds(history.segments, history.capacity, t, b)
        delivered = tree.subtree_sums(history.delivered.get(t, {}))
        for node in nodes:
            series[node.pk]["delivered"].append(delivered.get(node.pk, 0.0) / HOUR)
            series[node.pk]["entitlement"].append(entitled.get(node.pk, 0.0) / HOUR)
    return {"times": times, "series": series}


# Waits by the budget's ratio when the wait began: (label, upper bound, exclusive).
RATIO_BANDS = [
    ("under 50%", 0.5),
    ("50-90%", 0.9),
    ("90-110%", 1.1),
    ("110-200%", 2.0),
    ("200% and over", math.inf),
]


def ratio_band(value: float) -> str:
    for label, upper in RATIO_BANDS:
        if value < upper:
            return label
    return RATIO_BANDS[-1][0]


class BucketRatios:
    """A budget's fair-share ratio at the start of each chart bucket, as the scheduler defines
    it (usage / entitlement over the lookback window, subtrees included; no shares: infinite),
    with the window rounded to whole buckets (``History.lead``): allocated GPU-seconds charged
    in the window's buckets over fraction x healthy GPU-seconds of the same stretch."""

    def __init__(self, history: History, tree: Tree):
        self.history, self.tree = history, tree
        self.origin = history.start.timestamp()
        self.step = history.step.total_seconds()
        self._entitled: dict[int, tuple[dict[int, float], dict[int, float]]] = {}
        self._usage: dict[int, dict[int, float]] = {}
        self._within: dict[int, list[int]] = {}
        self._ratio: dict[tuple[int, int], float] = {}

    def _descendants(self, pk: int) -> list[int]:
        if pk not in self._within:
            node = self.tree.by_pk.get(pk)
            self._within[pk] = [pk] if node is None else [
                n.pk for n in self.tree.nodes
                if n.path == node.path or n.path.startswith(node.path + "/")
            ]
        return self._within[pk]

    def at(self, budget_id: int, opened: float) -> float:
        """The ratio at the start of the bucket ``opened`` falls in (the range's first bucket
        for a wait that began before the range)."""
        index = max(0, int((opened - self.origin) // self.step))
        key = (budget_id, index)
        if key not in self._ratio:
            self._ratio[key] = self._at(budget_id, index)
        return self._ratio[key]

    def _at(self, budget_id: int, index: int) -> float:
        h = self.history
        t = h.start + index * h.step
        if index not in self._entitled:
            entitled, _, fraction_time = entitlement_seconds(h.segments, h.capacity,
                                                             t - h.lead, t)
            self._entitled[index] = (entitled, fraction_time)
            usage: dict[int, float] = defaultdict(float)
            bucket = t - h.lead
            while bucket < t:
                for pk, total in h.delivered.get(bucket, {}).items():
                    usage[pk] += total
                bucket += h.step
            self._usage[index] = usage
        entitled, fraction_time = self._entitled[index]
        if not fraction_time.get(budget_id):
            return math.inf  # no shares in the window: no claim at all
        used = sum(self._usage[index].get(pk, 0.0) for pk in self._descendants(budget_id))
        basis = entitled.get(budget_id, 0.0)
        if basis <= 0:
            return 0.0 if used <= 0 else math.inf
        return used / basis


def _counts_by_bucket(queryset, field: str, kind: str) -> dict[datetime, int]:
    """Rows per time bucket, counted by the database."""
    return {
        bucket_start(at, kind): n
        for at, n in queryset.annotate(bucket=time_bucket(field, kind)).order_by().values("bucket")
        .annotate(n=Count("id")).values_list("bucket", "n")
    }


def window_standing(cluster, tree: Tree, now: datetime) -> Standing:
    """Ratios and the Fair Tree order over the fair-share window ending ``now``, as the
    scheduler computes them: today's shares, allocated usage from the hourly rollups and the
    window's capacity. The hour the window starts in counts pro rata (the loop reads that
    hour from the run records, a scan of every run; a few GPU-seconds of difference)."""
    start = now - timedelta(seconds=cluster.window)
    edge = moment((start.timestamp() // HOUR + 1) * HOUR)
    share_in_window = (edge - start).total_seconds() / HOUR
    usage: dict[str, float] = defaultdict(float)
    for budget_id, hour, total in (
        UsageRollup.objects.filter(cluster=cluster, hour__gte=edge - timedelta(hours=1),
                                   hour__lte=now)
        .annotate(first=Q(hour__lt=edge)).values("budget_id", "first")
        .annotate(total=Sum("gpu_seconds")).values_list("budget_id", "first", "total")
        .order_by()
    ):
        node = tree.by_pk.get(budget_id)
        if node is not None:
            usage[node.path] += total * (share_in_window if hour else 1.0)
    allocations = {a.node_id: a for a in Allocation.objects.filter(cluster=cluster)}
    shares = shares_by_path(tree.nodes, allocations)
    capacity = Capacity.load(cluster, start, now).gpu_seconds(start, now)
    return Standing(BudgetTree(shares), dict(usage), capacity)


PENDING_TOP = 8  # leaf budgets drawn one by one in the pending chart; the rest as "others"


def queue_figures(cluster, tree: Tree, start: datetime, end: datetime, now=None,
                  history: History | None = None) -> dict:
    """Waits by class and by the budget's ratio when the wait began, mean pending GPUs per
    leaf budget per bucket (the `PENDING_TOP` leaves that waited most, the rest summed as
    "others"), preemptions and requeues per bucket."""
    now = now or timezone.now()
    history = history or History.load(cluster, tree, start, end, now)
    until = history.until
    step, kind = history.step, history.kind
    times = buckets(start, until, step)
    host_gpus = cluster.hosts.aggregate(most=Max("gpus"))["most"] or 8
    ratios = BucketRatios(history, tree)
    waits: dict[str, list[float]] = defaultdict(list)
    by_band: dict[str, list[float]] = defaultdict(list)
    pending: dict[int, list[float]] = defaultdict(lambda: [0.0] * len(times))
    edges = [t.timestamp() for t in times] + [until.timestamp()]
    s0, s_end = start.timestamp(), end.timestamp()
    requeues = [0] * len(times)
    for stay in queue_stays(cluster, start, end):
        if stay.requeued and s0 <= stay.opened < edges[-1]:
            requeues[bisect.bisect_right(edges, stay.opened) - 1] += 1
        if stay.started and s0 <= stay.closed < s_end:
            waits[stay.kind(host_gpus)].append(stay.wait)
            if stay.allocated:
                by_band[ratio_band(ratios.at(stay.budget_id, stay.opened))].append(stay.wait)
        if not stay.allocated:
            continue
        # only the buckets the stay overlaps
        first = max(0, bisect.bisect_right(edges, stay.opened) - 1)
        last = bisect.bisect_left(edges, stay.closed if stay.closed is not None else edges[-1])
        row = pending[stay.budget_id]
        for i in range(first, min(last, len(times))):
            a, b = edges[i], edges[i + 1]
            row[i] += stay.gpus * stay.pending_seconds(a, b) / (b - a)
    classes = ["debug", "small", "large", "unallocated"]
    preempted = _counts_by_bucket(
        Run.objects.filter(workload__cluster=cluster, end_reason=Run.EndReason.PREEMPTED,
                           ended__gte=start, ended__lt=end), "ended", kind)

    def summary(name, values):
        return {"name": name, "count": len(values), "median": quantile(values, 0.5),
                "p95": quantile(values, 0.95)}

    return {
        "times": times,
        "classes": [summary(name, waits[name]) for name in classes],
        "bands": [summary(label, by_band[label]) for label, _ in RATIO_BANDS],
        "pending": top_pending(tree, pending, PENDING_TOP),
        "preemptions": [preempted.get(t, 0) for t in times],
        "requeues": requeues,
    }


def top_pending(tree: Tree, pending: dict[int, list[float]], top: int) -> dict[str, list]:
    """The `top` budgets with the most pending GPU-time, by path below the root, most first,
    then the others summed."""
    root = next((node for node in tree.nodes if node.parent_id is None), None)
    prefix = root.path + "/" if root else ""

    def label(pk):
        node = tree.by_pk.get(pk)
        return node.path.removeprefix(prefix) if node else "?"

    ranked = sorted(pending.items(), key=lambda item: (-sum(item[1]), label(item[0])))
    out = {label(pk): values for pk, values in ranked[:top]}
    if len(ranked) > top:
        rest = [row for _, row in ranked[top:]]
        out[f"others ({len(rest)})"] = [sum(column) for column in zip(*rest, strict=True)]
    return out


REPAIR_OUTCOMES = [
    HostEvent.Kind.FAILED, HostEvent.Kind.DRAINED, HostEvent.Kind.REPAIR_SUCCEEDED,
    HostEvent.Kind.REPAIR_FAILED, HostEvent.Kind.ESCALATED,
]


# The state a host is in after each kind of host event (the live loop's transitions).
STATE_AFTER = {
    HostEvent.Kind.DRAIN_REQUESTED: Host.State.DRAINING,
    HostEvent.Kind.HEALTH_SIGNAL: Host.State.DRAINING,
    HostEvent.Kind.DRAINED: Host.State.DRAINED,
    HostEvent.Kind.FAILED: Host.State.DOWN,
    HostEvent.Kind.REPAIR_STARTED: Host.State.REPAIRING,
    HostEvent.Kind.REPAIR_SUCCEEDED: Host.State.AVAILABLE,
    HostEvent.Kind.REPAIR_FAILED: Host.State.REPAIRING,  # retried, or escalated right after
    HostEvent.Kind.ESCALATED: Host.State.ESCALATED,
    HostEvent.Kind.RETURNED: Host.State.AVAILABLE,
}


def fleet_figures(cluster, start: datetime, end: datetime, now=None) -> dict:
    """Host states now and over time, host events per bucket, and the share of repairs that
    needed a human (escalations over repairs that ended, successful or escalated).

    States over time replay the hosts' events: each host is, from the start of the range, in
    the state its last earlier event left it in (available without one; its state now if it
    has no event at all), then each event of the range moves it to `STATE_AFTER` its kind.
    The chart shows the mean number of hosts in each state per bucket."""
    now = now or timezone.now()
    until = period_until(start, end, now)
    step, kind = step_for(start, end)
    times = buckets(start, until, step)
    edges = [t.timestamp() for t in times] + [until.timestamp()]
    hosts = (
        cluster.hosts.annotate(
            before=Subquery(
                HostEvent.objects.filter(host=OuterRef("pk"), at__lt=start)
                .order_by("-at", "-id").values("kind")[:1]
            ),
            seen=Exists(HostEvent.objects.filter(host=OuterRef("pk"))),
        ).values_list("pk", "state", "before", "seen").order_by()
    )
    state: dict[int, str] = {}
    now_states: dict[str, int] = defaultdict(int)
    for pk, current, before, seen in hosts:
        now_states[current] += 1
        state[pk] = STATE_AFTER.get(before, Host.State.AVAILABLE) if seen else current
    events = (
        HostEvent.objects.filter(host__cluster=cluster, at__gte=start, at__lt=end)
        .order_by("at", "id").values_list("host_id", Epoch("at"), "kind")
    )
    counts: dict[str, list[int]] = {k: [0] * len(times) for k in REPAIR_OUTCOMES}
    hosts_in: dict[str, list[float]] = {k: [0.0] * len(times) for k in Host.State.values}
    since = {pk: edges[0] for pk in state}

    def stay(pk, a, b):
        """Host `pk` spent [a, b) in its current state: spread it over the buckets."""
        if b <= a or not times:
            return
        row = hosts_in[state[pk]]
        i = max(0, bisect.bisect_right(edges, a) - 1)
        while i < len(times) and edges[i] < b:
            lo, hi = max(a, edges[i]), min(b, edges[i + 1])
            if hi > lo:
                row[i] += (hi - lo) / (edges[i + 1] - edges[i])
            i += 1

    for host_id, at, event_kind in events:
        if event_kind in counts and at < edges[-1]:
            counts[event_kind][bisect.bisect_right(edges, at) - 1] += 1
        after = STATE_AFTER.get(event_kind)
        if host_id not in state or after is None or at >= edges[-1]:
            continue
        stay(host_id, since[host_id], at)
        state[host_id], since[host_id] = after, at
    for pk in state:
        stay(pk, since[pk], edges[-1])
    totals = {k: sum(counts[k]) for k in REPAIR_OUTCOMES}
    ended = totals[HostEvent.Kind.REPAIR_SUCCEEDED] + totals[HostEvent.Kind.ESCALATED]
    return {
        "times": times,
        "states": [(s, now_states.get(s, 0)) for s in Host.State.values],
        "over_time": hosts_in,
        "events": counts,
        "totals": totals,
        "human_share": totals[HostEvent.Kind.ESCALATED] / ended if ended else None,
    }


def pyramid_trend(cluster, tree: Tree, now: datetime, days: int) -> dict:
    """Daily availability, occupancy and impact over the last `days` days, today included."""
    end = timezone.make_aware(
        datetime.combine(timezone.localdate(now) + timedelta(days=1), datetime.min.time())
    )
    start = end - timedelta(days=days)
    until = period_until(start, end, now)
    times = buckets(start, end, timedelta(days=1))
    occupancy = {p["at"]: p for p in occupancy_series(cluster, start, end, "day")}
    segments = share_segments(cluster, tree, start, until)
    capacity = Capacity.load(cluster, start, until, cuts=[seg.start for seg in segments])
    delivered: dict[datetime, dict[int, float]] = defaultdict(dict)
    for (budget_id, bucket), total in delivered_by_bucket(cluster, start, end, "day").items():
        delivered[bucket][budget_id] = total
    stays = queue_stays(cluster, start, end, allocated_only=True)
    leaves = [node.pk for node in tree.nodes if tree.is_leaf(node)]
    out: dict[str, list] = defaultdict(list)
    for t in times:
        b = min(t + timedelta(days=1), until)
        point = occupancy.get(t)
        total = point["total"] if point else 0
        available = point["available"] if point else 0
        out["availability"].append(available / total if total else None)
        out["occupancy_allocated"].append(point["allocated"] / available if available else None)
        out["occupancy_unallocated"].append(
            point["unallocated"] / available if available else None
        )
        if b <= t:
            out["impact"].append(None)
            continue
        entitled, _, fraction_time = entitlement_seconds(segments, capacity, t, b)
        pending: dict[int, float] = defaultdict(float)
        t_s, b_s = t.timestamp(), b.timestamp()
        for stay in stays:
            pending[stay.budget_id] += stay.gpus * stay.pending_seconds(t_s, b_s)
        used = delivered.get(t, {})
        span = seconds(t, b)
        out["impact"].append(weighted_impact(
            (fraction_time.get(pk, 0.0) / span, entitled.get(pk, 0.0), used.get(pk, 0.0),
             used.get(pk, 0.0) + pending[pk])
            for pk in leaves
        ))
    out["days"] = times
    return dict(out)
