"""What-if: the last days of a cluster's real submissions replayed through the simulator
(``scheduler.engine.simulate``, the engine the live loop runs) with other parameters, next to
what actually happened.

* The period: the last ``days`` in whole clock hours, up to the last full hour (``period``),
  because "actually" comes from hourly usage rollups, which cannot be cut inside an hour.
* The trace: every workload submitted in ``[start, end)``, at its submission time, with its
  GPUs, budget leaf, owner, declared ``min_runtime`` and ``resumable``. Its work is the
  declared ``expected_duration`` when there is one, else the GPU-time its runs actually
  computed (run time, minus the grace periods a resumable run spent checkpointing). A workload
  that never ran and declared no duration (cancelled or still waiting) cannot be replayed: it
  is left out and counted.
* The start: the cluster as it really was at ``start`` (``initial_state``): runs already
  running, with their placement, protection, signal (GPUs held in grace) and work left;
  workloads waiting; hosts out of service; the allocated usage and healthy capacity charged
  over the window before. A cold start (an empty cluster) under-delivers by all the work
  already running and waits less for lack of competition.
* The cluster: today's hosts, with what really happened to them in the period (drains,
  failures, returns) instead of simulated failures and repairs.
* Two replays: "as is" with the cluster's parameters and today's shares, and the "what-if"
  with the requested window, maximum min_runtime, hysteresis and shares. The replay as is
  shows how far the simulation alone is from reality; the difference between the two is the
  effect of the change.
* Figures per budget node: entitlement = fraction x healthy GPU-time of the replayed span,
  delivered = allocated GPU-time charged to the subtree; waits are per workload (all its time
  queued, requeues included) over workloads that started, like the simulator's jobs.csv.
  "Actually" comes from the budget review report of the same period.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from budgets.models import Allocation
from budgets.services import shares_by_path
from fleet.models import CapacityRollup, Cluster, HostEvent
from reports import accounting, review_report
from reports.sql import Epoch
from scheduler.engine import Params
from scheduler.engine.idle import IdlePolicy
from scheduler.engine.model import HostState
from scheduler.engine.simulate import (
    HOST_BACK,
    HOST_DRAIN,
    HOST_FAIL,
    InitialState,
    RunningAtStart,
    SimConfig,
    Simulator,
)
from scheduler.engine.traces import ClusterSpec, HostSpec, TraceJob
from scheduler.loop import floor_hour
from scheduler.models import Event, Run, RunGPU, Workload

HOUR = 3600.0
DAY = 86400.0
MAX_DAYS = 90
# the cluster's parameters a what-if may change
PARAMETERS = ("window", "max_min_runtime", "grace", "hysteresis", "preempt_idle")


def _computed(runs, stop: float) -> dict[int, float]:
    """Seconds each run computed up to ``stop``: its time running, minus the grace a
    preempted resumable run spent checkpointing. ``runs``: ``(pk, started, ended,
    signalled_at, end_reason, resumable)`` rows, times as epochs."""
    computed = {}
    for pk, started, ended, signalled, reason, resumable in runs:
        finish = min(ended if ended is not None else stop, stop)
        work = finish - started
        if reason == Run.EndReason.PREEMPTED and resumable and signalled is not None:
            work -= finish - min(signalled, finish)  # checkpointing, not computing
        computed[pk] = max(0.0, work)
    return computed


def _runs_of(workloads):
    """The runs of ``workloads``, by workload and number, as ``(run pk, workload pk, number,
    started, ended, signalled_at, end_reason, resumable, protected_until)``, times as epochs."""
    return list(
        Run.objects.filter(workload__in=workloads)
        .values_list("pk", "workload_id", "number", Epoch("started"), Epoch("ended"),
                     Epoch("signalled_at"), "end_reason", "workload__resumable",
                     Epoch("protected_until"))
        .order_by("workload_id", "number")
    )


def _work(expected: int | None, computed_before: float, computed_after: float) -> float:
    """Work left for a replay: the declared duration minus what was computed before, or,
    without a declaration, what its runs really computed afterwards."""
    return float(expected) - computed_before if expected else computed_after


def trace_jobs(cluster: Cluster, start: datetime, end: datetime) -> tuple[list[TraceJob], int]:
    """The replayable submissions of ``[start, end)`` (times in seconds from ``start``) and the
    number left out."""
    origin, stop = start.timestamp(), end.timestamp()
    workloads = Workload.objects.filter(cluster=cluster, submitted__gte=start, submitted__lt=end)
    runs = _runs_of(workloads)
    computed = _computed(((r[0], r[3], r[4], r[5], r[6], r[7]) for r in runs), stop)
    done: dict[int, float] = defaultdict(float)
    for row in runs:
        done[row[1]] += computed[row[0]]
    jobs, skipped = [], 0
    for pk, path, user, gpus, min_runtime, resumable, submitted, expected in (
        workloads.values_list("pk", "budget__path", "owner__username", "gpus", "min_runtime",
                              "resumable", Epoch("submitted"), "expected_duration")
        .order_by("submitted", "pk")
    ):
        work = _work(expected, 0.0, done.get(pk, 0.0))
        if work <= 0:
            skipped += 1
            continue
        jobs.append(TraceJob(str(pk), submitted - origin, work, gpus, path, user,
                             float(min_runtime), bool(resumable)))
    return jobs, skipped


# host events that leave a host out of service, and the engine state it is in afterwards
_OUT_OF_SERVICE = {
    HostEvent.Kind.FAILED: HostState.DOWN,
    HostEvent.Kind.DRAINED: HostState.DRAINED,
    HostEvent.Kind.REPAIR_STARTED: HostState.REPAIRING,
    HostEvent.Kind.REPAIR_FAILED: HostState.REPAIRING,
    HostEvent.Kind.ESCALATED: HostState.ESCALATED,
    HostEvent.Kind.DRAIN_REQUESTED: HostState.DRAINING,
    HostEvent.Kind.HEALTH_SIGNAL: HostState.DRAINING,
}
# host events of the period that change what the scheduler may use
_CHANGES = {
    HostEvent.Kind.RETURNED: HOST_BACK,
    HostEvent.Kind.DRAIN_REQUESTED: HOST_DRAIN,
    HostEvent.Kind.HEALTH_SIGNAL: HOST_DRAIN,
    HostEvent.Kind.FAILED: HOST_FAIL,
}


def _hosts_out(cluster: Cluster, start: datetime) -> dict[str, HostState]:
    """Hosts out of service at ``start``, by their last event before it."""
    last: dict[str, str] = {}
    for name, kind in (HostEvent.objects.filter(host__cluster=cluster, at__lt=start)
                       .order_by("at", "pk").values_list("host__name", "kind")):
        last[name] = kind
    return {name: _OUT_OF_SERVICE[kind] for name, kind in last.items() if kind in _OUT_OF_SERVICE}


def host_events(cluster: Cluster, start: datetime, end: datetime):
    """What really happened to the hosts in ``[start, end)``, as the simulator's host events
    ``(seconds from start, host, change)``."""
    origin = start.timestamp()
    return tuple(
        (at - origin, name, _CHANGES[kind])
        for name, at, kind in (HostEvent.objects
                               .filter(host__cluster=cluster, at__gte=start, at__lt=end,
                                       kind__in=list(_CHANGES))
                               .order_by("at", "pk").values_list("host__name", Epoch("at"), "kind"))
    )


def _capacity_before(cluster: Cluster, start: datetime, window: float, gpus: int):
    """Healthy GPUs over ``[start - window, start)`` as ``(start, end, gpus)`` segments in
    seconds from ``start``, from the hourly capacity the live loop charges (the hour cut by
    the window pro rata, as ``window_capacity`` does; the hour holding ``start`` at today's
    GPUs, its charge running past ``start``)."""
    since = max(start - timedelta(seconds=window), cluster.created)
    origin, first = start.timestamp(), since.timestamp()
    segments = []
    for hour, gpu_seconds in (CapacityRollup.objects
                              .filter(cluster=cluster, hour__gt=since - timedelta(hours=1),
                                      hour__lt=start)
                              .values_list(Epoch("hour"), "gpu_seconds")):
        if hour + HOUR > origin:
            segments.append((max(hour, first) - origin, 0.0, float(gpus)))
        else:
            segments.append((max(hour, first) - origin, hour + HOUR - origin,
                             gpu_seconds / HOUR))
    return segments


def initial_state(cluster: Cluster, start: datetime, end: datetime, window: float,
                  gpus: int) -> tuple[InitialState, int]:
    """The cluster as it really was at ``start``: runs live then (protection, signals, work
    left), workloads waiting then, the allocated usage and capacity of the ``window`` before,
    hosts out of service. With the number of waiting or running workloads left out (no
    declared duration and nothing computed in the period)."""
    origin, stop = start.timestamp(), end.timestamp()
    earliest = start - timedelta(seconds=window)
    charged = []
    for path, gpu_count, started, ended in (
        Run.objects.filter(workload__cluster=cluster, allocated=True, started__lt=start,
                           ended__gt=earliest, ended__lte=start)
        .values_list("workload__budget__path", "gpus", Epoch("started"), Epoch("ended"))
    ):
        charged.append((path, gpu_count, max(started, earliest.timestamp()) - origin,
                        ended - origin))
    live_then = (Q(finished=None) | Q(finished__gt=start))
    workloads = Workload.objects.filter(live_then, cluster=cluster, submitted__lt=start)
    runs = _runs_of(workloads)
    computed = _computed(((r[0], r[3], r[4], r[5], r[6], r[7]) for r in runs), stop)
    by_workload: dict[int, list] = defaultdict(list)
    for row in runs:
        by_workload[row[1]].append(row)
    slots: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for run_pk, host, index in (RunGPU.objects
                                .filter(run__workload__in=workloads, run__started__lt=start)
                                .filter(Q(run__ended=None) | Q(run__ended__gt=start))
                                .values_list("run_id", "host__name", "index")):
        slots[run_pk][host].append(index)
    state, skipped = InitialState(charged=charged,
                                  capacity=_capacity_before(cluster, start, window, gpus),
                                  hosts=_hosts_out(cluster, start)), 0
    for pk, path, user, gpu_count, min_runtime, resumable, submitted, expected in (
        workloads.values_list("pk", "budget__path", "owner__username", "gpus", "min_runtime",
                              "resumable", Epoch("submitted"), "expected_duration")
        .order_by("submitted", "pk")
    ):
        mine = by_workload.get(pk, [])
        live = next((r for r in mine if r[3] < origin and (r[4] is None or r[4] > origin)),
                    None)
        if live is not None:
            before = sum(computed[r[0]] for r in mine if r[2] < live[2])
            after = sum(computed[r[0]] for r in mine if r[2] >= live[2])
        else:
            before = sum(computed[r[0]] for r in mine if r[3] < origin)
            after = sum(computed[r[0]] for r in mine if r[3] >= origin)
        work = _work(expected, before, after)
        if work <= 0 or (live is not None and not slots.get(live[0])):
            skipped += 1
            continue
        job = TraceJob(str(pk), submitted - origin, work, gpu_count, path, user,
                       float(min_runtime), bool(resumable))
        if live is None:
            state.queued.append(job)
            continue
        state.running.append(RunningAtStart(
            job, live[3] - origin,
            tuple((host, tuple(sorted(indices)))
                  for host, indices in sorted(slots[live[0]].items())),
            live[8] - origin, None if live[5] is None or live[5] >= origin else live[5] - origin,
            live[2]))
    return state, skipped


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


def cluster_spec(cluster: Cluster) -> ClusterSpec:
    hosts = cluster.hosts.order_by("name").values_list("name", "gpus", "group")
    return ClusterSpec([HostSpec(name, gpus, group) for name, gpus, group in hosts],
                       source=cluster.name)


def replay(jobs, shares: dict[str, float], spec: ClusterSpec, initial: InitialState,
           params: Params, horizon: float, progress: Callable[[float], None],
           idle_share: float = 0.0, idle_policy: IdlePolicy | None = None,
           hosts: tuple = ()) -> dict:
    """One replay; ``hosts``: what really happened to the hosts (``host_events``), which
    brings them back instead of simulated repairs."""
    sim = Simulator(jobs, shares, spec, SimConfig(
        params=params, until=horizon, idle_share=idle_share, idle_policy=idle_policy,
        host_events=hosts, repairs=False,
    ), initial)
    # the simulator's own progress hook: its clock over the horizon, every 1% at most
    result = sim.run(progress=_every_half_second(progress))
    summary = result.summary
    # healthy GPU-time over the whole horizon (the replay's clock may stop early, idle)
    capacity = sim.ledger.cum("\0capacity", horizon) - sim.ledger.cum("\0capacity", 0.0)
    budgets = {
        path: {
            "entitlement_h": sim.tree.fraction(path) * capacity / HOUR,
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
        grace=float(wanted.get("grace", cluster.grace)),
    )


def period(now: datetime, days: float) -> tuple[datetime, datetime]:
    """The replayed period: ``days`` of whole clock hours up to the last full hour before
    ``now``. What actually happened is read from the hourly usage rollups, which cannot be cut
    inside an hour: a period starting mid-hour would replay usage that "actually" leaves out
    (the hour it starts in) and one ending mid-hour would compare against an hour still
    filling."""
    end = floor_hour(now)
    return end - timedelta(days=days), end


def run(what_if, progress: Callable[[float], None] = lambda p: None,
        now: datetime | None = None) -> dict:
    """Both replays and the actual figures of ``what_if`` (a ``reports.models.WhatIf``)."""
    now = now or timezone.now()
    cluster = what_if.cluster
    wanted = what_if.params
    start, end = period(now, float(wanted.get("days", 7)))
    horizon = (end - start).total_seconds()
    tree = accounting.Tree()
    allocations = {a.node_id: a for a in Allocation.objects.filter(cluster=cluster)}
    today = shares_by_path(tree.nodes, allocations)
    by_path = {node.path: node.pk for node in tree.nodes}
    overrides = {by_path[path]: value for path, value in wanted.get("shares", {}).items()
                 if path in by_path}
    changed = shares_by_path(tree.nodes, allocations, overrides)
    jobs, skipped = trace_jobs(cluster, start, end)
    spec = cluster_spec(cluster)
    as_is_params, what_if_params = params_for(cluster), params_for(cluster, wanted)
    # the usage both replays' first passes see: the longer of the two windows
    window = max(as_is_params.window, what_if_params.window)
    initial, skipped_at_start = initial_state(cluster, start, end, window, spec.total_gpus)
    hosts = host_events(cluster, start, end)
    idle = idle_share(cluster, start, end, len(jobs))
    policy = IdlePolicy(float(cluster.idle_period), cluster.idle_threshold)
    as_is = replay(jobs, today, spec, initial, as_is_params, horizon,
                   lambda p: progress(0.5 * p), idle, policy if cluster.preempt_idle else None,
                   hosts)
    progress(0.5)
    what_if_preempts_idle = bool(wanted.get("preempt_idle", cluster.preempt_idle))
    what = replay(jobs, changed, spec, initial, what_if_params, horizon,
                  lambda p: progress(0.5 + 0.5 * p), idle,
                  policy if what_if_preempts_idle else None, hosts)
    return {
        "start": start.isoformat(),
        "end": end.isoformat(),
        "jobs": len(jobs),
        "skipped": skipped + skipped_at_start,
        "at_start": {"running": len(initial.running), "queued": len(initial.queued),
                     "hosts_out": len(initial.hosts),
                     "host_changes": len(hosts)},
        "params": {
            "as_is": {key: getattr(cluster, key) for key in PARAMETERS},
            "what_if": {key: wanted.get(key, getattr(cluster, key)) for key in PARAMETERS},
        },
        "idle_share": idle,
        "shares": {"as_is": today, "what_if": changed},
        "actual": actual(cluster, start, end, now),
        "as_is": as_is,
        "what_if": what,
    }
