"""The live loop: one tick of one cluster. The engine decides, this module only translates.

A tick, in one transaction and under the cluster's lock (one tick per cluster at a time,
however many workers run):

1. poll the fleet: runs that finished, host heartbeats and health signals (a dead host loses
   its runs: resumable ones are requeued, the others FAILED; a sick one is drained);
2. the repair workflow (``fleet.health``): DRAINED/DOWN -> REPAIRING -> fleet.repair ->
   AVAILABLE, or after ``max_repairs`` failed attempts in a row ESCALATED to a human;
3. charge usage (allocated GPU-seconds per budget leaf per clock hour, exact:
   ``Run.accounted_until`` says how far each run is charged) and capacity (healthy GPU-seconds
   per hour) up to now;
4. load the state into engine objects, call ``scheduler.engine.schedule`` and apply its
   decisions in order (start, signal, stop and requeue, hold, drained). Passes repeat at the
   same instant while one could open room for the next (``Pass.opens_room``: requeued work
   joins the next pass, GPUs moved between branches, ENGINE_API.md);
   each pass gets the previous one's claims, and the last pass's claims replace the stored
   ones (``Claim`` rows), so the next tick's first pass gets them too;
5. write every pending workload's queue position and reason, a waiting event only when its
   wait changed materially (``engine.materially_changed``), and an occupancy sample.

Running it twice at the same ``now`` changes nothing the second time. The database is the
source of truth: the fleet is told (launch, signal, stop) after the commit, and reports back
by polling, so a tick that dies half-way leaves nothing behind.

Launches are two-phase (``fleet/backends/base.py``): the committed run is the intent, its
backend id is written as soon as the backend answers. A run that never reached the backend
(unreachable, refused, or its worker died before the launch) is taken back: the run is
withdrawn (never started: no usage, no failure) and its workload is PENDING again with its
submission time, so it keeps its place; a refused one ends FAILED with the refusal. Times are
the backend's: a run starts when the backend started it and ends when the backend says it
ended; what a tick charged beyond those is given back.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max, Q, Sum
from django.utils import timezone

from budgets.models import BudgetNode
from fleet.backends import BackendUnavailable, FleetBackend, LaunchRefused, backend_for
from fleet.health import ALIVE, HEALTHY, HostChanges, advance_repairs, lost_heartbeat
from fleet.locks import hold_launches, launches_in_flight, lock_cluster, release_launches
from fleet.models import CapacityRollup, Cluster, Host, HostEvent
from scheduler.engine import (
    PASSES_PER_INSTANT,
    ClusterState,
    HostDrained,
    HostState,
    Pass,
    Placement,
    Preempt,
    Start,
    Stop,
    Wait,
    materially_changed,
    schedule,
)
from scheduler.engine import Claim as EngineClaim
from scheduler.engine import Host as EngineHost
from scheduler.engine import Run as EngineRun
from scheduler.engine import Workload as EngineWorkload
from scheduler.engine.idle import IdlePolicy, idle_preemptions
from scheduler.engine.pending import PendingQueue
from scheduler.engine_views import budget_tree, earlier_work, engine_params, engine_workload
from scheduler.models import Claim, Event, OccupancySample, Run, RunGPU, UsageRollup, Workload
from scheduler.signals import announce_events

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)


# ---------------------------------------------------------------------------------------------
# Rollups


def floor_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def split_hours(start: datetime, end: datetime):
    """``[start, end)`` cut at clock hours: ``(hour, seconds)`` pieces."""
    while start < end:
        hour = floor_hour(start)
        stop = min(end, hour + HOUR)
        yield hour, (stop - start).total_seconds()
        start = stop


def _add_rollups(model, deltas: dict[tuple, float], key_fields: tuple[str, ...]) -> None:
    """Add ``deltas`` ({(cluster_id, [budget_id,] hour): gpu_seconds}) to the hourly rows."""
    deltas = {k: v for k, v in deltas.items() if v}
    if not deltas:
        return
    lookup = {f"{name}__in": {k[i] for k in deltas} for i, name in enumerate(key_fields)}
    existing = {
        tuple(getattr(row, name) for name in key_fields): row
        for row in model.objects.filter(**lookup)
    }
    changed, new = [], []
    for key, seconds in deltas.items():
        row = existing.get(key)
        if row is None:
            new.append(model(gpu_seconds=seconds, **dict(zip(key_fields, key, strict=True))))
        else:
            row.gpu_seconds += seconds
            changed.append(row)
    if changed:
        model.objects.bulk_update(changed, ["gpu_seconds"])
    if new:
        model.objects.bulk_create(new)


def charge_usage(runs, now: datetime) -> None:
    """Charge allocated GPU-seconds of ``runs`` (with their workload) into the hourly usage
    rollups, from ``accounted_until`` to their end (or ``now``), and advance
    ``accounted_until`` (in memory: the caller saves the runs). Unallocated runs are never
    charged. Call under the cluster lock."""
    deltas: dict[tuple, float] = defaultdict(float)
    for run in runs:
        end = run.ended or now
        if end <= run.accounted_until:
            continue
        if run.allocated:
            key = (run.workload.cluster_id, run.workload.budget_id)
            for hour, seconds in split_hours(run.accounted_until, end):
                deltas[(*key, hour)] += run.gpus * seconds
        run.accounted_until = end
    _add_rollups(UsageRollup, deltas, ("cluster_id", "budget_id", "hour"))


def refund_usage(spans) -> None:
    """Take back charged usage: ``spans`` of ``(run, start, end)`` a tick charged although the
    run did not hold its GPUs then (before the backend started it, after it ended, or a run
    that never started). Call under the cluster lock."""
    deltas: dict[tuple, float] = defaultdict(float)
    for run, start, end in spans:
        if run.allocated:
            key = (run.workload.cluster_id, run.workload.budget_id)
            for hour, seconds in split_hours(start, end):
                deltas[(*key, hour)] -= run.gpus * seconds
    _add_rollups(UsageRollup, deltas, ("cluster_id", "budget_id", "hour"))


def charge_capacity(cluster_id: int, gpus: int, start: datetime, end: datetime) -> None:
    deltas = {(cluster_id, hour): gpus * s for hour, s in split_hours(start, end)}
    _add_rollups(CapacityRollup, deltas, ("cluster_id", "hour"))


def window_usage(cluster: Cluster, now: datetime, paths: dict[int, str]) -> dict[str, float]:
    """Allocated GPU-seconds per leaf path over ``[now - window, now]``: whole hours from the
    rollups, the hour cut by the window's start exactly from the run records."""
    start = now - timedelta(seconds=cluster.window)
    edge = floor_hour(start) + HOUR
    usage: dict[str, float] = defaultdict(float)
    rows = (
        UsageRollup.objects.filter(cluster=cluster, hour__gte=edge, hour__lte=now)
        .values("budget_id")
        .annotate(total=Sum("gpu_seconds"))
    )
    for row in rows:
        usage[paths[row["budget_id"]]] += row["total"]
    runs = Run.objects.filter(
        workload__cluster=cluster, allocated=True, started__lt=edge, accounted_until__gt=start
    ).values_list("workload__budget_id", "started", "accounted_until", "gpus")
    for budget_id, started, until, gpus in runs:
        seconds = (min(until, edge) - max(started, start)).total_seconds()
        if seconds > 0:
            usage[paths[budget_id]] += gpus * seconds
    return dict(usage)


def window_capacity(cluster: Cluster, now: datetime) -> float:
    """Healthy GPU-seconds over the part of the window the cluster existed (the hour cut by
    the window's start pro rata)."""
    start = max(now - timedelta(seconds=cluster.window), cluster.created)
    first = floor_hour(start)
    rows = dict(
        CapacityRollup.objects.filter(cluster=cluster, hour__gte=first, hour__lte=now)
        .values_list("hour", "gpu_seconds")
    )
    total = sum(rows.values())
    cut = rows.get(first)
    if cut:
        covered_from = max(first, cluster.created)
        span = (first + HOUR - covered_from).total_seconds()
        before = (start - covered_from).total_seconds()
        if span > 0 and before > 0:
            total -= cut * before / span
    return max(0.0, total)


# Columns whose Python values psycopg sends as they are (the array's cast gives the type).
_PLAIN = {"IntegerField", "PositiveIntegerField", "PositiveSmallIntegerField",
          "SmallIntegerField", "BigIntegerField", "CharField", "TextField", "BooleanField",
          "FloatField", "DateTimeField"}


def bulk_set(model, objects, fields: list[str], batch_size: int = 10000) -> None:
    """Write ``fields`` of many rows. PostgreSQL: one ``UPDATE ... FROM unnest(arrays)`` per
    batch, one array parameter per column (Django's ``bulk_update`` builds a CASE per field
    and row, and a ``VALUES`` list one placeholder per value: for thousands of rows both cost
    more to build, send and parse than the update itself); elsewhere ``bulk_update``."""
    objects = list(objects)
    if not objects:
        return
    if connection.vendor != "postgresql":
        rows = [o if isinstance(o, model) else model(pk=o.pk, **{f: getattr(o, f) for f in fields})
                for o in objects]
        model.objects.bulk_update(rows, fields, batch_size=500)
        return
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    arrays = ", ".join(
        [f"%s::{meta.pk.db_type(connection).replace('serial', 'int')}[]"]
        + [f"%s::{c.cast_db_type(connection)}[]" for c in columns]
    )
    names = ", ".join(['"pk"'] + [f'"{c.column}"' for c in columns])
    assign = ", ".join(f'"{c.column}" = v."{c.column}"' for c in columns)
    sql = (f'UPDATE "{meta.db_table}" AS t SET {assign} FROM unnest({arrays}) AS v({names}) '
           f'WHERE t."{meta.pk.column}" = v."pk"')
    with connection.cursor() as cursor:
        for start in range(0, len(objects), batch_size):
            batch = objects[start:start + batch_size]
            params = [[obj.pk for obj in batch]] + [
                [getattr(obj, c.attname) for obj in batch] if c.get_internal_type() in _PLAIN
                else [c.get_db_prep_save(getattr(obj, c.attname), connection) for obj in batch]
                for c in columns
            ]
            cursor.execute(sql, params)


# ---------------------------------------------------------------------------------------------
# The tick


@dataclass
class TickReport:
    cluster_id: int
    now: datetime
    skipped: bool = False  # another tick of this cluster held the lock
    states: list[ClusterState] = field(default_factory=list)  # what each pass saw
    passes: list[Pass] = field(default_factory=list)
    finished: int = 0
    host_failures: int = 0
    error: str = ""  # the backend was unreachable: nothing was decided (Cluster.backend_error)

    @property
    def decisions(self) -> list:
        return [d for p in self.passes for d in p.decisions]


def tick(cluster_id: int, now: datetime | None = None) -> TickReport:
    """One tick of one cluster (see the module docstring). Returns what it did; ``skipped``
    when another tick of the same cluster is running (it will see the same work)."""
    work = None
    try:
        with transaction.atomic():
            if not lock_cluster(cluster_id, wait=False):
                return TickReport(cluster_id, now or timezone.now(), skipped=True)
            now = now or timezone.now()
            cluster = Cluster.objects.get(pk=cluster_id)
            work = _Tick(cluster, now, backend_for(cluster))
            return work.run()
    except BaseException as error:
        if work is not None and work.holding_launches:  # rolled back: nothing to launch
            release_launches(cluster_id)
        if not isinstance(error, BackendUnavailable):
            raise
        # The tick is rolled back (nothing decided on a stale view); the error is shown on the
        # cluster's page, and the other clusters' ticks go on as usual.
        message = str(error)[:1000]
        log.warning("cluster %s: %s", cluster_id, message)
        at = now or timezone.now()
        Cluster.objects.filter(pk=cluster_id).exclude(backend_error=message).update(
            backend_error=message, backend_error_at=at
        )
        return TickReport(cluster_id, at, error=message)


def _ts(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


class _Tick:
    def __init__(self, cluster: Cluster, now: datetime, fleet: FleetBackend):
        self.cluster = cluster
        self.now = now
        self.fleet = fleet
        self.report = TickReport(cluster.pk, now)
        self.events: list[Event] = []
        self.host_changes = HostChanges(now)
        self.dirty_runs: dict[int, Run] = {}
        self.new_runs: list[tuple[Run, Placement]] = []
        self.released: list[int] = []  # ids of runs whose GPUs are released
        self.signalled: set[int | None] = set()  # ids of runs signalled in this tick
        self.workloads: dict[int, Workload] = {}  # changed workloads
        self.moved: dict[int, Workload] = {}  # pending workloads whose place changed
        self.explained: dict[int, Workload] = {}  # pending workloads whose reason changed
        self.after_commit: list = []
        self.refunds: list[tuple[Run, datetime, datetime]] = []  # see refund_usage
        self.holding_launches = False  # see fleet.locks.hold_launches

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        c = self.cluster
        self.hosts = list(Host.objects.filter(cluster=c).order_by("name"))
        self.host_by_id = {h.pk: h for h in self.hosts}
        self.host_by_name = {h.name: h for h in self.hosts}
        self.paths = dict(BudgetNode.objects.values_list("id", "path"))
        self.live = {
            r.pk: r
            for r in Run.objects.filter(workload__cluster=c, ended=None).select_related("workload")
        }
        self.slots: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        self.runs_on_host: dict[int, set[int]] = defaultdict(set)
        self.on_retired_hosts: set[int] = set()  # runs holding GPUs of a retired host
        for run_id, host_id, index in RunGPU.objects.filter(
            host__cluster=c, held=True
        ).values_list("run_id", "host_id", "index"):
            if host_id not in self.host_by_id:
                self.on_retired_hosts.add(run_id)
                continue
            self.slots[run_id][self.host_by_id[host_id].name].append(index)
            self.runs_on_host[host_id].add(run_id)
        self.pending = {
            row[0]: _Pending(*row)
            for row in Workload.objects.filter(cluster=c, state=Workload.State.PENDING)
            .values_list(*_PENDING_FIELDS)
        }
        self.last_sample = OccupancySample.objects.filter(cluster=c).order_by("-at").first()
        self.stored_claims = stored_claims(c)
        self.claims = self.stored_claims

    # -- the tick ----------------------------------------------------------------------------

    def run(self) -> TickReport:
        # Before reading anything: launches finish (or die) concurrently with this tick, and
        # one that ends after Slurm was read would look like one that never happened. None
        # can start while this tick holds the cluster lock (they start from a tick's commit).
        self.launches_settled = not launches_in_flight(self.cluster.pk)
        self.load()
        since = self.last_sample.at if self.last_sample else self.cluster.created
        healthy_before = (
            self.last_sample.available if self.last_sample
            else sum(h.gpus for h in self.hosts if h.state in HEALTHY)
        )
        self.poll_runs()
        for run_id in sorted(self.on_retired_hosts):
            run = self.live.get(run_id)
            if run is not None and not run.ended:
                self._lose(run, self.now, Run.EndReason.HOST_FAILURE,
                           "its host was retired (the cluster's backend does not know it)")
        self.reconcile()
        self.poll_hosts(since)
        advance_repairs(self.hosts, self.fleet, self.host_changes, self.after_commit)
        charge_usage(self.live.values(), self.now)
        if self.now > since:
            charge_capacity(self.cluster.pk, healthy_before, since, self.now)
        for run in self.live.values():
            self.dirty_runs[run.pk] = run
        self.scheduling()
        self.save()
        self.record_sample()
        self.notify_fleet()
        return self.report

    # -- 1. the fleet's news -------------------------------------------------------------------

    def _workload(self, w: Workload) -> Workload:
        return self.workloads.setdefault(w.pk, w)

    def _event(self, workload, kind, reason, run=None, at=None) -> None:
        self.events.append(Event(
            workload_id=workload.pk, run=run, at=at or self.now, kind=kind, reason=reason[:500]
        ))

    def _end_run(self, run: Run, at: datetime, end_reason: str, exit_code=None) -> None:
        at = max(at, run.started)
        if at < run.accounted_until:  # a tick charged it past its real end: give that back
            self.refunds.append((run, at, run.accounted_until))
            run.accounted_until = at
        run.ended = at
        run.end_reason = end_reason
        run.exit_code = exit_code
        if run.pk is not None:  # a run started at this very instant is saved later
            self.released.append(run.pk)
            self.dirty_runs[run.pk] = run

    def poll_runs(self) -> None:
        for done in self.fleet.poll_runs(list(self.live.values()), self.now):
            run = self.live.get(done.run_id)
            if run is None or run.ended:
                continue
            at = min(done.at, self.now)
            ok = done.exit_code == 0
            run.backend_id = run.backend_id or done.backend_id
            self._end_run(
                run, at, Run.EndReason.COMPLETED if ok else Run.EndReason.FAILED, done.exit_code
            )
            w = self._workload(run.workload)
            w.state = Workload.State.COMPLETED if ok else Workload.State.FAILED
            w.finished = run.ended
            w.exit_code = done.exit_code
            self._event(w, Event.Kind.COMPLETED if ok else Event.Kind.FAILED,
                        done.message or ("completed" if ok else f"exit code {done.exit_code}"),
                        run=run, at=run.ended)
            self.report.finished += 1

    def poll_hosts(self, since: datetime) -> None:
        health = self.fleet.poll_hosts(self.hosts, since, self.now)
        seen = defaultdict(list)
        for name, at in health.heartbeats.items():
            host = self.host_by_name.get(name)
            if host is not None and host.last_heartbeat != at:
                host.last_heartbeat = at
                seen[at].append(host.pk)
        for at, ids in seen.items():
            Host.objects.filter(pk__in=ids).update(last_heartbeat=at)
        signals = list(health.signals)
        timeout = timedelta(seconds=float(self.fleet.config.get("heartbeat_timeout", 600)))
        signalled = {s.host for s in signals}
        for host in self.hosts:
            if (host.state in ALIVE and host.name not in signalled and host.last_heartbeat
                    and self.now - host.last_heartbeat > timeout):
                signals.append(lost_heartbeat(host, self.now))
        for signal in signals:
            host = self.host_by_name.get(signal.host)
            if host is None or host.state not in ALIVE:
                continue
            if signal.fatal:
                self.host_died(host, signal.reason, min(signal.at, self.now))
            elif host.state == Host.State.AVAILABLE:
                self.host_changes.set_state(
                    host, Host.State.DRAINING, f"health signal: {signal.reason}"
                )
                self.host_changes.record(host, HostEvent.Kind.HEALTH_SIGNAL, signal.reason)
                self.after_commit.append(lambda h=host, r=signal.reason: self.fleet.drain(h, r))

    def host_died(self, host: Host, reason: str, at: datetime) -> None:
        self.report.host_failures += 1
        for run_id in sorted(self.runs_on_host.get(host.pk, ())):
            run = self.live.get(run_id)
            if run is None or run.ended:
                continue
            self._lose(run, at, Run.EndReason.HOST_FAILURE, f"host {host.name} failed ({reason})")
        self.host_changes.set_state(host, Host.State.DOWN, f"failed: {reason}")
        self.host_changes.record(host, HostEvent.Kind.FAILED, reason)

    def _lose(self, run: Run, at: datetime, end_reason: str, why: str) -> None:
        """``run`` is gone out there: a resumable workload is requeued, the others FAILED."""
        self._end_run(run, at, end_reason)
        w = self._workload(run.workload)
        if w.resumable:
            w.state = Workload.State.PENDING
            self._event(w, Event.Kind.REQUEUED, f"{why}: requeued, keeps its place", run=run)
        else:
            w.state = Workload.State.FAILED
            w.finished = run.ended
            self._event(w, Event.Kind.FAILED, f"{why}: not resumable, ends as FAILED", run=run)

    def reconcile(self) -> None:
        """The backend's view against the database's (``FleetBackend.reconcile``): runs it
        lost end (requeued or FAILED), GPUs it assigned itself replace the planned ones, and
        what needs a human is recorded on the cluster (``backend_error``)."""
        runs = [r for r in self.live.values() if not r.ended]
        found = self.fleet.reconcile(runs, self.hosts, self.now)
        for run_id, backend_id in found.backend_ids.items():
            if run_id in self.live:
                self.live[run_id].backend_id = backend_id
                Run.objects.filter(pk=run_id).update(backend_id=backend_id)
        for run_id, at in found.started.items():
            run = self.live.get(run_id)
            if run is not None and not run.ended and at > run.started:
                self._started_at(run, min(at, self.now))
        if found.not_launched and self.launches_settled:
            # No launch of this cluster was in flight when the tick began: these never
            # reached the backend.
            for run_id, why in found.not_launched.items():
                run = self.live.get(run_id)
                if run is not None and not run.ended:
                    self._withdraw(run, why)
        if found.facts and found.facts != self.cluster.backend_facts:
            Cluster.objects.filter(pk=self.cluster.pk).update(backend_facts=found.facts)
        for lost in found.lost:
            run = self.live.get(lost.run_id)
            if run is not None and not run.ended:
                self._lose(run, min(lost.at, self.now), lost.end_reason, lost.reason)
        if found.placements:
            self._move_gpus(found.placements)
        for note in found.notes:
            log.warning("cluster %s: %s", self.cluster.name, note)
        problem = "; ".join(found.problems)[:1000]
        if problem != self.cluster.backend_error:
            Cluster.objects.filter(pk=self.cluster.pk).update(
                backend_error=problem, backend_error_at=self.now if problem else None
            )

    def _started_at(self, run: Run, at: datetime) -> None:
        """The backend started ``run`` at ``at``, after the tick that decided it (a preempting
        run waits for its victims to leave): its start, protection and charges move there."""
        if run.accounted_until > run.started:
            self.refunds.append((run, run.started, min(at, run.accounted_until)))
        run.protected_until += at - run.started
        run.started = at
        run.accounted_until = max(run.accounted_until, at)
        Run.objects.filter(pk=run.pk).update(started=run.started,
                                             protected_until=run.protected_until,
                                             accounted_until=run.accounted_until)

    def _withdraw(self, run: Run, why: str) -> None:
        """``run`` never reached the backend: it never started. It is taken back (deleted, its
        GPUs free, nothing charged) and its workload waits again in its place."""
        if run.accounted_until > run.started:
            self.refunds.append((run, run.started, run.accounted_until))
        del self.live[run.pk]
        self.dirty_runs.pop(run.pk, None)
        self.slots.pop(run.pk, None)
        for runs in self.runs_on_host.values():
            runs.discard(run.pk)
        w = self._workload(run.workload)
        w.state = Workload.State.PENDING
        w.queue_reason = f"waiting: run {run.number} {why}"[:500]
        self.pending[w.pk] = w
        self._event(w, Event.Kind.REQUEUED, f"run {run.number} {why}: back in the queue, keeps "
                    "its place, not charged")
        run.delete()

    def _move_gpus(self, placements: dict[int, dict[str, list[int]]]) -> None:
        """Rewrite the held GPUs of live runs to where the backend really put them (Slurm picks
        GPU indices itself), unless that would take a GPU another run holds."""
        moves = {}
        for run_id, where in placements.items():
            run = self.live.get(run_id)
            if run is None or run.ended or any(h not in self.host_by_name for h in where):
                continue
            now_held = {h: sorted(i) for h, i in self.slots.get(run_id, {}).items()}
            wanted = {h: sorted(i) for h, i in where.items()}
            if wanted != now_held and sum(map(len, wanted.values())) == run.gpus:
                moves[run_id] = wanted
        if not moves:
            return
        taken = {
            (self.host_by_name[h].pk, i)
            for run_id, slots in self.slots.items() if run_id not in moves
            and run_id not in self.released for h, indices in slots.items() for i in indices
        }
        wanted_pairs = [(self.host_by_name[h].pk, i)
                        for where in moves.values() for h, indices in where.items()
                        for i in indices]
        if taken & set(wanted_pairs) or len(set(wanted_pairs)) != len(wanted_pairs):
            log.warning("cluster %s: the backend's GPU assignment %s conflicts with held GPUs",
                        self.cluster.name, moves)
            return
        RunGPU.objects.filter(run_id__in=list(moves), held=True).delete()
        RunGPU.objects.bulk_create([
            RunGPU(run_id=run_id, host_id=self.host_by_name[h].pk, index=i)
            for run_id, where in moves.items() for h, indices in where.items() for i in indices
        ])
        for run_id, where in moves.items():
            for host_id in list(self.runs_on_host):
                self.runs_on_host[host_id].discard(run_id)
            for h in where:
                self.runs_on_host[self.host_by_name[h].pk].add(run_id)
            self.slots[run_id] = defaultdict(list, {h: list(i) for h, i in where.items()})
            log.info("cluster %s: run %s holds %s (as assigned by the backend)",
                     self.cluster.name, run_id, where)

    # -- 3. scheduling ---------------------------------------------------------------------

    def _engine_workload(self, w: Workload) -> EngineWorkload:
        """The engine's view of ``w``; a resumable workload's expected duration is the work it
        has left (what the simulator hands the engine, and what the fleet runs)."""
        ew = engine_workload(w, self.paths[w.budget_id])
        done = self.done.get(w.pk, 0.0)
        if done and ew.duration is not None and w.resumable:
            ew = replace(ew, duration=max(0.0, ew.duration - done))
        return ew

    def work_done(self) -> dict[int, float]:
        """Seconds of work resumable workloads did in their ended runs, those ended in this
        tick (not saved yet) included."""
        resumed = [r.workload_id for r in self.live.values()
                   if r.number > 1 and r.workload.resumable]
        waiting = Q(cluster=self.cluster, state=Workload.State.PENDING, resumable=True)
        done = earlier_work(Workload.objects.filter(waiting | Q(pk__in=resumed)).values("pk"))
        for run in self.live.values():
            if run.ended and run.workload.resumable:
                stop = min(run.signalled_at, run.ended) if run.signalled_at else run.ended
                done[run.workload_id] = done.get(run.workload_id, 0.0) + max(
                    0.0, (stop - run.started).total_seconds())
        return done

    def _engine_run(self, run: Run, placement: Placement) -> EngineRun:
        return EngineRun(
            workload=self._engine_workload(run.workload),
            started=run.started.timestamp(),
            placement=placement,
            protected_until=run.protected_until.timestamp(),
            signalled_at=_ts(run.signalled_at),
            number=run.number,
        )

    def build_state(self) -> ClusterState:
        now = self.now
        self.tree = budget_tree(self.cluster)
        self.params = engine_params(self.cluster)
        hosts = [EngineHost(h.name, h.gpus, h.group, HostState(h.state)) for h in self.hosts]
        self.engine_runs: dict[int, Run] = {}  # id(engine run) -> Run row
        for w in self.workloads.values():  # requeued by a host failure in this tick
            if w.state == Workload.State.PENDING and w.pk not in self.pending:
                self.pending[w.pk] = w
        self.done = self.work_done()
        running = []
        for run in self.live.values():
            if run.ended:
                continue
            slots = self.slots.get(run.pk, {})
            placement = Placement(tuple(sorted((h, tuple(sorted(i))) for h, i in slots.items())))
            er = self._engine_run(run, placement)
            self.engine_runs[id(er)] = run
            running.append(er)
        # kept ranked through the tick's passes: starts and requeues move single workloads
        pending = PendingQueue(self._engine_workload(w) for w in self.pending.values())
        return ClusterState(
            now=now.timestamp(),
            hosts=hosts,
            running=running,
            pending=pending,
            usage=window_usage(self.cluster, now, self.paths),
            capacity=window_capacity(self.cluster, now),
            claims=self.claims,
        )

    def scheduling(self) -> None:
        state = self.build_state()
        self.preempt_idle(state)
        # passes at one instant while one could open room for the next (``Pass.opens_room``),
        # as the simulator does: so a second tick at the same instant changes nothing
        for _ in range(PASSES_PER_INSTANT):
            self.report.states.append(_copy_state(state))
            result = schedule(state, self.tree, self.params)
            self.report.passes.append(result)
            self.apply(result, state)
            state.claims = result.claims
            if not result.opens_room:
                break
        self.claims = result.claims
        self.queue(result)

    def preempt_idle(self, state: ClusterState) -> None:
        """The cluster's idle policy (off by default): signal allocated runs flagged idle by
        the utilization collection once past their minimum runtime (scheduler.engine.idle)."""
        if not self.cluster.preempt_idle:
            return
        idle_since = {
            er: run.idle_since.timestamp()
            for er in state.running
            if (run := self.engine_runs[id(er)]).idle_flagged_at and run.idle_since
        }
        policy = IdlePolicy(float(self.cluster.idle_period), self.cluster.idle_threshold)
        idle = Pass(decisions=list(idle_preemptions(state, idle_since, policy)))
        if idle.decisions:
            self.report.passes.append(idle)
            self.apply(idle, state)

    def _number_new_runs(self) -> None:
        """Run numbers continue each workload's series (one query for all new runs)."""
        ids = {run.workload_id for run, _ in self.new_runs}
        last = dict(
            Run.objects.filter(workload_id__in=ids).values("workload_id")
            .annotate(n=Max("number")).values_list("workload_id", "n")
        )
        for run, _ in self.new_runs:
            last[run.workload_id] = run.number = last.get(run.workload_id, 0) + 1

    def apply(self, result: Pass, state: ClusterState) -> None:
        """Apply one pass's decisions in list order, to the rows and to ``state`` (for the next
        pass at the same instant). A ``Hold`` changes no row: its wait is in ``Pass.waits``,
        recorded after the last pass (``queue``)."""
        now = self.now
        hosts = {h.name: h for h in state.hosts}
        for d in result.decisions:
            if isinstance(d, Start):
                self._start(d, state)
            elif isinstance(d, Preempt):
                run = self.engine_runs[id(d.run)]
                run.signalled_at = now
                self.signalled.add(run.pk)
                d.run.signalled_at = now.timestamp()
                w = self._workload(run.workload)
                w.state = Workload.State.PREEMPTING
                self._event(w, Event.Kind.SIGNALLED, d.reason, run=run)
                self.after_commit.append(lambda r=run: self.fleet.signal(r))
            elif isinstance(d, Stop):
                run = self.engine_runs.pop(id(d.run))
                state.running.remove(d.run)
                self._end_run(run, now, d.end_reason)
                w = self._workload(run.workload)
                if d.requeue:
                    w.state = Workload.State.PENDING
                    w.queue_reason = "requeued: waiting for the next scheduling pass"
                    w.last_wait = None
                    self.pending[w.pk] = w
                    left = d.run.workload.duration
                    if left is not None and w.resumable:  # it did the work until the signal
                        left = max(0.0, left - ((d.run.signalled_at or now.timestamp())
                                                - d.run.started))
                    state.pending.add(replace(d.run.workload, duration=left))
                    self._event(w, Event.Kind.REQUEUED, d.reason + "; keeps its place", run=run)
                else:
                    w.state = Workload.State.PREEMPTED
                    w.finished = now
                    self._event(w, Event.Kind.PREEMPTED, d.reason, run=run)
                self.after_commit.append(lambda r=run: self.fleet.stop(r))
            elif isinstance(d, HostDrained):
                host = self.host_by_name[d.host.name]
                hosts[d.host.name].state = HostState.DRAINED
                self.host_changes.set_state(host, Host.State.DRAINED, d.reason)
                self.host_changes.record(host, HostEvent.Kind.DRAINED, d.reason)

    def _pending_row(self, engine_id: str) -> Workload:
        return self.pending[int(engine_id)]

    def _start(self, d: Start, state: ClusterState) -> None:
        now = self.now
        w = self._workload(self._pending_row(d.workload.id))
        del self.pending[w.pk]
        run = Run(
            workload_id=w.pk,
            number=0,  # numbered when saved
            allocated=w.min_runtime > 0,
            gpus=d.placement.gpus,
            started=now,
            protected_until=now + timedelta(seconds=w.min_runtime),
            accounted_until=now,
        )
        self.new_runs.append((run, d.placement))
        w.state = Workload.State.RUNNING
        w.queue_position = None
        w.queue_reason = ""
        w.last_wait = None
        self._event(w, Event.Kind.STARTED, d.reason, run=run)
        state.pending.remove(d.workload)
        er = EngineRun(d.workload, now.timestamp(), d.placement,
                       now.timestamp() + d.workload.min_runtime)
        state.running.append(er)
        self.engine_runs[id(er)] = run

    def queue(self, result: Pass) -> None:
        """Queue positions, and each waiting workload's reason: the banner (``queue_reason``)
        and the timeline change together, only when the wait changes materially (other
        hosts, another blocker, the expected start moving by more than 10%)."""
        now = self.now.timestamp()
        position = 0
        for engine_id in result.order:
            w = self.pending.get(int(engine_id))
            if w is None:
                continue
            position += 1
            if w.queue_position != position:
                w.queue_position = position
                self.moved[w.pk] = w
            wait = result.waits.get(engine_id)
            if wait is None:
                continue
            if materially_changed(stored_wait(w.last_wait, w.queue_reason), wait, now):
                w.queue_reason = wait.reason[:500]
                w.last_wait = {"blocker": wait.blocker, "hosts": list(wait.hosts),
                               "until": wait.until}
                kind = Event.Kind.HELD if wait.blocker == "held" else Event.Kind.WAITING
                self._event(w, kind, wait.reason)
                self.explained[w.pk] = w
        ranked = set(result.order)
        for w in self.pending.values():  # requeued by the last pass allowed at this instant
            if str(w.pk) not in ranked and w.queue_position is not None:
                w.queue_position = None
                self.moved[w.pk] = w

    # -- 4. writing ------------------------------------------------------------------------

    def save(self) -> None:
        self.host_changes.save()
        refund_usage(self.refunds)
        if self.released:
            RunGPU.objects.filter(run_id__in=self.released, held=True).update(held=False)
        # Most live runs only move their accounting mark to now: one UPDATE for all of them.
        changed = [r for r in self.dirty_runs.values() if r.ended or r.pk in self.signalled]
        charged = [r.pk for r in self.dirty_runs.values()
                   if not r.ended and r.pk not in self.signalled]
        if charged:
            Run.objects.filter(pk__in=charged).update(accounted_until=self.now)
        bulk_set(Run, changed, ["signalled_at", "ended", "end_reason", "exit_code",
                                "accounted_until", "backend_id"])
        if self.new_runs:
            self._number_new_runs()
            Run.objects.bulk_create([r for r, _ in self.new_runs])
            gpus = []
            ids = {h.name: h.pk for h in self.hosts}
            for run, placement in self.new_runs:
                if run.ended is None:
                    gpus.extend(
                        RunGPU(run=run, host_id=ids[host], index=i) for host, i in placement.pairs()
                    )
            RunGPU.objects.bulk_create(gpus, batch_size=1000)
        bulk_set(Workload, self.workloads.values(),
                 ["state", "finished", "exit_code", "queue_position", "queue_reason",
                  "last_wait"])
        # Pending work whose place or reason moved (every pending workload on a first tick,
        # a few on the next ones): only those rows, only those columns; a place alone (all
        # behind a start move up one) is a column of integers, cheap to send
        explained = [w for pk, w in self.explained.items() if pk not in self.workloads]
        bulk_set(Workload, explained, ["queue_position", "queue_reason", "last_wait"])
        bulk_set(Workload, [w for pk, w in self.moved.items()
                            if pk not in self.workloads and pk not in self.explained],
                 ["queue_position"])
        self.save_claims()
        if self.events:
            Event.objects.bulk_create(self.events, batch_size=1000)
            announce_events(self.events)

    def save_claims(self) -> None:
        """Replace the stored claims by exactly the last pass's (``Pass.claims``), unless they
        are the ones stored (most ticks: a claim lasts until its victims' grace is over)."""
        if self.claims == self.stored_claims:
            return
        Claim.objects.filter(workload__cluster=self.cluster).delete()
        Claim.objects.bulk_create([
            Claim(workload_id=int(c.workload_id), host_id=self.host_by_name[host].pk, gpus=n,
                  displaced=list(c.displaced), since=datetime.fromtimestamp(c.since, UTC))
            for c in self.claims for host, n in c.gpus
        ])

    def record_sample(self) -> None:
        if self.last_sample and self.last_sample.at >= self.now:
            return  # the same instant twice: nothing new to record
        allocated = unallocated = 0
        for run in self.live.values():
            if run.ended is None:
                if run.allocated:
                    allocated += run.gpus
                else:
                    unallocated += run.gpus
        for run, _ in self.new_runs:
            if run.ended is None:
                if run.allocated:
                    allocated += run.gpus
                else:
                    unallocated += run.gpus
        OccupancySample.objects.create(
            cluster=self.cluster,
            at=self.now,
            total=sum(h.gpus for h in self.hosts),
            available=sum(h.gpus for h in self.hosts if h.state in HEALTHY),
            allocated=allocated,
            unallocated=unallocated,
            pending_workloads=len(self.pending),
            pending_gpus=sum(w.gpus for w in self.pending.values()),
        )

    def notify_fleet(self) -> None:
        launches = [(run, placement) for run, placement in self.new_runs if run.ended is None]
        if launches:
            # From before the commit until every launch answered, so that no tick takes these
            # runs back as never launched while they are on their way (fleet.locks).
            hold_launches(self.cluster.pk)
            self.holding_launches = True

        def tell():
            try:
                if launches:
                    launch_runs(self.cluster.pk, self.fleet, launches)
            finally:
                if launches:
                    release_launches(self.cluster.pk)
                    self.holding_launches = False
            for action in self.after_commit:
                try:
                    action()
                except Exception:  # the next tick's poll reconciles
                    log.exception("fleet action failed on cluster %s", self.cluster.name)

        transaction.on_commit(tell)


@dataclass(slots=True)
class _Pending:
    """A pending workload as the tick needs it: a plain row, not a model instance (thousands
    of them each tick). ``bulk_set`` writes its fields back."""

    pk: int
    name: str
    budget_id: int
    gpus: int
    min_runtime: int
    resumable: bool
    submitted: datetime
    expected_duration: int | None
    state: str
    queue_position: int | None
    queue_reason: str
    last_wait: dict | None
    finished: datetime | None
    exit_code: int | None


_PENDING_FIELDS = [f.name for f in fields(_Pending)]


def stored_wait(last_wait: dict | None, reason: str) -> Wait | None:
    """The wait a workload's timeline last recorded, as the engine's ``Wait`` (its reason is
    the banner's, ``queue_reason``)."""
    if not last_wait:
        return None
    return Wait(reason, last_wait["blocker"], tuple(last_wait["hosts"]), last_wait["until"])


def stored_claims(cluster: Cluster) -> list[EngineClaim]:
    """The claims the last tick's last pass made (one ``Claim`` row per host), in its order."""
    claims: dict[int, EngineClaim] = {}
    rows = Claim.objects.filter(workload__cluster=cluster).select_related("host").order_by("pk")
    for row in rows:
        before = claims.get(row.workload_id)
        gpus = ((before.gpus if before else ()) + ((row.host.name, row.gpus),))
        claims[row.workload_id] = EngineClaim(str(row.workload_id), gpus,
                                              tuple(row.displaced), row.since.timestamp())
    return list(claims.values())


def launch_runs(cluster_id: int, fleet: FleetBackend, launches) -> None:
    """Launch committed runs in the engine's order, writing each backend id as soon as it is
    known (a worker that dies mid-burst leaves the ids of what it launched). A launch that
    never reached the backend is taken back: Slurm unreachable -> the run and the ones after
    it (not tried: they would wait for the same timeout) wait in the queue with that reason;
    refused -> the workload ends FAILED with the refusal; neither is charged."""
    unreachable = ""
    taken_back: list[tuple[Run, str, bool]] = []  # (run, why, refused)
    for run, placement in launches:
        if unreachable:
            taken_back.append((run, unreachable, False))
            continue
        try:
            backend_id = fleet.launch(run, placement)
        except BackendUnavailable as error:
            unreachable = f"could not be launched: {error}"
            taken_back.append((run, unreachable, False))
            continue
        except LaunchRefused as error:
            taken_back.append((run, f"was refused: {error}", True))
            continue
        except Exception:  # a bug: the run stays; reconcile looks its job up by name
            log.exception("launch of run %s failed on cluster %s", run.pk, cluster_id)
            continue
        if backend_id:
            run.backend_id = backend_id
            Run.objects.filter(pk=run.pk, backend_id="").update(backend_id=backend_id)
    if taken_back:
        take_back_launches(cluster_id, taken_back)


def take_back_launches(cluster_id: int, taken_back) -> None:
    """Runs whose launch never reached the backend (see ``launch_runs``), under the cluster's
    lock: deleted with their GPUs and charges, their workloads PENDING again (in their place)
    or, when refused, FAILED. A run something else already ended is left alone."""
    now = timezone.now()
    with transaction.atomic():
        lock_cluster(cluster_id)
        rows = {r.pk: r for r in Run.objects.select_related("workload").filter(
            pk__in=[run.pk for run, _, _ in taken_back], ended=None, backend_id="")}
        refunds, events = [], []
        for run, why, refused in taken_back:
            row = rows.get(run.pk)
            if row is None:
                continue
            if row.accounted_until > row.started:
                refunds.append((row, row.started, row.accounted_until))
            w = row.workload
            reason = f"run {row.number} {why}"[:500]
            if refused:
                w.state, w.finished = Workload.State.FAILED, now
                events.append(Event(workload=w, at=now, kind=Event.Kind.FAILED,
                                    reason=f"{reason}: ends FAILED, not charged"[:500]))
            else:
                w.state, w.queue_reason = Workload.State.PENDING, f"waiting: {reason}"[:500]
                events.append(Event(workload=w, at=now, kind=Event.Kind.REQUEUED,
                                    reason=f"{reason}: back in the queue, keeps its place, "
                                    "not charged"[:500]))
            w.save(update_fields=["state", "finished", "queue_reason"])
            log.warning("cluster %s: %s", cluster_id, reason)
        refund_usage(refunds)
        Run.objects.filter(pk__in=list(rows)).delete()
        Event.objects.bulk_create(events)


def _copy_state(state: ClusterState) -> ClusterState:
    return ClusterState(
        now=state.now,
        hosts=[EngineHost(h.name, h.gpus, h.group, h.state) for h in state.hosts],
        running=[
            EngineRun(r.workload, r.started, r.placement, r.protected_until, r.signalled_at,
                      r.number)
            for r in state.running
        ],
        pending=list(state.pending),
        usage=dict(state.usage),
        capacity=state.capacity,
        claims=list(state.claims),
    )


def window_capacity_estimate(cluster: Cluster, now: datetime) -> float:
    """Capacity as the next tick will see it at ``now``, before any sample exists: the healthy
    GPUs of today over the part of the window the cluster existed (tests and tools)."""
    start = max(now - timedelta(seconds=cluster.window), cluster.created)
    gpus = sum(h.gpus for h in cluster.hosts.all() if h.state in HEALTHY)
    return window_capacity(cluster, now) + gpus * max(0.0, (now - start).total_seconds())
