"""Past history written straight into the database: the demo's week before ``make run``
(``write_simulated``) and the pieces the reports benchmark's synthetic year shares with it
(``capacity_rollups``, ``usage_rollups``, ``bulk``).

``write_simulated`` replays submissions through the simulator (``scheduler.engine.simulate``,
the engine the live loop runs) over one cluster's hosts and today's shares, with seeded host
failures, and writes what happened the way the live loop would have: workloads, runs with the
GPUs they held, timeline events with the engine's reasons, hourly usage rollups charged from
the runs, 10-minute occupancy samples and the capacity rollups the loop charges between them,
and host events (failures, drains, repairs, escalations). Nothing is written after ``now``:
work still running then is handed over to the live loop as RUNNING (its GPUs held), work
still queued as PENDING, and hosts keep the state the replay left them in.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from budgets.models import Allocation, BudgetNode
from budgets.services import shares_by_path
from fleet.models import CapacityRollup, Host, HostEvent
from scheduler.engine import HostState
from scheduler.engine.simulate import SimConfig, Simulator
from scheduler.engine.traces import ClusterSpec, HostSpec, TraceJob
from scheduler.engine.wording import quantity
from scheduler.engine_views import engine_params
from scheduler.loop import split_hours
from scheduler.models import Event, OccupancySample, Run, RunGPU, UsageRollup, Workload, gpu_ranges

BATCH = 5000
SAMPLE_EVERY = timedelta(minutes=10)


def bulk(model, rows) -> list:
    return model.objects.bulk_create(rows, batch_size=BATCH)


def capacity_rollups(cluster, samples, until: datetime) -> list[CapacityRollup]:
    """What the live loop charges between ticks: each sample's healthy GPUs from its moment
    until the next sample (the last one until ``until``), cut at clock hours."""
    hours: dict[datetime, float] = defaultdict(float)
    samples = sorted(samples, key=lambda s: s.at)
    for index, sample in enumerate(samples):
        stop = samples[index + 1].at if index + 1 < len(samples) else until
        for hour, seconds in split_hours(sample.at, stop):
            hours[hour] += sample.available * seconds
    return [CapacityRollup(cluster=cluster, hour=hour, gpu_seconds=gpu_s)
            for hour, gpu_s in sorted(hours.items()) if gpu_s]


def usage_rollups(cluster, runs) -> list[UsageRollup]:
    """Allocated GPU-seconds of ``runs`` (with ``workload.budget_id``) from their start to
    ``accounted_until``, per leaf and clock hour: exactly what the loop's charges add up to."""
    hours: dict[tuple, float] = defaultdict(float)
    for run in runs:
        if not run.allocated:
            continue
        for hour, seconds in split_hours(run.started, run.accounted_until):
            hours[(run.workload.budget_id, hour)] += run.gpus * seconds
    return [UsageRollup(cluster=cluster, budget_id=budget_id, hour=hour, gpu_seconds=gpu_s)
            for (budget_id, hour), gpu_s in sorted(hours.items()) if gpu_s]


@dataclass(slots=True)
class Past:
    """One submission of the past: when, what, by whom, how much work (seconds)."""

    at: datetime
    name: str
    node: BudgetNode
    user: object
    gpus: int
    min_runtime: int
    resumable: bool
    duration: float
    command: str


class _Recorder(Simulator):
    """The simulator, remembering every host state change (the events the loop writes)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.host_log: list[tuple[float, str, HostState, HostState]] = []

    def _host_state(self, host, state) -> None:
        if host.state != state or state == HostState.REPAIRING:  # a retry stays REPAIRING
            self.host_log.append((self.now, host.name, host.state, state))
        super()._host_state(host, state)


def _simulate(cluster, hosts, past: list[Past], origin: datetime, now: datetime,
              config: SimConfig) -> tuple[_Recorder, object]:
    nodes = list(BudgetNode.objects.only("id", "path", "parent_id"))
    allocations = {a.node_id: a for a in Allocation.objects.filter(cluster=cluster)}
    shares = shares_by_path(nodes, allocations)
    jobs = [
        TraceJob(str(index), (p.at - origin).total_seconds(), p.duration, p.gpus, p.node.path,
                 p.user.username, float(p.min_runtime), p.resumable)
        for index, p in enumerate(past)
    ]
    spec = ClusterSpec([HostSpec(h.name, h.gpus, h.group) for h in hosts], source=cluster.name)
    config.params = engine_params(cluster)
    config.until = (now - origin).total_seconds()
    sim = _Recorder(jobs, shares, spec, config)
    return sim, sim.run()


_STATE = {"completed": Workload.State.COMPLETED, "preempted": Workload.State.PREEMPTED,
          "failed": Workload.State.FAILED, "running": Workload.State.RUNNING,
          "queued": Workload.State.PENDING, "pending": Workload.State.PENDING}


def write_simulated(cluster, past: list[Past], origin: datetime, now: datetime, *,
                    config: SimConfig, operator=None) -> dict[str, int]:
    """Replay ``past`` (submitted in ``[origin, now)``) on ``cluster`` and write it. The
    cluster is taken to exist since ``origin``. Returns the counts written."""
    hosts = list(Host.objects.filter(cluster=cluster).order_by("name"))
    host_ids = {h.name: h.pk for h in hosts}
    sim, result = _simulate(cluster, hosts, past, origin, now, config)

    def at(seconds: float) -> datetime:
        return min(now, origin + timedelta(seconds=seconds))

    # -- workloads ---------------------------------------------------------------------------
    records = {rec.job.job_id: rec for rec in result.jobs if rec.state != "refused"}
    runs_of: dict[str, list] = defaultdict(list)
    for rr in result.runs:
        runs_of[rr.job_id].append(rr)
    workloads = {}
    for job_id, rec in records.items():
        p = past[int(job_id)]
        state = _STATE[rec.state]
        runs = runs_of[job_id]
        if state == Workload.State.RUNNING and runs and runs[-1].signalled_at is not None:
            state = Workload.State.PREEMPTING
        finished = at(rec.end_time) if state not in Workload.ACTIVE_STATES else None
        workloads[job_id] = Workload(
            name=p.name, owner=p.user, budget=p.node, cluster=cluster, gpus=p.gpus,
            min_runtime=p.min_runtime, resumable=p.resumable, command=p.command,
            expected_duration=max(1, round(p.duration)), state=state, submitted=p.at,
            finished=finished, exit_code=0 if state == Workload.State.COMPLETED else None,
            queue_reason=rec.reason[:500] if state == Workload.State.PENDING else "",
        )
    bulk(Workload, workloads.values())
    if any(w.pk is None for w in workloads.values()):  # backends that return no ids
        by_key = {(w.name, w.submitted): w for w in Workload.objects.filter(cluster=cluster)}
        for w in workloads.values():
            w.pk = by_key[(w.name, w.submitted)].pk

    # -- runs, their GPUs, events ------------------------------------------------------------
    runs, slots, events = [], [], []
    for job_id, w in workloads.items():
        events.append(Event(workload=w, at=w.submitted, kind=Event.Kind.SUBMITTED,
                            reason=f"{quantity(w.gpus, 'GPU')}, charged to {w.budget.path}"
                            if w.min_runtime else f"{quantity(w.gpus, 'GPU')}, unallocated"))
        rec_runs = runs_of[job_id]
        for position, rr in enumerate(rec_runs):
            live = rr.end_reason == "still_running"
            ended = None if live else at(rr.end)
            run = Run(
                workload=w, number=rr.run, allocated=rr.allocated, gpus=rr.gpus,
                started=at(rr.start), protected_until=origin + timedelta(
                    seconds=rr.protected_until),
                signalled_at=at(rr.signalled_at) if rr.signalled_at is not None else None,
                ended=ended, end_reason="" if live else rr.end_reason,
                exit_code=0 if rr.end_reason == "completed" else None,
                backend_id=f"history-{cluster.name}-{job_id}-{rr.run}",
                accounted_until=now if live else ended,
            )
            runs.append(run)
            slots.append((run, rr.slots, live))
            where = "; ".join(f"{host} {gpu_ranges(idx)}" for host, idx in rr.slots)
            events.append(Event(workload=w, run=run, at=run.started, kind=Event.Kind.STARTED,
                                reason=f"placed on {where}"))
            if run.signalled_at is not None:
                events.append(Event(workload=w, run=run, at=run.signalled_at,
                                    kind=Event.Kind.SIGNALLED, reason=rr.preempt_reason[:500]))
            if live:
                continue
            again = position + 1 < len(rec_runs) or w.state == Workload.State.PENDING
            if rr.end_reason == "completed":
                kind, why = Event.Kind.COMPLETED, "completed"
            elif rr.end_reason == "host_failure":
                host = rr.hosts.split()[0] if rr.hosts else "its host"
                kind, why = ((Event.Kind.REQUEUED, f"host {host} failed: requeued, keeps its "
                              "place") if again else
                             (Event.Kind.FAILED, f"host {host} failed: not resumable, ends as "
                              "FAILED"))
            else:
                why = rr.preempt_reason or f"host {rr.hosts} drained"
                kind = Event.Kind.REQUEUED if again else Event.Kind.PREEMPTED
                if again:
                    why += "; keeps its place"
            events.append(Event(workload=w, run=run, at=ended, kind=kind, reason=why[:500]))
    bulk(Run, runs)
    if any(r.pk is None for r in runs):
        by_key = {(r.workload_id, r.number): r.pk
                  for r in Run.objects.filter(workload__cluster=cluster)}
        for r in runs:
            r.pk = by_key[(r.workload_id, r.number)]
    bulk(RunGPU, [RunGPU(run=run, host_id=host_ids[host], index=i, held=live)
                  for run, placement, live in slots for host, idx in placement for i in idx])
    bulk(Event, events)
    usage = bulk(UsageRollup, usage_rollups(cluster, runs))

    # -- occupancy samples and capacity --------------------------------------------------------
    series = sim.series  # chronological: (t, allocated GPUs, unallocated GPUs, healthy GPUs)
    total = sum(h.gpus for h in hosts)
    pending_changes: list[tuple[float, int, int]] = []  # (t, +-1 workload, +-gpus)
    for job_id, w in workloads.items():
        rec_runs = runs_of[job_id]
        waits_from = [(w.submitted - origin).total_seconds()]
        waits_from += [rr.end for rr in rec_runs[:-1]]
        waits_until = [rr.start for rr in rec_runs]
        if w.state == Workload.State.PENDING:
            if rec_runs:
                waits_from.append(rec_runs[-1].end)
            waits_until.append(float("inf"))
        for a, b in zip(waits_from, waits_until, strict=False):
            if b > a:
                pending_changes += [(a, 1, w.gpus), (b, -1, -w.gpus)]
    pending_changes.sort()
    samples, moment = [], origin
    i = j = 0
    alloc = unalloc = pend_w = pend_g = 0
    healthy = total
    while True:
        t = (moment - origin).total_seconds()
        while i < len(series) and series[i][0] <= t:
            _, alloc, unalloc, healthy = series[i]
            i += 1
        while j < len(pending_changes) and pending_changes[j][0] <= t:
            pend_w += pending_changes[j][1]
            pend_g += pending_changes[j][2]
            j += 1
        samples.append(OccupancySample(
            cluster=cluster, at=moment, total=total, available=healthy, allocated=alloc,
            unallocated=unalloc, pending_workloads=pend_w, pending_gpus=pend_g))
        if moment >= now:
            break
        moment = min(now, moment + SAMPLE_EVERY)
    bulk(OccupancySample, samples)
    capacity = bulk(CapacityRollup, capacity_rollups(cluster, samples, now))

    # -- hosts ---------------------------------------------------------------------------------
    host_events = []
    last: dict[str, tuple[datetime, str]] = {}
    failed_repairs: dict[str, int] = defaultdict(int)
    for t, name, before, after in sim.host_log:
        moment = at(t)
        host = host_ids[name]

        def add(kind, reason, human=False, by=None, _host=host, _at=moment):
            host_events.append(HostEvent(host_id=_host, at=_at, kind=kind, reason=reason,
                                         needed_human=human, by=by))

        if after == HostState.DRAINING:
            add(HostEvent.Kind.HEALTH_SIGNAL, "GPU error (XID 79: GPU fell off the bus)")
            last[name] = (moment, "health signal: GPU error (XID 79: GPU fell off the bus)")
        elif after == HostState.DRAINED:
            add(HostEvent.Kind.DRAINED, "drained: no workload left on the host")
            last[name] = (moment, "drained")
        elif after == HostState.DOWN:
            add(HostEvent.Kind.FAILED, "lost heartbeat: host stopped answering")
            add(HostEvent.Kind.REPAIR_STARTED, "automatic repair (simulated backend)")
            last[name] = (moment, "automatic repair and health check")
        elif after == HostState.REPAIRING and before == HostState.DRAINED:
            add(HostEvent.Kind.REPAIR_STARTED, "automatic repair (simulated backend)")
            last[name] = (moment, "automatic repair and health check")
        elif after == HostState.REPAIRING:
            failed_repairs[name] += 1
            n = failed_repairs[name]
            tries = f"{n} failed repair{'s' if n > 1 else ''}"
            add(HostEvent.Kind.REPAIR_FAILED, f"automatic repair failed the health check "
                f"({tries})")
            last[name] = (moment, f"retrying repair ({tries})")
        elif after == HostState.ESCALATED:
            failed_repairs[name] += 1
            why = f"{failed_repairs[name]} failed repairs in a row: needs a human"
            add(HostEvent.Kind.REPAIR_FAILED, f"automatic repair failed the health check "
                f"({failed_repairs[name]} failed repairs)")
            add(HostEvent.Kind.ESCALATED, why, human=True)
            last[name] = (moment, why)
        elif after == HostState.AVAILABLE and before == HostState.ESCALATED:
            failed_repairs[name] = 0
            add(HostEvent.Kind.REPAIR_SUCCEEDED, "replaced a GPU board by hand", human=True,
                by=operator)  # as fleet.services.repair writes it: the repair figure's count
            add(HostEvent.Kind.RETURNED, "replaced a GPU board by hand; back in service",
                by=operator)
            last[name] = (moment, "back in service")
        elif after == HostState.AVAILABLE:
            failed_repairs[name] = 0
            add(HostEvent.Kind.REPAIR_SUCCEEDED, "automatic repair: health check passed")
            add(HostEvent.Kind.RETURNED, "back in service")
            last[name] = (moment, "repaired: health check passed")
    bulk(HostEvent, host_events)
    changed = []
    for host in hosts:
        engine_host = sim.host_by_name[host.name]
        host.state = engine_host.state.name
        host.state_changed, host.state_reason = last.get(host.name, (origin, ""))
        host.failed_repairs = failed_repairs.get(host.name, 0)
        alive = host.state in ("AVAILABLE", "DRAINING", "DRAINED")
        host.last_heartbeat = now if alive else host.state_changed
        changed.append(host)
    Host.objects.bulk_update(changed, ["state", "state_changed", "state_reason",
                                       "failed_repairs", "last_heartbeat"])
    cluster.created = origin
    cluster.save(update_fields=["created"])
    return {"workloads": len(workloads), "runs": len(runs), "events": len(events),
            "usage rollups": len(usage), "samples": len(samples),
            "capacity rollups": len(capacity), "host events": len(host_events),
            "escalations": sum(e.kind == HostEvent.Kind.ESCALATED for e in host_events)}
