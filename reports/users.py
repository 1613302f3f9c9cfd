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

from django.db.models import Q, Sum

from reports.accounting import HOUR, Busy, period_until
from reports.sql import Epoch
from scheduler.models import Run, UtilizationRollup

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

    runs = (
        Run.objects.filter(workload__cluster=cluster, started__lt=until)
        .filter(Q(ended__isnull=True) | Q(ended__gt=start))
        .values_list("workload__budget_id", "workload__owner__username", "allocated", "gpus",
                     Epoch("started"), Epoch("ended"))
        .order_by()
    )
    for budget_id, username, allocated, gpus, started, ended in runs:
        held = max(0.0, min(b, ended if ended is not None else b) - max(a, started))
        r = row(budget_id, username)
        if allocated:
            r.delivered_h += gpus * held / HOUR
        else:
            r.unallocated_h += gpus * held / HOUR
        if a <= started < b:
            r.starts += 1
    for budget_id, username, measured, busy in (
        UtilizationRollup.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
        .values("budget_id", "owner__username")
        .annotate(measured=Sum("gpu_seconds"), busy=Sum("busy_gpu_seconds"))
        .values_list("budget_id", "owner__username", "measured", "busy")
        .order_by()
    ):
        row(budget_id, username).busy = Busy(measured or 0.0, busy or 0.0)
    by_budget: dict[int, list[UserRow]] = defaultdict(list)
    for (budget_id, _), r in rows.items():
        by_budget[budget_id].append(r)
    for users in by_budget.values():
        users.sort(key=lambda r: (-r.delivered_h, -r.unallocated_h, r.username))
    return dict(by_budget)


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
