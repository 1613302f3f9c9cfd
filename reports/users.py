"""Who used the time: GPU-hours per user within each budget over a period, and the top users.

* Delivered GPU-h of a user in a budget = GPU-time of the user's allocated runs charged to the
  budget, clipped to the elapsed period (the same GPU-seconds the hourly usage rollups sum, so
  over whole hours a budget's users add up to its delivered GPU-h).
* Unallocated GPU-h likewise for the user's free runs (min_runtime 0).
* Starts: the user's runs that started in the period.
* Utilization: busy / measured GPU-seconds of the user's runs in the budget (hourly
  utilization rollups, which keep the owner).

A user who moved between projects has a row under each budget they charged, each with the
time charged there; the top users add them up.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from reports.accounting import (
    HOUR,
    Busy,
    Tree,
    period_until,
    runs_overlapping,
    utilization_by_owner,
)
from reports.final_periods import period_reports
from reports.review_report import Report

TOP = 10


@dataclass
class UserRow:
    username: str
    budget_ids: list[int] = field(default_factory=list)
    budgets: list[str] = field(default_factory=list)  # their paths, in the top users
    delivered_h: float = 0.0
    unallocated_h: float = 0.0
    starts: int = 0
    busy: Busy = field(default_factory=Busy)

    @property
    def utilization(self) -> float | None:
        return self.busy.fraction


def user_rows(cluster, start: datetime, end: datetime, now: datetime | None = None
              ) -> dict[int, list[UserRow]]:
    """Per budget id (where runs are charged), one row per user, most delivered first."""
    until = period_until(start, end, now)
    a, b = start.timestamp(), until.timestamp()
    rows: dict[tuple[int, str], UserRow] = {}

    def row(budget_id, username) -> UserRow:
        key = (budget_id, username)
        if key not in rows:
            rows[key] = UserRow(username, [budget_id])
        return rows[key]

    for run in runs_overlapping(cluster, start, until):
        held = max(0.0, min(b, run.ended if run.ended is not None else b) - max(a, run.started))
        r = row(run.budget_id, run.owner)
        if run.allocated:
            r.delivered_h += run.gpus * held / HOUR
        else:
            r.unallocated_h += run.gpus * held / HOUR
        if a <= run.started < b:
            r.starts += 1
    for (budget_id, username), busy in utilization_by_owner(cluster, start, end).items():
        row(budget_id, username).busy = busy
    by_budget: dict[int, list[UserRow]] = defaultdict(list)
    for (budget_id, _), r in rows.items():
        by_budget[budget_id].append(r)
    for users in by_budget.values():
        users.sort(key=lambda r: (-r.delivered_h, -r.unallocated_h, r.username))
    return dict(by_budget)


def report_and_users(cluster, start: datetime, end: datetime, tree: Tree,
                     now: datetime | None = None) -> tuple[Report, dict[int, list[UserRow]]]:
    """The review report of the period, its final part kept once computed
    (``reports.final_periods``), and its per-user rows."""
    now = now or timezone.now()
    report = period_reports(cluster, [(start, end)], tree, now=now)[0]
    return report, user_rows(cluster, start, end, now=now)


def top_users(by_budget: dict[int, list[UserRow]], paths: dict[int, str], n: int = TOP
              ) -> list[UserRow]:
    """The ``n`` users with the most delivered GPU-h over the budgets in ``paths`` (id ->
    path), each summed over every budget they charged (ties: unallocated GPU-h, then name)."""
    total: dict[str, UserRow] = {}
    for budget_id, users in by_budget.items():
        if budget_id not in paths:
            continue
        for r in users:
            t = total.setdefault(r.username, UserRow(r.username))
            t.budget_ids.append(budget_id)
            t.budgets.append(paths[budget_id])
            t.delivered_h += r.delivered_h
            t.unallocated_h += r.unallocated_h
            t.starts += r.starts
            t.busy = t.busy + r.busy
    ranked = sorted(total.values(), key=lambda r: (-r.delivered_h, -r.unallocated_h, r.username))
    return ranked[:n]
