"""The review report over time and across clusters.

* Period over period: the budget report of the chosen period and of the periods before it
  (``HISTORY`` in all: this one, the previous one, and a sparkline of them all) for
  delivered GPU-h, attainment, median wait and utilization, each defined as in
  ``reports.review_report``.
* Demand against supply, per period, for the whole cluster: GPU-hours requested, i.e. running
  (delivered + unallocated GPU-h) plus pending (GPU-time allocated workloads spent queued),
  over the GPU-hours the healthy hosts could give (capacity). Above 1, more was asked for
  than the cluster had: the seeds' "2-3x".
* Institute roll-up: a budget's delivered GPU-h on every cluster in the period, normalised by
  cluster size: delivered / capacity of each cluster (its share of that cluster's GPU-time),
  and over the institute, total delivered / total capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.utils import timezone

from reports.accounting import Tree
from reports.final_periods import period_reports
from reports.forms import midnight
from reports.review_report import Report, ReportRow

HISTORY = 8


def previous_period(start: datetime, end: datetime, period: str) -> tuple[datetime, datetime]:
    """The period just before ``[start, end)``: the previous calendar week, month or quarter,
    or for custom dates the same number of days before."""
    first = timezone.localdate(start)
    if period in ("month", "quarter"):
        months = 1 if period == "month" else 3
        index = first.year * 12 + first.month - 1 - months
        previous = date(index // 12, index % 12 + 1, 1)
        return midnight(previous), start
    days = (timezone.localdate(end) - first).days
    return midnight(first - timedelta(days=days)), start


def periods(start: datetime, end: datetime, period: str, n: int = HISTORY
            ) -> list[tuple[datetime, datetime]]:
    """The last ``n`` periods, oldest first, the chosen one last."""
    out = [(start, end)]
    while len(out) < n:
        out.insert(0, previous_period(*out[0], period))
    return out


@dataclass
class PeriodFigures:
    report: Report
    rows: dict[int, ReportRow]  # node id -> row

    @property
    def demand_h(self) -> float:
        roots = [row for row in self.report.rows if row.depth == 0]
        return sum(row.demand_h + row.unallocated_h for row in roots)

    @property
    def demand_over_supply(self) -> float | None:
        capacity = self.report.capacity_h
        return self.demand_h / capacity if capacity > 0 else None


def period_over_period(cluster, start: datetime, end: datetime, period: str, tree: Tree,
                       now: datetime | None = None) -> list[PeriodFigures]:
    """The figures of each period, oldest first; those of final periods are kept once
    computed (``reports.final_periods``)."""
    return [PeriodFigures(report, {row.node.pk: row for row in report.rows})
            for report in period_reports(cluster, periods(start, end, period), tree, now=now)]


METRICS = [
    ("delivered", "Delivered GPU-h", lambda row: row.delivered_h),
    ("attainment", "Attainment %",
     lambda row: None if row.attainment is None else 100 * row.attainment),
    ("wait", "Median wait (min)",
     lambda row: None if row.wait_median is None else row.wait_median / 60),
    ("utilization", "Utilization %",
     lambda row: None if row.utilization is None else 100 * row.utilization),
]


@dataclass
class Trend:
    label: str
    values: list[float | None]  # oldest first

    @property
    def this(self) -> float | None:
        return self.values[-1]

    @property
    def previous(self) -> float | None:
        return self.values[-2] if len(self.values) > 1 else None


def node_trends(history: list[PeriodFigures], node_id: int) -> list[Trend]:
    out = []
    for _, label, value in METRICS:
        values = []
        for figures in history:
            row = figures.rows.get(node_id)
            values.append(None if row is None else value(row))
        out.append(Trend(label, values))
    return out


@dataclass
class InstituteRow:
    node: object  # BudgetNode
    per_cluster: list[tuple[float, float | None]]  # in cluster order: GPU-h, of capacity
    total_delivered_h: float
    total_share: float | None


def institute(clusters, start: datetime, end: datetime, tree: Tree, node_ids: set[int],
              now: datetime | None = None, reports: dict[int, Report] | None = None
              ) -> list[InstituteRow]:
    """Per node in ``node_ids`` (tree order): delivered GPU-h on each cluster, as a share of
    that cluster's capacity, and over all clusters. ``reports``: budget reports of the period
    already computed, by cluster id."""
    reports = dict(reports or {})
    for cluster in clusters:
        if cluster.pk not in reports:
            reports[cluster.pk] = period_reports(cluster, [(start, end)], tree, now=now)[0]
    capacity = [reports[c.pk].capacity_h for c in clusters]
    total_capacity = sum(capacity)
    rows_by_cluster = [{row.node.pk: row for row in reports[c.pk].rows} for c in clusters]
    out = []
    for node in tree.nodes:
        if node.pk not in node_ids:
            continue
        delivered = [rows[node.pk].delivered_h for rows in rows_by_cluster]
        total = sum(delivered)
        out.append(InstituteRow(
            node,
            [(hours, hours / gpu_h if gpu_h > 0 else None)
             for hours, gpu_h in zip(delivered, capacity, strict=True)],
            total, total / total_capacity if total_capacity > 0 else None,
        ))
    return out
