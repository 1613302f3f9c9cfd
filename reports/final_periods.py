"""The budget reports of past periods, kept in the shared cache once they are final.

The review trends page shows eight periods; all but the last are usually over, and their
figures cannot change any more, yet computing them reads a year of hourly rollups, runs and
queue stays. So each final period's report is computed once and kept (as Open XDMoD and
Slurm's sreport keep aggregates of closed periods); of a period not final yet, only its
final part is.

What a period's report depends on (``reports.accounting``, ``reports.review_report``):

* the hourly usage and capacity rollups, which the live loop charges up to each tick's
  occupancy sample (``scheduler.loop``: capacity from the last sample to now, every live
  run's usage to now, new runs from now): the cluster's last sample is the point up to which
  both are written;
* the hourly utilization rollups, read from the fleet's telemetry up to the cluster's
  ``TelemetryCursor`` (when the cluster reads telemetry at all);
* runs, workloads and their events (queue stays, preemptions, unallocated GPU-time), written
  at the tick's moment, except the corrections the backend brings late: a run that really
  started or ended earlier than a tick charged it (its charges refunded, its end moved back);
* the occupancy samples of the hours a share change cuts, thinned by the hourly compaction
  up to ``FULL_RESOLUTION + LOOKBACK`` behind now (``scheduler.retention``);
* the allocation log and the budget tree's shape (today's tree: subtree sums, fractions).

A period is *final* once its end lies ``SETTLE`` before the last tick's sample and, for a
cluster with telemetry, before its telemetry cursor: nothing the loop or the collection will
write falls into it any more, and the settle time covers the late corrections and the
samples' compaction. A final period's report is then a function of its bounds, the
cluster (and when it was created, before which nobody held shares), the tree's shape, the
cluster's allocations and the definition of the figures; the key holds each of them:

* the tree's shape itself (every node's id, parent and path), hashed, as the report used it;
* the cluster's validation stamp (``fleet.models.ValidationStamp``), which database triggers
  renew whenever one of the cluster's allocations or a budget node changes, so an allocation
  change back-dated into a final period (a scheduled change applied late) is seen;
* ``FIGURES_VERSION``, bumped whenever a figure's definition changes;
* the site's time zone (the periods' midnights), besides the bounds themselves: a week, a
  month or custom dates with the same bounds are the same figures, so the period's kind is
  not in the key.

A kept report holds every node's row, whoever asked: each page then shows the rows its
reader may see, as it does with a report just computed.

A period not final yet (the current one; the one before it for a week after its end) is
split at the last midnight before the moment periods are final up to: its part up to there
is final and kept like a period of its own (under a new key each day), so a request computes
only the days after it, and the two parts' reports are joined (every figure is a sum over
time, or a mean weighted by time).

The stamp is read before the figures, so figures kept under a stamp are never older than it
(as the validation snapshot, ``scheduler.validation``). What no key can see (a backend that
reports a run's end more than ``SETTLE`` late, a pending workload moved to another budget,
which moves its past waits with it) lasts at most ``KEPT_FOR``: entries then expire. A cache
that is down costs speed, never figures: the reports are computed as before.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime, timedelta

from django.core.cache import cache
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from fleet.models import Cluster, ValidationStamp
from fleet.telemetry import SOURCES
from reports.accounting import HOUR, Busy, Tree, seconds
from reports.forms import midnight
from reports.review_report import Report, ReportRow, budget_reports
from scheduler.models import OccupancySample, TelemetryCursor

log = logging.getLogger(__name__)

# Bump whenever a figure of the review report changes definition: reports kept under the
# previous version are then never read again.
FIGURES_VERSION = 1
# Longer than the samples' compaction reaches back (36 h + 2 days) and than a backend's late
# news of when a run really started or ended is expected to take.
SETTLE = timedelta(days=7)
KEPT_FOR = 24 * 3600  # seconds: the most a correction no key sees stays unseen


def final_until(cluster) -> tuple[datetime | None, str | None]:
    """The moment up to which periods are final (None: none is) and the cluster's validation
    stamp, read together in one statement."""
    last_sample, telemetry_until, stamp = Cluster.objects.filter(pk=cluster.pk).values_list(
        Subquery(OccupancySample.objects.filter(cluster=OuterRef("pk"))
                 .order_by("-at").values("at")[:1]),
        Subquery(TelemetryCursor.objects.filter(cluster=OuterRef("pk")).values("until")),
        Subquery(ValidationStamp.objects.filter(cluster=OuterRef("pk")).values("stamp")),
    ).get()
    written = [last_sample]
    if cluster.telemetry in SOURCES:  # its utilization rollups are written up to the cursor
        written.append(telemetry_until)
    if None in written:
        return None, stamp
    return min(written) - SETTLE, stamp


def period_reports(cluster, periods: list[tuple[datetime, datetime]], tree: Tree,
                   now: datetime | None = None) -> list[Report]:
    """`review_report.budget_reports` of ``periods`` (oldest first, none overlapping). The
    final ones come from the cache when they are there. A period not final yet is split at
    the last midnight of its final part: that part is kept like a final period, so only the
    days after it are computed on every request, and the two parts' reports are joined."""
    now = now or timezone.now()
    until, stamp = final_until(cluster)
    final = None if until is None or stamp is None else min(until, now)
    split = None if final is None else _clock_hour(midnight(timezone.localdate(final)))
    # the final part of a period not final yet (split <= final < end) apart from the rest
    parts = [[(start, split), (split, end)] if final is not None and start < split and final < end
             else [(start, end)] for start, end in periods]
    reports = iter(_reports(cluster, [piece for pieces in parts for piece in pieces], tree, now,
                            final, stamp))
    return [next(reports) if len(pieces) == 1
            else _joined(cluster, next(reports), next(reports)) for pieces in parts]


def _clock_hour(moment: datetime) -> datetime:
    """The clock hour ``moment`` falls in: parts split there add up exactly, the rollups
    being hourly (a midnight is one in all but a few time zones)."""
    return datetime.fromtimestamp(moment.timestamp() // HOUR * HOUR, UTC)


def _reports(cluster, periods, tree: Tree, now: datetime, final: datetime | None,
             stamp: str | None) -> list[Report]:
    """The reports of ``periods``: those ending by ``final`` from the cache, the others
    computed together (and the final ones among them kept)."""
    keys = {}
    if final is not None:
        shape = _tree_shape(tree)
        keys = {index: _key(cluster, stamp, shape, start, end)
                for index, (start, end) in enumerate(periods) if end <= final}
    kept = _read(list(keys.values()))
    reports: list[Report | None] = [None] * len(periods)
    for index, key in keys.items():
        if key in kept:
            reports[index] = _report(cluster, tree, *periods[index], kept[key])
    missing = [index for index, report in enumerate(reports) if report is None]
    if missing:
        computed = budget_reports(cluster, [periods[index] for index in missing], now=now,
                                  tree=tree)
        for index, report in zip(missing, computed, strict=True):
            reports[index] = report
        _keep({keys[index]: _figures(report)
               for index, report in zip(missing, computed, strict=True) if index in keys})
    return reports


def _joined(cluster, first: Report, then: Report) -> Report:
    """The report of a period from those of its two parts, ``first`` and ``then`` after it.
    Every figure is a sum over time (waits: the starts of each part) except the shares and
    the fraction, means weighted by the time the cluster existed in each part."""
    spans = [_existed_seconds(cluster, report) for report in (first, then)]
    total = sum(spans)

    def mean(a, b):
        if a is None and b is None:
            return None
        return ((a or 0.0) * spans[0] + (b or 0.0) * spans[1]) / total if total else None

    rows = [
        ReportRow(
            node=a.node, depth=a.depth, leaf=a.leaf, shares=mean(a.shares, b.shares),
            fraction=mean(a.fraction, b.fraction) or 0.0,
            entitlement_h=a.entitlement_h + b.entitlement_h,
            delivered_h=a.delivered_h + b.delivered_h,
            unallocated_h=a.unallocated_h + b.unallocated_h, demand_h=a.demand_h + b.demand_h,
            waits=a.waits + b.waits, preemptions=a.preemptions + b.preemptions,
            lost_h=a.lost_h + b.lost_h, busy=a.busy + b.busy,
        )
        for a, b in zip(first.rows, then.rows, strict=True)
    ]
    return Report(cluster, first.start, then.end, then.until, rows,
                  first.capacity_h + then.capacity_h)


def _existed_seconds(cluster, report: Report) -> float:
    """The seconds of the report's elapsed part the cluster existed (as `budget_reports`
    averages shares over)."""
    return seconds(max(report.start, min(cluster.created, report.until)), report.until)


def _tree_shape(tree: Tree) -> str:
    shape = repr([(node.pk, node.parent_id, node.path) for node in tree.nodes])
    return hashlib.sha256(shape.encode()).hexdigest()[:32]


def _key(cluster, stamp: str, shape: str, start: datetime, end: datetime) -> str:
    return ":".join([
        "final-period", f"v{FIGURES_VERSION}", str(cluster.pk),
        str(cluster.created.timestamp()), stamp, shape,
        timezone.get_current_timezone_name(),  # the institute's (portal.time_zones)
        str(start.timestamp()), str(end.timestamp()),
    ])


# A report's figures without its node objects, which come from the page's tree when read.
FIELDS = ("shares", "fraction", "entitlement_h", "delivered_h", "unallocated_h", "demand_h",
          "waits", "preemptions", "lost_h")


def _figures(report: Report) -> dict:
    return {
        "until": report.until.timestamp(),
        "capacity_h": report.capacity_h,
        "rows": {row.node.pk: (*(getattr(row, name) for name in FIELDS),
                               row.busy.measured, row.busy.busy)
                 for row in report.rows},
    }


def _report(cluster, tree: Tree, start: datetime, end: datetime, figures: dict) -> Report:
    rows = []
    for node in tree.nodes:
        *values, measured, busy = figures["rows"][node.pk]
        rows.append(ReportRow(node=node, depth=node.depth, leaf=tree.is_leaf(node),
                              **dict(zip(FIELDS, values, strict=True)),
                              busy=Busy(measured, busy)))
    return Report(cluster, start, end, datetime.fromtimestamp(figures["until"], UTC), rows,
                  figures["capacity_h"])


def _read(keys: list[str]) -> dict:
    if not keys:
        return {}
    try:
        return cache.get_many(keys)
    except Exception:  # an unreachable cache costs speed, never figures
        log.warning("could not read final periods' reports from the cache", exc_info=True)
        return {}


def _keep(entries: dict) -> None:
    if not entries:
        return
    try:
        cache.set_many(entries, KEPT_FOR)
    except Exception:
        log.warning("could not keep final periods' reports in the cache", exc_info=True)
