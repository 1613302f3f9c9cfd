"""Queue statistics of a cluster over a range: waits by workload class and by the budget's
fair-share ratio when the wait began, pending GPUs per budget over time, preemptions and
requeues per chart bucket."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from datetime import datetime

from django.db.models import Count, Max
from django.utils import timezone

from reports.accounting import (
    Tree,
    buckets,
    entitlement_seconds,
    quantile,
    queue_stays,
)
from reports.budget_history import History
from reports.sql import bucket_start, time_bucket
from scheduler.models import Run

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
