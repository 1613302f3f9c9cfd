"""GPU-time accounting of one cluster over a period: what every report computes from.

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
* Waits: the stays of workloads in the queue, from submission (or requeue) to start,
  cancellation or the end of the period (``queue_stays``).
* Preemption facts: runs that ended preempted, and the GPU-time lost to it (``run_facts``).
* Utilization: GPU-seconds the fleet's telemetry measured on the budget's runs (allocated and
  unallocated) and their busy part, from the hourly ``UtilizationRollup`` (an hour counts
  when it starts inside the period, like delivered GPU-h).

The review report (``reports.review_report``) defines each figure as the pages print it.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import NamedTuple

from django.db.models import Case, OuterRef, Q, Subquery, Sum, When
from django.utils import timezone

from budgets.models import AllocationChange, BudgetNode
from budgets.services import depth_first, shares_by_path
from fleet.models import CapacityRollup
from reports.sql import (
    Epoch,
    bucket_start,
    moment,
    numeric_rows,
    sums_by_period,
    time_bucket,
)
from scheduler.engine import fractions
from scheduler.engine.contract import workload_class
from scheduler.models import (
    Event,
    OccupancySample,
    Run,
    UsageRollup,
    UtilizationRollup,
    Workload,
)

HOUR = 3600.0


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


def period_until(start: datetime, end: datetime, now: datetime | None) -> datetime:
    now = now or timezone.now()
    return max(start, min(end, now))



def buckets(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    out, t = [], start
    while t < end:
        out.append(t)
        t += step
    return out



def step_for(start: datetime, end: datetime) -> tuple[timedelta, str]:
    """Chart buckets: hours up to two days, days beyond."""
    if end - start <= timedelta(days=2):
        return timedelta(hours=1), "hour"
    return timedelta(days=1), "day"



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
        wanted = _cut_hours(hours, begin, end, cuts)
        cut_hours: dict[float, tuple[float | None, list[tuple[float, float]]]] = {}
        if wanted:
            # the cluster in each term lets SQLite search the (cluster, at) index once per
            # hour instead of scanning every sample of the cluster
            within = Q()
            for hour in wanted:
                within |= Q(cluster=cluster, at__gte=moment(hour), at__lt=moment(hour + HOUR))
            inside: dict[float, list[tuple[float, float]]] = defaultdict(list)
            # sorted here, not by ORDER BY: for the order SQLite would scan the whole `at`
            # index (a year of samples, 130 ms) instead of the (cluster, at) ranges
            for at, available in sorted(
                OccupancySample.objects.filter(within)
                .order_by().values_list(Epoch("at"), "available")
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

    def window(self, cluster, start: datetime, end: datetime, cuts=()) -> Capacity:
        """What ``load(cluster, start, end, cuts)`` would read, taken from this capacity,
        loaded over a stretch covering ``[start, end)`` with ``start`` and ``cuts`` among its
        own cuts (the hour ``end`` falls in counts whole here too)."""
        begin = max(start, cluster.created)
        if end <= begin:
            return Capacity({}, begin.timestamp(), begin.timestamp(), {})
        low = bisect.bisect_left(self.starts, begin.timestamp() // HOUR * HOUR)
        high = bisect.bisect_left(self.starts, end.timestamp())
        hours = {hour: self.hours[hour] for hour in self.starts[low:high]}
        cut_hours = {hour: self.cut_hours[hour] for hour in _cut_hours(hours, begin, end, cuts)}
        return Capacity(hours, begin.timestamp(), end.timestamp(), cut_hours)

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


def _cut_hours(hours: dict[float, float], begin: datetime, end: datetime, cuts) -> list[float]:
    """The hours with a rollup that ``begin`` or a cut splits inside ``[begin, end)``."""
    return sorted({
        t // HOUR * HOUR
        for t in (begin.timestamp(), *(c.timestamp() for c in cuts))
        if t % HOUR and begin.timestamp() <= t < end.timestamp() and t // HOUR * HOUR in hours
    })


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


def delivered_by_period(cluster, periods: list[tuple[datetime, datetime]]
                        ) -> list[dict[int, float]]:
    """Per period of ``periods`` (oldest first, none overlapping): allocated GPU-seconds per
    budget id, from the hourly rollups starting in it. One query for them all."""
    out: list[dict[int, float]] = [{} for _ in periods]
    rows = sums_by_period(UsageRollup.objects.filter(cluster=cluster), "hour", periods,
                          "budget_id", total=Sum("gpu_seconds"))
    for budget_id, index, total in rows:
        out[index][budget_id] = total or 0.0
    return out


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
class Busy:
    """GPU-seconds the telemetry measured and the busy part of them."""

    measured: float = 0.0
    busy: float = 0.0

    @property
    def fraction(self) -> float | None:
        return self.busy / self.measured if self.measured else None

    def __add__(self, other: Busy) -> Busy:
        return Busy(self.measured + other.measured, self.busy + other.busy)


def utilization_by_budget(cluster, start: datetime, end: datetime, allocated: bool | None = None
                          ) -> dict[int, Busy]:
    """Measured and busy GPU-seconds per budget id, from the utilization rollups of the hours
    starting in [start, end); ``allocated``: only allocated (True) or unallocated runs."""
    return utilization_by_period(cluster, [(start, end)], allocated)[0]


def utilization_by_period(cluster, periods: list[tuple[datetime, datetime]],
                          allocated: bool | None = None) -> list[dict[int, Busy]]:
    """`utilization_by_budget` of each period of ``periods`` (oldest first, none
    overlapping), in one query."""
    rows = UtilizationRollup.objects.filter(cluster=cluster)
    if allocated is not None:
        rows = rows.filter(allocated=allocated)
    out: list[dict[int, Busy]] = [{} for _ in periods]
    for budget_id, index, measured, busy in sums_by_period(
        rows, "hour", periods, "budget_id",
        measured=Sum("gpu_seconds"), busy=Sum("busy_gpu_seconds"),
    ):
        out[index][budget_id] = Busy(measured or 0.0, busy or 0.0)
    return out


def utilization_by_owner(cluster, start: datetime, end: datetime
                         ) -> dict[tuple[int, str | None], Busy]:
    """Measured and busy GPU-seconds per (budget id, owner's username), from the utilization
    rollups of the hours starting in [start, end)."""
    return {
        (budget_id, username): Busy(measured or 0.0, busy or 0.0)
        for budget_id, username, measured, busy in (
            UtilizationRollup.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
            .values("budget_id", "owner__username")
            .annotate(measured=Sum("gpu_seconds"), busy=Sum("busy_gpu_seconds"))
            .values_list("budget_id", "owner__username", "measured", "busy")
            .order_by()
        )
    }


def utilization_by_bucket(cluster, start, end, kind: str) -> dict[datetime, Busy]:
    """The cluster's measured and busy GPU-seconds per bucket ("hour" or "day")."""
    rows = (
        UtilizationRollup.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
        .annotate(bucket=time_bucket("hour", kind))
        .values("bucket")
        .annotate(measured=Sum("gpu_seconds"), busy=Sum("busy_gpu_seconds"))
        .values_list("bucket", "measured", "busy")
        .order_by()
    )
    return {bucket_start(at, kind): Busy(measured or 0.0, busy or 0.0)
            for at, measured, busy in rows}


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
    finished: float | None = None  # the workload's end; None: not over

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

    def in_queue(prefix=""):
        """The workloads that may have waited in [start, end), fields prefixed by ``prefix``."""
        q = Q(**{f"{prefix}cluster": cluster, f"{prefix}submitted__lt": end}) & (
            Q(**{f"{prefix}finished__isnull": True}) | Q(**{f"{prefix}finished__gte": start})
        )
        return q & Q(**{f"{prefix}min_runtime__gt": 0}) if allocated_only else q

    def closing(workload, after=False):
        """The first closing event's time, positive when it is a start, negative otherwise
        (one correlated subquery on the event's workload index instead of two)."""
        events = Event.objects.filter(workload=workload, kind__in=list(CLOSES))
        if after:
            events = events.filter(Q(at__gt=OuterRef("at")) | Q(at=OuterRef("at"),
                                                                 id__gt=OuterRef("id")))
        signed = Case(When(kind=Event.Kind.STARTED, then=Epoch("at")), default=-Epoch("at"))
        return Subquery(events.order_by("at", "id").values(signed=signed)[:1])

    submissions = (
        Workload.objects.filter(in_queue())
        .annotate(close=closing(OuterRef("pk")))
        .values_list("budget_id", "gpus", "min_runtime", Epoch("submitted"), "close",
                     Epoch("finished"))
    )
    # The workload's conditions on the join, not as `workload__in`: SQLite then finds the
    # requeues by the (kind, at) index instead of reading the events of every workload.
    requeues = (
        Event.objects.filter(in_queue("workload__"), kind=Event.Kind.REQUEUED, at__lt=end)
        .annotate(close=closing(OuterRef("workload_id"), after=True))
        .values_list("workload__budget_id", "workload__gpus", "workload__min_runtime",
                     Epoch("at"), "close", Epoch("workload__finished"))
    )
    first = start.timestamp()
    stays = []
    for rows, requeued in ((submissions, False), (requeues, True)):
        for budget_id, gpus, min_runtime, opened, close, finished in numeric_rows(
                rows.order_by()):
            closed = None if close is None else abs(close)
            if closed is not None and closed < first:
                continue
            stays.append(Wait(budget_id, gpus, min_runtime, opened, closed,
                              close is not None and close > 0, requeued, finished))
    return stays


@dataclass
class RunFacts:
    unallocated_seconds: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    preemptions: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    lost_seconds: dict[int, float] = field(default_factory=lambda: defaultdict(float))


def lost_gpu_seconds(gpus, started: float, ended: float, signalled_at: float | None,
                     resumable: bool) -> float:
    if not resumable:
        return gpus * (ended - started)
    return gpus * (ended - signalled_at) if signalled_at else 0.0


class RunRow(NamedTuple):
    """A run as the reports read it; times in seconds since 1970 (see `Wait`)."""

    budget_id: int
    owner: str
    allocated: bool
    gpus: int
    started: float
    ended: float | None
    signalled_at: float | None
    end_reason: str
    resumable: bool


def runs_overlapping(cluster, start: datetime, until: datetime, *conditions) -> list[RunRow]:
    """The cluster's runs overlapping ``[start, until)`` (and meeting ``conditions``)."""
    runs = (
        Run.objects.filter(workload__cluster=cluster, started__lt=until)
        .filter(Q(ended__isnull=True) | Q(ended__gt=start))
        .filter(*conditions)
        .values_list("workload__budget_id", "workload__owner__username", "allocated", "gpus",
                     Epoch("started"), Epoch("ended"), Epoch("signalled_at"), "end_reason",
                     "workload__resumable")
        .order_by()
    )
    return [RunRow(*run) for run in runs]


def run_facts(cluster, periods: list[tuple[datetime, datetime]], now: datetime
              ) -> list[RunFacts]:
    """The facts of each period of ``periods`` (oldest first, none overlapping), from one
    query over their span."""
    first, last = periods[0][0], periods[-1][1]
    runs = runs_overlapping(
        cluster, first, min(last, now),
        Q(allocated=False)
        | Q(end_reason=Run.EndReason.PREEMPTED, ended__gte=first, ended__lt=last),
    )
    return [_run_facts(runs, start, end, now) for start, end in periods]


def _run_facts(runs: list[RunRow], start: datetime, end: datetime, now: datetime) -> RunFacts:
    a, b, until = start.timestamp(), end.timestamp(), min(end, now).timestamp()
    facts = RunFacts()
    for run in runs:
        if run.started >= until or (run.ended is not None and run.ended <= a):
            continue
        if not run.allocated:
            stop = until if run.ended is None else min(until, run.ended)
            held = max(0.0, stop - max(a, run.started))
            facts.unallocated_seconds[run.budget_id] += run.gpus * held
        if run.end_reason == Run.EndReason.PREEMPTED and run.ended and a <= run.ended < b:
            facts.preemptions[run.budget_id] += 1
            facts.lost_seconds[run.budget_id] += lost_gpu_seconds(
                run.gpus, run.started, run.ended, run.signalled_at, run.resumable
            )
    return facts
