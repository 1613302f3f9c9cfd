"""Idle allocations: live allocated runs the idle rule has flagged (their GPUs below the
cluster's idle threshold for its idle period; ``scheduler.utilization``), per budget, with
the GPU-hours they have held idle so far (GPUs x time since they went idle), and the memory
they hold on a GPU meanwhile (the peak since they went idle, where the telemetry knows it: a
loaded model nobody computes with). Read from the runs' idle flags and the utilization
rollups, never from telemetry samples."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from scheduler.models import Run, UtilizationRollup
from scheduler.utilization import gib

HOUR = 3600.0


@dataclass
class IdleRun:
    run: Run
    idle_gpu_hours: float
    memory_gib: float | None = None  # peak memory used on one GPU since it went idle


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
    runs = list(runs)
    memory = memory_while_idle(runs)
    out: list[IdleBudget] = []
    for run in runs:
        if not out or out[-1].budget.pk != run.workload.budget_id:
            out.append(IdleBudget(run.workload.budget))
        idle_for = max(0.0, (now - run.idle_since).total_seconds())
        out[-1].runs.append(IdleRun(run, run.gpus * idle_for / HOUR, gib(memory.get(run.pk))))
    return out


def memory_while_idle(runs: list[Run]) -> dict[int, float]:
    """run id -> the peak memory (MiB) used on one of its GPUs in the clock hours since it
    went idle (the hour it went idle included), for the runs whose telemetry knows it."""
    if not runs:
        return {}
    since = {run.pk: run.idle_since.replace(minute=0, second=0, microsecond=0) for run in runs}
    peak: dict[int, float] = {}
    for run_id, hour, memory in UtilizationRollup.objects.filter(
        run_id__in=since, hour__gte=min(since.values()), memory_mib_max__isnull=False
    ).values_list("run_id", "hour", "memory_mib_max"):
        if hour >= since[run_id]:
            peak[run_id] = max(peak.get(run_id, 0.0), memory)
    return peak
