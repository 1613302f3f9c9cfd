"""Utilization: the fleet's GPU telemetry mapped to runs, rolled up per run and clock hour,
and the idle rule.

A run holds GPU indices on hosts (``RunGPU``; the rows stay, ``held=False``, after the run
ends). A collection reads the cluster's telemetry (``fleet.telemetry``) for a stretch of whole
steps ``[start, end)`` for every GPU a run held in it, and charges each step to the runs that
held the GPU during the step, by the seconds each held it:

* measured GPU-seconds: the seconds a run held a GPU during steps the telemetry knows;
* busy GPU-seconds: the same seconds times the GPU's busy fraction over the step.

Utilization of a run, budget, user or cluster over any period = busy / measured GPU-seconds
of its ``UtilizationRollup`` rows (steps the telemetry knows nothing about, a dead host's,
count for neither). Pages read only the rollups.

The idle rule, per cluster: a live run whose GPUs' mean busy fraction stays below
``idle_threshold`` for ``idle_period`` seconds is flagged idle: an event on its timeline
and the ``run_idle`` signal (the owner's notification hook). A step at or above the threshold
clears the flag; steps without telemetry change nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Prefetch, Q

from fleet.locks import lock_cluster
from fleet.models import Cluster
from fleet.telemetry import Holding, TelemetryUnavailable, grid_floor, telemetry_for
from scheduler.models import Event, Run, RunGPU, TelemetryCursor, UtilizationRollup
from scheduler.signals import run_idle

log = logging.getLogger(__name__)

HOUR = 3600.0
FIRST_LOOKBACK = 3600.0  # a cluster's first collection reads the last hour
MAX_STRETCH = 6 * 3600.0  # one collection reads at most this much (a long outage catches up)


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def optional_at(epoch: float | None) -> datetime | None:
    return None if epoch is None else at(epoch)


def gib(mib: float | None) -> float | None:
    """GPU memory as pages show it (telemetry reports MiB, as NVML and DCGM do)."""
    return None if mib is None else mib / 1024


@dataclass
class Collection:
    """What one collection did: the stretch read, rollup rows written, runs flagged idle."""

    cluster_id: int
    start: float
    end: float
    rollups: int = 0
    flagged: list[int] = field(default_factory=list)
    error: str = ""


@dataclass
class _Charge:
    gpu_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0
    memory_mib_max: float | None = None


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"


def idle_reason(cluster: Cluster, since: float) -> str:
    minutes = cluster.idle_period / 60
    return (f"GPUs idle: below {percent(cluster.idle_threshold)} busy since "
            f"{at(since):%Y-%m-%d %H:%M} UTC, longer than the cluster's idle period of "
            f"{minutes:g} min")


def collect(cluster: Cluster, now: datetime) -> Collection | None:
    """Read the cluster's telemetry since the last collection (whole steps up to ``now``),
    charge it into the utilization rollups and apply the idle rule. None when the cluster's
    fleet reports no utilization."""
    source = telemetry_for(cluster)
    if source is None:
        return None
    step = source.step
    cursor = TelemetryCursor.objects.filter(cluster=cluster).first()
    end = grid_floor(now.timestamp(), step)
    if cursor is not None:
        start = cursor.until.timestamp()
    else:
        start = max(end - FIRST_LOOKBACK, grid_floor(cluster.created.timestamp(), step))
    end = min(end, start + MAX_STRETCH)
    done = Collection(cluster.pk, start, end)
    if end <= start:
        return done
    runs = list(
        Run.objects.filter(workload__cluster=cluster, started__lt=at(end))
        .filter(Q(ended__isnull=True) | Q(ended__gt=at(start)))
        .select_related("workload")
        .prefetch_related(Prefetch("assigned_gpus",
                                   queryset=RunGPU.objects.select_related("host")))
    )
    holdings = {
        run.pk: [
            Holding(gpu.host.name, gpu.index, run.started.timestamp(),
                    run.ended.timestamp() if run.ended else end, str(run.workload_id))
            for gpu in run.assigned_gpus.all()
        ]
        for run in runs
    }
    try:
        series = source.read([h for held in holdings.values() for h in held], start, end)
    except TelemetryUnavailable as error:
        done.error = str(error)[:500]
        log.warning("cluster %s: telemetry not read: %s", cluster.name, done.error)
        TelemetryCursor.objects.update_or_create(
            cluster=cluster, defaults={"error": done.error},
            create_defaults={"until": at(start), "error": done.error},
        )
        return done

    charges: dict[tuple[int, float], _Charge] = defaultdict(_Charge)
    idle_updates: dict[int, tuple[datetime | None, datetime | None]] = {}
    flags: list[tuple[Run, float, float]] = []
    for run in runs:
        run_start = run.started.timestamp()
        run_end = run.ended.timestamp() if run.ended else end
        mean_by_step: dict[float, list[float]] = defaultdict(list)
        for holding in holdings[run.pk]:
            for point in series.get((holding.host, holding.index), ()):
                if not start <= point.at < end:
                    continue
                held = min(point.at + step, run_end) - max(point.at, run_start)
                if held <= 0:
                    continue
                charge = charges[(run.pk, grid_floor(point.at, HOUR))]
                charge.gpu_seconds += held
                charge.busy_gpu_seconds += held * point.busy
                if point.memory_mib is not None:
                    charge.memory_mib_max = max(charge.memory_mib_max or 0.0, point.memory_mib)
                mean_by_step[point.at].append(point.busy)
        if run.ended is None:
            state = idle_rule(cluster, run, mean_by_step, step)
            new = (optional_at(state.since), optional_at(state.flagged_at))
            if new != (run.idle_since, run.idle_flagged_at):
                idle_updates[run.pk] = new
            flags.extend((run, since, flagged_at) for since, flagged_at in state.flags)

    with transaction.atomic():
        lock_cluster(cluster.pk)
        # claim the stretch: another worker that read the same cursor finds it moved
        if cursor is None:
            cursor, created = TelemetryCursor.objects.get_or_create(
                cluster=cluster, defaults={"until": at(end)}
            )
            claimed = created
        else:
            claimed = TelemetryCursor.objects.filter(
                cluster=cluster, until=cursor.until
            ).update(until=at(end), error="") == 1
        if not claimed:
            return done
        done.rollups = _add_charges(runs, charges)
        for run_id, (idle_since, flagged_at) in idle_updates.items():
            Run.objects.filter(pk=run_id).update(idle_since=idle_since,
                                                 idle_flagged_at=flagged_at)
        events = []
        for run, since, flagged_at in flags:
            reason = idle_reason(cluster, since)
            events.append(Event(workload_id=run.workload_id, run=run, kind=Event.Kind.IDLE,
                                at=at(flagged_at), reason=reason))
            done.flagged.append(run.pk)
            transaction.on_commit(lambda run=run, since=since, reason=reason: run_idle.send(
                sender=Run, run_id=run.pk, workload_id=run.workload_id,
                owner_id=run.workload.owner_id, idle_since=at(since), reason=reason,
            ))
        Event.objects.bulk_create(events)
    return done


@dataclass
class IdleState:
    """A run's idle state after the steps read, and the idle stretches flagged in them
    (``(idle since, flagged at)``; one collection may see a stretch begin, get flagged and
    end)."""

    since: float | None
    flagged_at: float | None
    flags: list[tuple[float, float]] = field(default_factory=list)


def idle_rule(cluster: Cluster, run: Run, mean_by_step: dict[float, list[float]], step: float
              ) -> IdleState:
    """Walk the steps in time order: a step whose mean busy fraction over the run's GPUs (those
    the telemetry knows) is below the threshold extends the idle stretch, and the stretch is
    flagged once it lasts the idle period; a step at or above the threshold ends it."""
    state = IdleState(run.idle_since.timestamp() if run.idle_since else None,
                      run.idle_flagged_at.timestamp() if run.idle_flagged_at else None)
    for t in sorted(mean_by_step):
        values = mean_by_step[t]
        if sum(values) / len(values) < cluster.idle_threshold:
            if state.since is None:
                state.since = t
            if state.flagged_at is None and t + step - state.since >= cluster.idle_period:
                state.flagged_at = t + step
                state.flags.append((state.since, state.flagged_at))
        else:
            state.since = state.flagged_at = None
    return state


def _add_charges(runs: list[Run], charges: dict[tuple[int, float], _Charge]) -> int:
    """Add the charges to the (run, hour) rollup rows; the number of rows touched."""
    if not charges:
        return 0
    by_pk = {run.pk: run for run in runs}
    hours = {at(hour) for _, hour in charges}
    existing = {
        (row.run_id, row.hour.timestamp()): row
        for row in UtilizationRollup.objects.filter(run_id__in={r for r, _ in charges},
                                                    hour__in=hours)
    }
    changed, new = [], []
    for (run_id, hour), charge in charges.items():
        row = existing.get((run_id, hour))
        if row is None:
            workload = by_pk[run_id].workload
            new.append(UtilizationRollup(
                run_id=run_id, cluster_id=workload.cluster_id, budget_id=workload.budget_id,
                owner_id=workload.owner_id, allocated=by_pk[run_id].allocated, hour=at(hour),
                gpu_seconds=charge.gpu_seconds, busy_gpu_seconds=charge.busy_gpu_seconds,
                memory_mib_max=charge.memory_mib_max,
            ))
            continue
        row.gpu_seconds += charge.gpu_seconds
        row.busy_gpu_seconds += charge.busy_gpu_seconds
        if charge.memory_mib_max is not None:
            row.memory_mib_max = max(row.memory_mib_max or 0.0, charge.memory_mib_max)
        changed.append(row)
    if changed:
        UtilizationRollup.objects.bulk_update(
            changed, ["gpu_seconds", "busy_gpu_seconds", "memory_mib_max"]
        )
    UtilizationRollup.objects.bulk_create(new, batch_size=1000)
    return len(changed) + len(new)
