"""Budgets over time on the cluster charts: the shares, capacity and allocated usage per
chart bucket (``History``), each budget's delivered and entitled GPU-hours per bucket, and
the fair-share standing over the window ending now."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q, Sum
from django.utils import timezone

from budgets.models import Allocation, BudgetNode
from budgets.services import shares_by_path
from reports.accounting import (
    HOUR,
    Capacity,
    ShareSegment,
    Tree,
    buckets,
    delivered_by_bucket,
    entitlement_seconds,
    period_until,
    share_segments,
    step_for,
)
from reports.sql import moment
from scheduler.engine import BudgetTree, Standing
from scheduler.models import UsageRollup


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
