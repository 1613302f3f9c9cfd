"""The four metrics of a cluster (the pyramid): availability, occupancy (allocated and
unallocated), impact and utilization, now, over a stretch of time and day by day; and the
occupancy series the dashboards chart.

Utilization, the top of the pyramid, is the GPU busy fraction the fleet's telemetry reports
(busy / measured GPU-seconds of every run, from the hourly utilization rollups), and the
useful GPU-hours it makes of the delivered ones: delivered GPU-hours x busy fraction. "Now" is
the current and the previous clock hour of rollups."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Sum
from django.utils import timezone

from reports.accounting import (
    Busy,
    Capacity,
    Tree,
    buckets,
    delivered_by_bucket,
    entitlement_seconds,
    period_until,
    queue_stays,
    seconds,
    share_segments,
    utilization_by_bucket,
)
from reports.review_report import Report, budget_report, impact, weighted_impact
from reports.sql import bucket_start, time_bucket
from scheduler.models import OccupancySample, UtilizationRollup


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
    utilization: float | None = None  # None: the fleet reports no GPU busy fraction
    useful_gpu_hours: float | None = None  # delivered GPU-hours x busy fraction

    @property
    def occupancy(self) -> float | None:
        if self.occupancy_allocated is None:
            return None
        return self.occupancy_allocated + self.occupancy_unallocated


def pyramid_from_samples(total, available, allocated, unallocated, impact_value,
                         busy: Busy | None = None, delivered_h: float | None = None
                         ) -> Pyramid:
    utilization = busy.fraction if busy else None
    return Pyramid(
        availability=available / total if total else None,
        occupancy_allocated=allocated / available if available else None,
        occupancy_unallocated=unallocated / available if available else None,
        impact=impact_value,
        utilization=utilization,
        useful_gpu_hours=(None if utilization is None or delivered_h is None
                          else delivered_h * utilization),
    )


def report_busy(report: Report) -> tuple[Busy, float]:
    """The cluster's measured and busy GPU-seconds and delivered GPU-hours: the root rows'
    subtotals of the budget report."""
    roots = [row for row in report.rows if row.depth == 0]
    return sum((row.busy for row in roots), Busy()), sum(row.delivered_h for row in roots)


def pyramid(cluster, start: datetime, end: datetime, tree: Tree, now=None,
            report: Report | None = None) -> Pyramid:
    """Availability and occupancy as ratios of summed samples (time-weighted: ticks are even);
    impact and utilization from the budget report of the same stretch."""
    sums = OccupancySample.objects.filter(cluster=cluster, at__gte=start, at__lt=end).aggregate(
        total=Sum("total"), available=Sum("available"), allocated=Sum("allocated"),
        unallocated=Sum("unallocated"),
    )
    report = report or budget_report(cluster, start, end, now=now, tree=tree)
    busy, delivered_h = report_busy(report)
    return pyramid_from_samples(
        sums["total"] or 0, sums["available"] or 0, sums["allocated"] or 0,
        sums["unallocated"] or 0, impact(report.rows), busy, delivered_h,
    )


def recent_busy(cluster, now: datetime) -> Busy:
    """Measured and busy GPU-seconds of the current and the previous clock hour."""
    since = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    sums = UtilizationRollup.objects.filter(
        cluster=cluster, hour__gte=since, hour__lte=now
    ).aggregate(measured=Sum("gpu_seconds"), busy=Sum("busy_gpu_seconds"))
    return Busy(sums["measured"] or 0.0, sums["busy"] or 0.0)


def latest_pyramid(cluster, tree: Tree, now=None, report: Report | None = None
                   ) -> tuple[Pyramid, datetime | None]:
    """Now: the last sample's occupancy; impact over the cluster's fair-share window
    (``report``: the budget report of that window, when the caller has it already);
    utilization over the current and the previous clock hour."""
    now = now or timezone.now()
    last = OccupancySample.objects.filter(cluster=cluster, at__lte=now).order_by("-at").first()
    report = report or budget_report(
        cluster, now - timedelta(seconds=cluster.window), now, now=now, tree=tree
    )
    busy = recent_busy(cluster, now)
    if last is None:
        return Pyramid(None, None, None, impact(report.rows), busy.fraction), None
    return pyramid_from_samples(
        last.total, last.available, last.allocated, last.unallocated, impact(report.rows),
        busy,
    ), last.at


def pyramid_trend(cluster, tree: Tree, now: datetime, days: int) -> dict:
    """Daily availability, occupancy, impact and utilization over the last `days` days, today
    included."""
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
    busy_by_day = utilization_by_bucket(cluster, start, end, "day")
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
        out["utilization"].append(busy_by_day.get(t, Busy()).fraction)
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
