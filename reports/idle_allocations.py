"""Idle allocations: live allocated runs the idle rule has flagged (their GPUs below the
cluster's idle threshold for its idle period; ``scheduler.utilization``), per budget, with
the GPU-hours they have held idle so far (GPUs x time since they went idle). Read from the
runs' idle flags, never from telemetry samples."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from scheduler.models import Run

HOUR = 3600.0


@dataclass
class IdleRun:
    run: Run
    idle_gpu_hours: float


@dataclass
class IdleBudget:
    budget: object  # BudgetNode
    runs: list[IdleRun] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return sum(item.run.gpus for item in self.runs)

    @property
    def idle_gpu_hours(self) -> float:
        return sum(item.idle_gpu_hours for item in self.runs)


def idle_allocations(budget_ids: set[int], now: datetime) -> list[IdleBudget]:
    """The flagged live allocated runs charged to ``budget_ids``, grouped per budget (by path),
    longest idle first within each."""
    runs = (
        Run.objects.filter(ended__isnull=True, allocated=True, idle_flagged_at__isnull=False,
                           workload__budget_id__in=budget_ids)
        .select_related("workload__budget", "workload__owner", "workload__cluster")
        .order_by("workload__budget__path", "idle_since", "pk")
    )
    out: list[IdleBudget] = []
    for run in runs:
        if not out or out[-1].budget.pk != run.workload.budget_id:
            out.append(IdleBudget(run.workload.budget))
        idle_for = max(0.0, (now - run.idle_since).total_seconds())
        out[-1].runs.append(IdleRun(run, run.gpus * idle_for / HOUR))
    return out
