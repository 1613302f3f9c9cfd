"""What-if: the last days of a cluster's real submissions replayed through the simulator
(``scheduler.engine.simulate``, the engine the live loop runs) with other parameters, next to
what actually happened.

* The trace: every workload submitted in ``[start, end)``, at its submission time, with its
  GPUs, budget leaf, owner, declared ``min_runtime`` and ``resumable``. Its work is the
  declared ``expected_duration`` when there is one, else the GPU-time its runs actually
  computed (run time, minus the grace periods a resumable run spent checkpointing). A workload
  that never ran and declared no duration (cancelled or still waiting) cannot be replayed: it
  is left out and counted.
* The cluster: today's hosts, no failures (real failures are not replayed).
* Two replays: "as is" with the cluster's parameters and today's shares, and the "what-if"
  with the requested window, maximum min_runtime, hysteresis and shares. The replay as is
  shows how far the simulation alone is from reality; the difference between the two is the
  effect of the change.
* Figures per budget node: entitlement = fraction x GPUs x the replayed span (no failures),
  delivered = allocated GPU-time charged to the subtree; waits are per workload (all its time
  queued, requeues included) over workloads that started, like the simulator's jobs.csv.
  "Actually" comes from the budget review report of the same period.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta

from django.utils import timezone

from budgets.models import Allocation
from budgets.services import shares_by_path
from fleet.models import Cluster
from reports import accounting, review_report
from reports.sql import Epoch
from scheduler.engine import Params
from scheduler.engine.idle import IdlePolicy
from scheduler.engine.simulate import SimConfig, Simulator
from scheduler.engine.traces import ClusterSpec, HostSpec, TraceJob
from scheduler.models import Event, Run, Workload

HOUR = 3600.0
DAY = 86400.0
MAX_DAYS = 90


def trace_jobs(cluster: Cluster, start: datetime, end: datetime) -> tuple[list[TraceJob], int]:
    """The replayable submissions of ``[start, end)`` (times in seconds from ``start``) and the
    number left out."""
    origin, stop = start.timestamp(), end.timestamp()
    workloads = Workload.objects.filter(cluster=cluster, submitted__gte=start, submitted__lt=end)
    done: dict[int, float] = defaultdict(float)
    for workload_id, started, ended, signalled, reason, resumable in (
        Run.objects.filter(workload__in=workloads)
        .values_list("workload_id", Epoch("started"), Epoch("ended"), Epoch("signalled_at"),
                     "end_reason", "workload__resumable")
        .order_by()
    ):
        finish = min(ended if ended is not None else stop, stop)
        work = finish - started
        if reason == Run.EndReason.PREEMPTED and resumable and signalled is not None:
            work -= finish - min(signalled, finish)  # checkpointing, not computing
        done[workload_id] += max(0.0, work)
    jobs, skipped = [], 0
    for pk, path, user, gpus, min_runtime, resumable, submitted, expected in (
        workloads.values_list("pk", "budget__path", "owner__username", "gpus", "min_runtime",
                              "resumable", Epoch("submitted"), "expected_duration")
        .order_by("submitted", "pk")
    ):
        work = float(expected) if expected else done.get(pk, 0.0)
        if work <= 0:
            skipped += 1
            continue
        jobs.append(TraceJob(str(pk), submitted - origin, work, gpus, path, user,
                             float(min_runtime), bool(resumable)))
    return jobs, skipped


def _every_half_second(progress: Callable[[float], None]) -> Callable[[float], None]:
    """``progress``, passed on at most twice a second of wall time (each call writes the row
    the page polls), and always at the end."""
    told = time.monotonic()

    def tell(fraction: float) -> None:
        nonlocal told
        if fraction >= 1.0 or time.monotonic() - told >= 0.5:
            told = time.monotonic()
            progress(fraction)

    return tell


def replay(jobs, shares: dict[str, float], cluster: Cluster, params: Params, horizon: float,
           progress: Callable[[float], None], idle_share: float = 0.0,
           preempt_idle: bool = False) -> dict:
    hosts = list(cluster.hosts.order_by("name").values_list("name", "gpus", "group"))
    spec = ClusterSpec([HostSpec(name, gpus, group) for name, gpus, group in hosts],
                       source=cluster.name)
    policy = IdlePolicy(float(cluster.idle_period), cluster.idle_threshold)
    sim = Simulator(jobs, shares, spec, SimConfig(
        params=params, until=horizon, idle_share=idle_share,
        idle_policy=policy if preempt_idle else None,
    ))
    # the simulator's own progress hook: its clock over the horizon, every 1% at most
    result = sim.run(progress=_every_half_second(progress))
    summary = result.summary
    capacity_h = spec.total_gpus * horizon / HOUR
    budgets = {
        path: {
            "entitlement_h": sim.tree.fraction(path) * capacity_h,
            "delivered_h": data["delivered_total_gpu_s"] / HOUR,
            "fraction": sim.tree.fraction(path),
        }
        for path, data in summary["budgets"].items()
    }
    waits = [r.wait_s for r in result.jobs
             if r.first_start is not None and r.workload.min_runtime > 0]
    return {
        "budgets": budgets,
        "waits": _waits(waits),
        "preemptions": summary["preemptions"]["total"],
        "requeues": summary["requeues"],
        "occupancy_allocated": summary["occupancy"]["allocated"],
        "occupancy_unallocated": summary["occupancy"]["unallocated"],
        "never_started": summary["never_started"],
        "refused": summary["refused"],
        "clamped": summary["min_runtime_clamped"],
        "idle_h": summary["idle"]["gpu_hours_idle"],
        "idle_returned_h": summary["idle"]["gpu_hours_returned"],
    }


def idle_share(cluster: Cluster, start: datetime, end: datetime, jobs: int) -> float:
    """The share of the period's workloads the idle rule flagged (an idle event on their
    timeline): the replays make that share of workloads sessions left open (seeded, so not
    necessarily the same ones)."""
    if not jobs:
        return 0.0
    flagged = (Event.objects.filter(workload__cluster=cluster, kind=Event.Kind.IDLE,
                                    at__gte=start, at__lt=end)
               .values("workload_id").distinct().count())
    return min(1.0, flagged / jobs)


def _waits(values: list[float]) -> dict:
    return {"n": len(values), "p50": accounting.quantile(values, 0.5),
            "p95": accounting.quantile(values, 0.95)}


def actual(cluster: Cluster, start: datetime, end: datetime, now: datetime) -> dict:
    """What happened in the same period, from the budget review report."""
    report = review_report.budget_report(cluster, start, end, now=now)
    root = next(row for row in report.rows if row.node.parent_id is None)
    return {
        "budgets": {
            row.node.path: {"entitlement_h": row.entitlement_h, "delivered_h": row.delivered_h,
                            "fraction": row.fraction}
            for row in report.rows
        },
        "waits": _waits(root.waits),
        "preemptions": root.preemptions,
    }


def params_for(cluster: Cluster, wanted: dict | None = None) -> Params:
    wanted = wanted or {}
    return Params(
        window=float(wanted.get("window", cluster.window)),
        max_min_runtime=float(wanted.get("max_min_runtime", cluster.max_min_runtime)),
        hysteresis=float(wanted.get("hysteresis", cluster.hysteresis)),
        grace=float(cluster.grace),
    )


def run(what_if, progress: Callable[[float], None] = lambda p: None,
        now: datetime | None = None) -> dict:
    """Both replays and the actual figures of ``what_if`` (a ``reports.models.WhatIf``)."""
    now = now or timezone.now()
    cluster = what_if.cluster
    wanted = what_if.params
    start = now - timedelta(days=float(wanted.get("days", 7)))
    horizon = (now - start).total_seconds()
    tree = accounting.Tree()
    allocations = {a.node_id: a for a in Allocation.objects.filter(cluster=cluster)}
    today = shares_by_path(tree.nodes, allocations)
    by_path = {node.path: node.pk for node in tree.nodes}
    overrides = {by_path[path]: value for path, value in wanted.get("shares", {}).items()
                 if path in by_path}
    changed = shares_by_path(tree.nodes, allocations, overrides)
    jobs, skipped = trace_jobs(cluster, start, now)
    idle = idle_share(cluster, start, now, len(jobs))
    as_is = replay(jobs, today, cluster, params_for(cluster), horizon,
                   lambda p: progress(0.5 * p), idle, cluster.preempt_idle)
    progress(0.5)
    what = replay(jobs, changed, cluster, params_for(cluster, wanted), horizon,
                  lambda p: progress(0.5 + 0.5 * p), idle,
                  bool(wanted.get("preempt_idle", cluster.preempt_idle)))
    return {
        "start": start.isoformat(),
        "end": now.isoformat(),
        "jobs": len(jobs),
        "skipped": skipped,
        "params": {
            "as_is": {"window": cluster.window, "max_min_runtime": cluster.max_min_runtime,
                      "hysteresis": cluster.hysteresis, "preempt_idle": cluster.preempt_idle},
            "what_if": {key: wanted.get(key, getattr(cluster, key))
                        for key in ("window", "max_min_runtime", "hysteresis", "preempt_idle")},
        },
        "idle_share": idle,
        "shares": {"as_is": today, "what_if": changed},
        "actual": actual(cluster, start, now, now),
        "as_is": as_is,
        "what_if": what,
    }
