"""The discrete-event simulator: replays a trace against a cluster and a budget tree.

It drives the very same ``schedule()`` the live loop calls, with an in-memory clock, jumping
from one schedulable moment to the next (submission, completion, protection expiry, grace end,
host failure and repair). It applies the engine's decisions exactly as the live loop does:

* ``Start``       -> a new run, protected until ``now + min_runtime``;
* ``Preempt``     -> the run is signalled and keeps its GPUs for the grace period;
* ``Stop``        -> GPUs freed; resumable work back to pending (same workload, same
                     ``submitted``, new run and protection later), other work ends PREEMPTED;
* ``HostDrained`` -> the host goes DRAINED, then REPAIRING, then back to AVAILABLE;
* ``Hold``        -> nothing to apply (a reservation), kept as the workload's last reason.

Host failures (seeded Poisson per host): a soft failure (health signal) drains the host, a hard
one kills its runs (resumable ones requeued from their last checkpoint, the others FAILED).

Simulator-side model (not scheduling policy): a resumable workload checkpoints when signalled,
so a preemption loses only the grace period; on a host failure it loses the work since its last
periodic checkpoint (``--checkpoint-interval``). A non-resumable workload loses its whole run.

Run ``python -m scheduler.engine.simulate --help``.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import re
import sys
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .contract import ContractError, validate
from .fairshare import Standing, next_crossing
from .idle import IdlePolicy, goes_idle_after, idle_preemptions
from .model import (
    PASSES_PER_INSTANT,
    BudgetTree,
    Claim,
    ClusterState,
    Hold,
    Host,
    HostDrained,
    HostState,
    Params,
    Placement,
    Preempt,
    RestWaits,
    RestWaitsByGroup,
    Run,
    Start,
    Stop,
    TailWaits,
    Workload,
)
from .pending import PendingQueue
from .placement import Room, RunLog
from .policies import PARTITION_POLICIES, POLICIES, policy_of, submission_order
from .repairs import RepairFigure
from .report import write_report
from .scheduling import EngineMemo, next_event, schedule
from .spreadsheet import csv_writer
from .summary import format_summary
from .sweep import run_sweep
from .traces import (
    PHILLY_TRACE,
    ClusterSpec,
    ConversionRule,
    Trace,
    TraceError,
    TraceJob,
    is_debug,
    job_class,
    leaves_of,
    load_tree,
    parse_cluster,
    read_trace,
)

JOBS_COLUMNS = (
    "job_id", "budget", "user", "gpus", "min_runtime", "resumable", "submit_time",
    "first_start", "end_time", "state", "wait_s", "run_s", "preemptions", "allocated_gpu_s",
    "unallocated_gpu_s",
)
RUNS_COLUMNS = (
    "job_id", "run", "start", "end", "gpus", "hosts", "placement", "allocated",
    "protected_until", "end_reason",
)
HEALTHY = (HostState.AVAILABLE, HostState.DRAINING)

# event kinds, in processing order at equal times; _TICK (a pass at the live loop's cadence)
# and _SEGMENT (usage slopes change: plan the next tick again) carry the plan they belong to;
# _HOST carries the index of its ``SimConfig.host_events`` entry
_COMPLETE, _FAIL, _HOST, _REPAIR, _WAKE, _IDLE, _TICK, _SEGMENT = range(8)
CADENCES = ("crossings", "ticks")
_OFF_LINE = object()  # a wait that stands for no line (``Pass.behind``)
# what happens to a host at a given time (``SimConfig.host_events``): back in service, a drain
# (an operator or a health signal: its runs finish their minimum runtime), a failure (its runs
# are lost, resumable ones requeued)
HOST_BACK, HOST_DRAIN, HOST_FAIL = "back", "drain", "fail"
HOST_CHANGES = (HOST_BACK, HOST_DRAIN, HOST_FAIL)
# why GPUs sit idle while allocated work waits: on hosts held for a reservation, set aside for
# a claimant (its victims are leaving), enough in all for a waiting request but split over
# hosts (fragmented), or fewer than the smallest waiting request needs (nothing fits)
IDLE_CAUSES = ("reservation", "claimed", "fragmented", "nothing_fits")


# --------------------------------------------------------------------------------- the ledger


class Ledger:
    """Exact cumulative GPU-seconds per key as a piecewise-linear function of time.

    ``set_rate`` records a breakpoint when a key's rate (GPUs charged) changes; the hard-window
    usage at ``now`` is ``C(now) - C(now - window)``, with a moving pointer per key (queries come
    in time order), so a pass costs O(keys). With a half-life the decayed integral is kept
    incrementally. ``cum(key, t)`` answers any past time by bisection (for the reports).
    """

    def __init__(self, window: float, half_life: float | None = None):
        self.window = window
        self.k = math.log(2.0) / half_life if half_life else 0.0
        self.bt: dict[str, list[float]] = {}  # breakpoint times
        self.bc: dict[str, list[float]] = {}  # cumulative at breakpoints
        self.br: dict[str, list[float]] = {}  # rate after breakpoints
        self.lo: dict[str, int] = {}  # pointer for window queries
        self.dv: dict[str, float] = {}  # decayed value at dt
        self.dt: dict[str, float] = {}
        self.changes = 0  # rates set so far: usage slopes stay as they were while it stays

    def rate(self, key: str) -> float:
        r = self.br.get(key)
        return r[-1] if r else 0.0

    def set_rate(self, key: str, now: float, delta: float) -> None:
        self.changes += 1
        bt = self.bt.get(key)
        if bt is None:
            self.bt[key], self.bc[key], self.br[key] = [now], [0.0], [delta]
            self.lo[key] = 0
            self.dv[key], self.dt[key] = 0.0, now
            return
        bc, br = self.bc[key], self.br[key]
        rate = br[-1]
        c = bc[-1] + rate * (now - bt[-1])
        if self.k:
            self.dv[key] = self._decayed(key, now)
            self.dt[key] = now
        if bt[-1] == now:
            bc[-1], br[-1] = c, rate + delta
        else:
            bt.append(now)
            bc.append(c)
            br.append(rate + delta)

    def _decayed(self, key: str, now: float) -> float:
        dtime = now - self.dt[key]
        rate = self.br[key][-1]
        if dtime <= 0:
            return self.dv[key]
        e = math.exp(-self.k * dtime)
        return self.dv[key] * e + rate * (1.0 - e) / self.k

    def cum(self, key: str, t: float) -> float:
        bt = self.bt.get(key)
        if not bt:
            return 0.0
        i = bisect_right(bt, t) - 1
        if i < 0:
            return 0.0
        return self.bc[key][i] + self.br[key][i] * (t - bt[i])

    def slope(self, key: str, now: float) -> tuple[float, float]:
        """How fast ``window_value(key, now)`` changes (GPUs charged now minus GPUs charged at
        the window's trailing edge) and for how many seconds that holds without new charges.
        Call after ``window_value(key, now)`` (it moves the trailing-edge pointer). With a
        half-life the decay makes it a tangent: good for ``half_life / 64``."""
        bt = self.bt.get(key)
        if not bt:
            return 0.0, math.inf
        head = self.br[key][-1]
        if self.k:
            return head - self.k * self._decayed(key, now), math.log(2.0) / self.k / 64
        x = now - self.window
        if x < bt[0]:
            return head, bt[0] - x
        i = self.lo[key]
        later = bt[i + 1] - x if i + 1 < len(bt) else math.inf
        return head - self.br[key][i], later

    def window_value(self, key: str, now: float) -> float:
        """Usage in ``[now - window, now]`` (or decayed), ``now`` non-decreasing across calls."""
        bt = self.bt.get(key)
        if not bt:
            return 0.0
        if self.k:
            return self._decayed(key, now)
        bc, br = self.bc[key], self.br[key]
        c_now = bc[-1] + br[-1] * (now - bt[-1])
        x = now - self.window
        if x <= bt[0]:
            return c_now
        i = self.lo[key]
        n = len(bt)
        while i + 1 < n and bt[i + 1] <= x:
            i += 1
        self.lo[key] = i
        return c_now - (bc[i] + br[i] * (x - bt[i]))


# ------------------------------------------------------------------------------------ records


@dataclass(slots=True)
class JobRecord:
    job: TraceJob
    workload: Workload
    state: str = "pending"  # pending/running -> completed, preempted, failed, refused
    first_start: float | None = None
    end_time: float | None = None
    wait_s: float = 0.0
    queued_since: float | None = None
    run_s: float = 0.0
    preemptions: int = 0
    requeues: int = 0
    allocated_gpu_s: float = 0.0
    unallocated_gpu_s: float = 0.0
    remaining: float = 0.0  # work left (seconds)
    runs: int = 0
    reason: str = ""


@dataclass(slots=True)
class RunRecord:
    job_id: str
    run: int
    start: float
    end: float | None
    gpus: int
    hosts: str
    allocated: bool
    protected_until: float
    end_reason: str = ""
    signalled_at: float | None = None
    preempt_reason: str = ""
    for_workload_id: str | None = None
    lost_gpu_s: float = 0.0
    slots: tuple = ()  # the placement's ((host, (gpu index, ...)), ...): not in runs.csv


@dataclass(slots=True)
class PreemptionRecord:
    """One Preempt decision with the standing the engine saw (for checks and reports)."""

    time: float
    job_id: str
    run: int
    budget: str
    allocated: bool
    protected_until: float
    for_workload_id: str | None
    for_budget: str | None
    victim_ratio: float | None  # ratio of the victim's branch where it diverges from requester
    requester_ratio: float | None
    drain: bool
    reason: str
    usage: dict | None = None  # leaf usage the pass saw (shared by the pass's records)
    capacity: float = 0.0


@dataclass
class SimConfig:
    params: Params = field(default_factory=Params)
    seed: int = 0
    failure_rate: float = 0.0  # per host per day
    repair_time: float = 4 * 3600.0
    soft_fraction: float = 0.5  # failures announced by a health signal: drained, not killed
    repair_fail: float = 0.1  # chance one automated repair attempt fails
    repair_attempts: int = 3  # failed attempts before a human is called (ESCALATED)
    escalation_time: float = 86400.0
    checkpoint_interval: float = 3600.0
    until: float | None = None  # stop the clock here (runs still running / queued at the end)
    # When passes run besides events. "ticks": every params.pass_interval while allocated work
    # waits, as the live loop does. "crossings": only at the first tick after a ranking or an
    # over-entitlement verdict changes as the window slides (fairshare.next_crossing) while some
    # allocated run could be a victim; the same decisions, far fewer passes.
    cadence: str = "crossings"
    # squatting (engine.idle): the seeded share of workloads whose GPUs go idle partway through
    # each run, and the cluster idle policy that preempts them (None: off, as by default)
    idle_share: float = 0.0
    idle_policy: IdlePolicy | None = None

    # Host events at given times, as the fleet and the operators bring them to the live loop,
    # or as they really happened (a what-if replay): ``(time, host name, HOST_FAIL |
    # HOST_DRAIN | HOST_BACK)``.
    host_events: tuple[tuple[float, str, str], ...] = ()
    # Whether hosts that fail or drain are repaired as simulated (``repair_time``, failed
    # attempts, escalation). Off for a replay of what really happened: a host that left
    # service comes back only by its HOST_BACK event.
    repairs: bool = True


# ------------------------------------------------------------------------------ initial state


@dataclass(frozen=True, slots=True)
class RunningAtStart:
    """A run already on the cluster when the replay starts (times <= 0 are before the start).
    ``job.duration`` is its work from ``started`` on, so it completes at ``started +
    job.duration`` unless preempted; ``number`` is the workload's run number."""

    job: TraceJob
    started: float
    slots: tuple[tuple[str, tuple[int, ...]], ...]
    protected_until: float
    signalled_at: float | None = None
    number: int = 1


@dataclass
class InitialState:
    """The cluster as it was at time 0: a warm start instead of an empty cluster.

    * ``running``: runs on the cluster, with their protection and signals (held GPUs);
    * ``queued``: workloads waiting at time 0 (``submit_time`` <= 0 keeps their queue order);
    * ``charged``: allocated GPU-time before time 0 as ``(leaf, gpus, start, end)`` segments
      (``end`` <= 0), runs at start excluded (their charge runs from ``started``): the usage
      window the first pass sees;
    * ``capacity``: healthy GPUs before time 0 as ``(start, end, gpus)`` segments;
    * ``hosts``: host name -> its state at time 0, for hosts not available (what happened to
      them afterwards is ``SimConfig.host_events``).
    """

    running: list[RunningAtStart] = field(default_factory=list)
    queued: list[TraceJob] = field(default_factory=list)
    charged: list[tuple[str, int, float, float]] = field(default_factory=list)
    capacity: list[tuple[float, float, float]] = field(default_factory=list)
    hosts: dict[str, HostState] = field(default_factory=dict)


# --------------------------------------------------------------------------------- simulator


class Simulator:
    def __init__(
        self,
        jobs: list[TraceJob],
        shares: dict[str, float],
        cluster: ClusterSpec,
        config: SimConfig | None = None,
        initial: InitialState | None = None,
    ):
        self.config = config or SimConfig()
        self.initial = initial or InitialState()
        self.params = self.config.params
        self.tree = BudgetTree.from_shares(shares)
        self.shares = shares
        self.cluster = cluster
        self.hosts = [Host(h.name, h.gpus, h.group) for h in cluster.hosts]
        self.host_by_name = {h.name: h for h in self.hosts}
        self.host_index = {h.name: i for i, h in enumerate(self.hosts)}
        # the engine's picture of hosts and runs, carried from one pass to the next (it reads
        # no pass's order: the jobs' reasons are its record)
        self.memo = EngineMemo(reads_order=False)
        # under ``partitions`` a workload's contract is checked against its group's hosts
        self.partitioning = (self.memo.partitions(self.hosts)
                             if policy_of(self.params.policy).partitioned else None)
        # every run started, ended or signalled, told to the memo's floor plan (partitions keep
        # a floor plan each, which compares runs instead)
        self.memo.log = RunLog() if self.partitioning is None else None
        # a strict policy's line: the fewest GPUs the first workload in line (of any partition)
        # needs; None when unknown (the queue changed since the last pass) or not strict
        self.line_needs: int | None = None
        # one line in submission order (``fifo``): its head's place in that order; work that
        # joins behind it cannot start before it, so it leaves ``line_needs`` as it is
        policy = policy_of(self.params.policy)
        self.one_line = policy.line and not policy.partitioned
        self.preempts = policy.preempts
        self.line_head: tuple | None = None
        self.claims: list[Claim] = []  # the last pass's claims, handed to the next pass
        self.plan = 0  # the current tick plan: _TICK and _SEGMENT events of older plans are void
        # (ledger changes, until when) of the current plan, made from the ledger's slopes: while
        # no rate changes, before its first event and the slopes' horizon, a plan finds the same
        self.plan_made: tuple[int, float] | None = None
        self.trace_jobs = sorted(jobs, key=lambda j: j.submit_time)
        self.jobs: dict[str, JobRecord] = {}
        self.run_records: list[RunRecord] = []
        self.preemptions: list[PreemptionRecord] = []
        self.running: dict[str, Run] = {}  # workload id -> run
        self.run_rec: dict[str, RunRecord] = {}  # workload id -> record of its current run
        self.pending = PendingQueue()  # kept ranked from one pass to the next
        # waiting behind the head of a strict line (``Pass.behind``), with their line (one per
        # partition): their reason is the line's, as of the last pass, given to each when it
        # leaves the line
        self.in_line: dict[str, str | None] = {}
        self.line_reason: dict[str | None, str] = {}
        # fair share and FIFO with backfill (``Pass.rest``): the last pass's waits of the
        # workloads it left out of its ``waits``, given to each when it leaves the queue;
        # ``explained``: those it gave a wait of their own; ``joined``: work joined since
        self.rest: RestWaits | RestWaitsByGroup | TailWaits | None = None
        self.explained: set[str] = set()
        self.joined: set[str] = set()
        self.pending_gpus: Counter[int] = Counter()
        self.pending_allocated = 0
        self.used: dict[str, set[int]] = {h.name: set() for h in self.hosts}
        self.room = Room(self.hosts, self.used)  # the free GPUs of AVAILABLE hosts
        self.healthy_gpus = self.room.total
        self.events: list[tuple] = []
        self.seq = 0
        self.now = 0.0
        self.ledger = Ledger(self.params.window, self.params.half_life)
        self.leaves: list[str] = []
        self.alloc_busy = 0
        self.unalloc_busy = 0
        self.series: list[tuple[float, int, int, int]] = []
        self.passes = 0
        self.skipped = 0
        self.holds = 0
        self.grace_heap: list[tuple[float, str, int]] = []
        self.prot_heap: list[tuple[float, str, int]] = []
        self.unalloc_unsignalled = 0
        self.draining: set[str] = set()
        self.drained: list[tuple[float, str]] = []  # (time, host) of the engine's HostDrained
        self.repairs = 0  # repairs that brought a host back (``RepairFigure``)
        self.human_repairs = 0
        self.escalations = 0
        self.failures = Counter()
        self.refused = 0
        self.clamped = 0
        self.wall = 0.0
        self.rng = np.random.default_rng(self.config.seed)
        self.attempts: dict[str, int] = {}
        self.last_ended: RunRecord | None = None
        self.notes: list[str] = []
        self.trace_description = ""
        self.idle_since: dict[str, float] = {}  # workload id -> when its current run goes idle
        self.idle_gpu_s = 0.0  # GPU-seconds held idle
        self.idle_returned_gpu_s = 0.0  # GPU-seconds the idle policy took back from squatters
        self.idle_preempted = 0
        # idle GPU-seconds of healthy hosts while allocated work waits, by cause (IDLE_CAUSES);
        # the last pass's held hosts say which idle GPUs a reservation keeps
        self.idle_waiting_gpu_s = dict.fromkeys(IDLE_CAUSES, 0.0)
        self.held_hosts: tuple[str, ...] = ()
        # the engine's last pass left the cluster settled and nothing but submissions came
        # since: a workload joining then is asked about before a pass is made for it
        # (``EngineMemo.joining_wait``); ``crossing_at``: when the Fair Tree order or a verdict
        # of over-use changes next, as the last tick plan found (``_plan_ticks``)
        self.settled = False
        self.crossing_at = math.inf
        self.joined_quietly = 0  # instants whose submissions needed no pass

    # ---------------------------------------------------------------- events
    def _push(self, t: float, kind: int, key: str = "", num: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, key, num))

    def _next_failure(self, host: str, now: float) -> None:
        rate = self.config.failure_rate
        if rate > 0:
            self._push(now + float(self.rng.exponential(86400.0 / rate)), _FAIL, host)

    # ---------------------------------------------------------------- bookkeeping
    def _enqueue(self, w: Workload, now: float) -> None:
        self.pending.add(w)
        self.joined.add(w.id)
        if self.line_head is None or submission_order(w) < self.line_head:
            self.line_needs = None
        self.pending_gpus[w.gpus] += 1
        if w.min_runtime > 0:
            self.pending_allocated += 1
        self.jobs[w.id].queued_since = now

    def _dequeue(self, w: Workload, now: float) -> None:
        self.pending.remove(w)
        self.pending_gpus[w.gpus] -= 1
        if not self.pending_gpus[w.gpus]:
            del self.pending_gpus[w.gpus]
        if w.min_runtime > 0:
            self.pending_allocated -= 1
        rec = self.jobs[w.id]
        rec.wait_s += now - rec.queued_since
        rec.queued_since = None

    def _submit(self, tj: TraceJob, now: float) -> None:
        min_rt = tj.min_runtime
        if min_rt > self.params.max_min_runtime:
            min_rt = self.params.max_min_runtime
            self.clamped += 1
        w = Workload(tj.job_id, tj.budget, tj.gpus, min_rt, tj.resumable, tj.submit_time,
                     tj.user, tj.duration)
        rec = JobRecord(tj, w, remaining=tj.duration)
        self.jobs[w.id] = rec
        try:
            hosts = self.hosts if self.partitioning is None else self.partitioning.hosts_for(
                w.budget)
            validate(w, hosts, self.tree, self.params)  # the contract, as on submit
        except ContractError as exc:
            rec.state = "refused"
            rec.end_time = now
            rec.reason = str(exc)
            self.refused += 1
            return
        self._enqueue(w, now)

    def _start(self, d: Start, now: float) -> None:
        w = d.workload
        rec = self.jobs[w.id]
        if w.id not in self.pending:
            raise SimulationError(f"engine started {w.id} which is not pending")
        if w.id in self.in_line:
            rec.reason = self.line_reason[self.in_line.pop(w.id)]
        for host, idx in d.placement.slots:
            h = self.host_by_name.get(host)
            if h is None or h.state != HostState.AVAILABLE:
                raise SimulationError(f"engine placed {w.id} on unavailable host {host}")
            used = self.used[host]
            for i in idx:
                if i in used or i < 0 or i >= h.gpus:
                    raise SimulationError(f"engine assigned {host} GPU {i} twice ({w.id})")
                used.add(i)
            self.room.change(host, -len(idx))
        if d.placement.gpus != w.gpus:
            raise SimulationError(f"engine gave {w.id} {d.placement.gpus} GPUs, asked {w.gpus}")
        self._dequeue(w, now)
        rec.runs += 1
        run = Run(w, now, d.placement, now + w.min_runtime, None, rec.runs)
        self.running[w.id] = run
        self._note(run, True)
        rr = RunRecord(w.id, rec.runs, now, None, w.gpus, " ".join(d.placement.hosts),
                       w.min_runtime > 0, run.protected_until, slots=d.placement.slots)
        self.run_records.append(rr)
        self.run_rec[w.id] = rr
        if rec.first_start is None:
            rec.first_start = now
        rec.state = "running"
        if w.min_runtime > 0:
            self.alloc_busy += w.gpus
            self.ledger.set_rate(w.budget, now, w.gpus)
            heapq.heappush(self.prot_heap, (run.protected_until, w.id, rec.runs))
        else:
            self.unalloc_busy += w.gpus
            self.unalloc_unsignalled += 1
        self._push(now + rec.remaining, _COMPLETE, w.id, rec.runs)
        after = goes_idle_after(self.config.seed, w.id, self.config.idle_share)
        if after is not None:
            self.idle_since[w.id] = now + after
            policy = self.config.idle_policy
            if policy is not None and w.min_runtime > 0:
                due = max(now + after + policy.period, run.protected_until)
                self._push(due, _IDLE, w.id, rec.runs)

    def _note(self, run: Run, running: bool) -> None:
        if self.memo.log is not None:
            self.memo.log.note(run, running)

    def _end_run(self, wid: str, now: float, end_reason: str) -> tuple[Run, JobRecord]:
        """Free a run's GPUs and close its record (kept as ``self.last_ended``)."""
        run = self.running.pop(wid)
        self._note(run, False)
        rec = self.jobs[wid]
        rr = self.last_ended = self.run_rec.pop(wid)
        rr.end = now
        rr.end_reason = end_reason
        w = run.workload
        span = now - run.started
        rec.run_s += span
        idle_since = self.idle_since.pop(wid, None)
        if idle_since is not None:
            self.idle_gpu_s += w.gpus * max(0.0, now - idle_since)
        for host, idx in run.placement.slots:
            used = self.used[host]
            used.difference_update(idx)
            self.room.change(host, len(idx))
        if w.min_runtime > 0:
            self.alloc_busy -= w.gpus
            self.ledger.set_rate(w.budget, now, -w.gpus)
            rec.allocated_gpu_s += span * w.gpus
        else:
            self.unalloc_busy -= w.gpus
            rec.unallocated_gpu_s += span * w.gpus
            if run.signalled_at is None:
                self.unalloc_unsignalled -= 1
        return run, rec

    def _requeue(self, run: Run, rec: JobRecord, now: float, progress: float) -> None:
        rec.remaining = max(0.0, rec.remaining - progress)
        rec.requeues += 1
        w = replace(run.workload, duration=rec.remaining)  # same id, same `submitted`
        rec.workload = w
        rec.state = "pending"
        self._enqueue(w, now)

    def _complete(self, wid: str, num: int, now: float) -> bool:
        run = self.running.get(wid)
        if run is None or run.number != num:
            return False  # stale: that run was stopped earlier
        _, rec = self._end_run(wid, now, "completed")
        rec.state = "completed"
        rec.end_time = now
        rec.remaining = 0.0
        return True

    def _idle(self, wid: str, num: int, now: float) -> bool:
        """The idle policy's moment for a squatting run: preempt it if it still runs."""
        run = self.running.get(wid)
        if run is None or run.number != num or wid not in self.idle_since:
            return False
        state = self._state(now)
        decisions = idle_preemptions(state, {run: self.idle_since[wid]}, self.config.idle_policy)
        for d in decisions:
            ends = run.started + self.jobs[wid].remaining
            self.idle_returned_gpu_s += run.gpus * max(0.0, ends - (now + self.params.grace))
            self.idle_preempted += 1
            self._preempt(d, now, None, state)
        return bool(decisions)

    def _preempt(self, d: Preempt, now: float, standing, state: ClusterState) -> None:
        run = d.run
        wid = run.workload.id
        if self.running.get(wid) is not run:
            raise SimulationError(f"engine preempted {wid} which is not running")
        if run.signalled_at is not None:
            raise SimulationError(f"engine preempted {wid} twice")
        run.signalled_at = now
        self._note(run, True)
        if run.workload.min_runtime <= 0:
            self.unalloc_unsignalled -= 1
        rr = self.run_rec[wid]
        rr.signalled_at = now
        rr.preempt_reason = d.reason
        rr.for_workload_id = d.for_workload_id
        grace = self.params.grace_for(run.workload)
        heapq.heappush(self.grace_heap, (now + grace, wid, run.number))
        self._push(now + grace, _WAKE)
        drain = any(self.host_by_name[h].state != HostState.AVAILABLE
                    for h in run.placement.hosts)
        req = self.jobs.get(d.for_workload_id) if d.for_workload_id else None
        # only fair share's state carries the window (``_state``): one dict for the pass's records
        fair = self.params.policy == "fairshare"
        window = (state.usage, state.capacity) if fair else self._window(now)
        vr = rq = None
        if req is not None and standing is not None:
            a, b = standing.diverge(run.workload.budget, req.workload.budget)
            vr, rq = standing.ratio(a), standing.ratio(b)
        self.preemptions.append(PreemptionRecord(
            now, wid, run.number, run.workload.budget, run.workload.min_runtime > 0,
            run.protected_until, d.for_workload_id, req.workload.budget if req else None,
            vr, rq, drain and req is None, d.reason, *window))

    def _stop(self, d: Stop, now: float) -> None:
        run = d.run
        wid = run.workload.id
        if self.running.get(wid) is not run:
            raise SimulationError(f"engine stopped {wid} which is not running")
        end_reason = d.end_reason if d.end_reason in ("preempted", "drained") else "preempted"
        run, rec = self._end_run(wid, now, end_reason)
        record = self.last_ended
        rec.preemptions += 1
        signalled = run.signalled_at if run.signalled_at is not None else now
        w = run.workload
        if d.requeue and w.resumable:
            record.lost_gpu_s = (now - signalled) * w.gpus
            self._requeue(run, rec, now, signalled - run.started)
        else:
            record.lost_gpu_s = (now - run.started) * w.gpus
            rec.state = "preempted"
            rec.end_time = now
            if d.requeue:
                rec.reason = "engine asked to requeue a non-resumable workload: ended PREEMPTED"

    def _host_state(self, host: Host, state: HostState) -> None:
        was_avail = host.state == HostState.AVAILABLE
        was_healthy = host.state in HEALTHY
        host.state = state
        now_avail = state == HostState.AVAILABLE
        now_healthy = state in HEALTHY
        if was_avail and not now_avail:
            self.room.close(host.name)
        elif now_avail and not was_avail:
            self.room.open(host.name, host.gpus, host.gpus - len(self.used[host.name]))
        if was_healthy != now_healthy:
            delta = host.gpus if now_healthy else -host.gpus
            self.healthy_gpus += delta
            self.ledger.set_rate("\0capacity", self.now, delta)
        if state == HostState.DRAINING:
            self.draining.add(host.name)
        else:
            self.draining.discard(host.name)

    def _fail(self, name: str, now: float) -> None:
        host = self.host_by_name[name]
        if host.state != HostState.AVAILABLE:
            return  # already draining or out: the next failure is drawn after its repair
        if self.rng.random() < self.config.soft_fraction:
            self.failures["soft"] += 1
            self._host_state(host, HostState.DRAINING)  # the engine drains it
            return
        self._lose_host(name, now)

    def _lose_host(self, name: str, now: float) -> None:
        """A hard failure of a host in service: its runs are lost, it goes to repair."""
        self.failures["hard"] += 1
        self._crash(name, now)
        self._to_repair(name, now)

    def _to_repair(self, name: str, now: float) -> None:
        if self.config.repairs:
            self._push(now + self.config.repair_time, _REPAIR, name)

    def _crash(self, name: str, now: float) -> None:
        """A hard failure: the host's runs are lost (resumable ones requeued from their last
        checkpoint, the others FAILED) and the host goes DOWN."""
        host = self.host_by_name[name]
        victims = [wid for wid, run in self.running.items() if name in run.placement.hosts]
        for wid in sorted(victims):
            run, rec = self._end_run(wid, now, "host_failure")
            record = self.last_ended
            w = run.workload
            if w.resumable:
                ck = self.config.checkpoint_interval
                done = now - run.started
                kept = math.floor(done / ck) * ck if ck > 0 else done
                record.lost_gpu_s = (done - kept) * w.gpus
                self._requeue(run, rec, now, kept)
            else:
                record.lost_gpu_s = (now - run.started) * w.gpus
                rec.state = "failed"
                rec.end_time = now
        self._host_state(host, HostState.DOWN)

    def _host_event(self, number: int, now: float) -> bool:
        """Apply ``SimConfig.host_events[number]``; whether it changed the host."""
        _, name, change = self.config.host_events[number]
        host = self.host_by_name[name]
        if change == HOST_BACK and host.state != HostState.AVAILABLE:
            self._host_state(host, HostState.AVAILABLE)
        elif change == HOST_DRAIN and host.state == HostState.AVAILABLE:
            self._host_state(host, HostState.DRAINING)  # the engine drains it
        elif change == HOST_FAIL and host.state in HEALTHY:
            self._lose_host(name, now)
        else:
            return False
        return True

    def _repair_done(self, name: str, now: float) -> None:
        host = self.host_by_name[name]
        if host.state == HostState.ESCALATED:  # the human's repair
            self.repairs += 1
            self.human_repairs += 1
            self._host_state(host, HostState.AVAILABLE)
            self._next_failure(name, now)
            return
        n = self.attempts.get(name, 0)
        if self.rng.random() < self.config.repair_fail:
            n += 1
            if n >= self.config.repair_attempts:
                self.attempts[name] = 0
                self.escalations += 1
                self._host_state(host, HostState.ESCALATED)
                self._push(now + self.config.escalation_time, _REPAIR, name)
            else:
                self.attempts[name] = n
                self._host_state(host, HostState.REPAIRING)
                self._push(now + self.config.repair_time, _REPAIR, name)
            return
        self.attempts[name] = 0
        self.repairs += 1
        self._host_state(host, HostState.AVAILABLE)
        self._next_failure(name, now)

    # ---------------------------------------------------------------- passes
    def _state(self, now: float, usage: bool = True) -> ClusterState:
        """The cluster as a pass sees it. The usage window only matters to fair share (and to
        ``next_event``, which reads hosts and runs, not at all): without it, it is empty."""
        usage = usage and self.params.policy == "fairshare"
        window, capacity = self._window(now) if usage else ({}, 0.0)
        return ClusterState(now, self.hosts, list(self.running.values()),
                            self.pending, window, capacity, self.claims,
                            memo=self.memo)

    def _window(self, now: float) -> tuple[dict[str, float], float]:
        """Each leaf's usage over the window, and the window's capacity, at ``now``."""
        ledger = self.ledger
        return ({leaf: ledger.window_value(leaf, now) for leaf in self.leaves},
                ledger.window_value("\0capacity", now))

    def _grace_due(self, now: float) -> bool:
        gh = self.grace_heap
        while gh:
            t, wid, num = gh[0]
            run = self.running.get(wid)
            if run is None or run.number != num:
                heapq.heappop(gh)
                continue
            return t <= now
        return False

    def _preemptible_allocated(self, now: float) -> bool:
        ph = self.prot_heap
        while ph:
            t, wid, num = ph[0]
            run = self.running.get(wid)
            if run is None or run.number != num or run.signalled_at is not None:
                heapq.heappop(ph)
                continue
            return t <= now
        return False

    def _wake_at_protection_end(self, now: float) -> None:
        """A skipped pass still owes waiting allocated work the moment the first protected run
        becomes a possible victim (what ``next_event`` gives a pass that ran)."""
        waits = self.pending_allocated and self.params.policy == "fairshare"
        if waits and not self._preemptible_allocated(now) and self.prot_heap:
            self._push(self.prot_heap[0][0], _WAKE)

    def _needs_pass(self, now: float) -> bool:
        if self.draining or self._grace_due(now):
            return True
        if not self.pending:
            return False
        if self.line_needs is not None:  # a strict line moves only when its head fits
            if self.room.total < self.line_needs:
                return False
            return self.line_head is None or self.room.may_fit(self.line_needs)
        if self.room.total >= min(self.pending_gpus):
            return True
        if self.params.policy != "fairshare" or not self.pending_allocated:
            return False
        return self.unalloc_unsignalled > 0 or self._preemptible_allocated(now)

    def _pass(self, now: float) -> None:
        # passes at one instant while one could open room for the next, as the live loop runs
        # them; if the last one still could, the live loop's next tick is the next pass
        for _ in range(PASSES_PER_INSTANT):
            state = self._state(now)
            result = schedule(state, self.tree, self.params)
            self.claims = result.claims
            self.held_hosts = tuple(h for d in result.decisions if isinstance(d, Hold)
                                    for h in d.hosts)
            self.passes += 1
            if self.rest is not None:  # the last pass's waits of what starts now
                self._resolve(d.workload for d in result.decisions if isinstance(d, Start))
            self.joined.clear()
            # before the decisions: work they requeue is new to the line
            self.line_needs = min((w.gpus for w in result.heads), default=None)
            self.line_head = (submission_order(result.heads[0])
                              if self.one_line and len(result.heads) == 1 else None)
            standing = None
            for d in result.decisions:
                if isinstance(d, Start):
                    self._start(d, now)
                elif isinstance(d, Preempt):
                    if standing is None and d.for_workload_id is not None:
                        standing = Standing(self.tree, state.usage, state.capacity)
                    self._preempt(d, now, standing, state)
                elif isinstance(d, Stop):
                    self._stop(d, now)  # the same pass already reused its GPUs
                elif isinstance(d, HostDrained):
                    host = self.host_by_name[d.host.name]
                    self.drained.append((now, host.name))
                    self._host_state(host, HostState.DRAINED)
                    self._host_state(host, HostState.REPAIRING)
                    self._to_repair(host.name, now)
                elif isinstance(d, Hold):
                    self.holds += 1
            self.rest = result.rest
            self.explained = set(result.waits) if result.rest is not None else set()
            lines = {}  # the line each wait stands for, by the wait's identity
            for line, wait in result.behind.items():
                self.line_reason[line] = wait.reason
                lines[id(wait)] = line
            in_line = self.in_line
            for wid, wait in result.waits.items():
                rec = self.jobs.get(wid)
                if rec is None:
                    continue
                line = lines.get(id(wait), _OFF_LINE)
                if line is not _OFF_LINE:
                    in_line[wid] = line
                else:
                    in_line.pop(wid, None)
                    rec.reason = wait.reason
            if not result.opens_room:
                self.settled = True
                break
        else:
            self._push(self._tick_after(now), _WAKE)
        # runs only wake a pass when signalled, on a draining host, or protected from a policy
        # that preempts (``next_event``): otherwise there is nothing to look for
        if self.draining or self.pending and (self.grace_heap or self.preempts):
            nxt = next_event(self._state(now, usage=False), self.params)
            if nxt is not None and nxt > now:
                self._push(nxt, _WAKE)

    def _join_quietly(self, submitted: list[TraceJob]) -> bool:
        """Whether a pass would decide nothing for work just submitted to a settled cluster
        (``EngineMemo.joining_wait`` for each): then each keeps the wait it was told."""
        waits = []
        for tj in submitted:
            rec = self.jobs[tj.job_id]
            if rec.state != "pending":
                continue  # refused at submission
            wait = self.memo.joining_wait(rec.workload)
            if wait is None:
                return False
            waits.append((rec, wait.reason))
        for rec, reason in waits:
            rec.reason = reason
        return True

    def _resolve(self, workloads: Iterable[Workload]) -> None:
        """Give each waiting workload the last pass left out of its ``waits`` the wait that pass
        had for it (``Pass.rest``)."""
        rest, explained, joined = self.rest, self.explained, self.joined
        for w in workloads:
            if w.id not in explained and w.id not in joined:
                self.jobs[w.id].reason = rest.of(w).reason

    def _count_idle(self, seconds: float) -> None:
        """Charge ``seconds`` of the idle GPUs of available hosts to their cause, while
        allocated work waits (the state does not change between events)."""
        idle = self.room.total
        if seconds <= 0 or idle <= 0 or not self.pending_allocated:
            return
        by_cause = self.idle_waiting_gpu_s
        room = self.room.free  # free GPUs of each AVAILABLE host
        free = {h: room[h] for h in self.held_hosts if h in room}
        held = sum(free.values())
        claimed = 0
        for claim in self.claims:
            for host, n in claim.gpus:
                if host not in free and host in room:
                    claimed += min(n, room[host])
        rest = max(0, idle - held - claimed)
        by_cause["reservation"] += held * seconds
        by_cause["claimed"] += min(claimed, idle - held) * seconds
        cause = "fragmented" if rest >= min(self.pending_gpus) else "nothing_fits"
        by_cause[cause] += rest * seconds

    def _tick_after(self, t: float) -> float:
        """The live loop's first tick strictly after ``t`` (ticks at multiples of the cadence)."""
        interval = self.params.pass_interval
        return (math.floor(t / interval + 1e-9) + 1) * interval

    def _plan_ticks(self, now: float) -> None:
        """Plan the next pass that only time brings (the live loop ticks while allocated work
        waits; the window slides and ratios cross thresholds). A new plan voids the old one."""
        waits = self.params.policy == "fairshare" and self.pending_allocated
        made, ledger = self.plan_made, self.ledger
        if waits and made is not None and made[0] == ledger.changes and now < made[1]:
            return  # the lines and slopes it was planned on: the same crossing
        self.plan += 1
        self.plan_made = None
        self.crossing_at = math.inf  # no allocated work waits that a crossing would move
        if not waits:
            return
        if self.config.cadence == "ticks":
            self.crossing_at = now  # a pass at every tick and every submission, as the loop
            self._push(self._tick_after(now), _TICK, num=self.plan)
            return
        horizon = math.inf
        usage, slope = {}, {}
        for leaf in self.leaves:
            usage[leaf] = ledger.window_value(leaf, now)
            slope[leaf], lasts = ledger.slope(leaf, now)
            horizon = min(horizon, lasts)
        capacity = ledger.window_value("\0capacity", now)
        capacity_slope, lasts = ledger.slope("\0capacity", now)
        horizon = min(horizon, lasts)
        threshold = 1.0 + self.params.hysteresis
        dt = next_crossing(self.tree, usage, slope, capacity, capacity_slope, threshold, horizon)
        # a crossing after the horizon is unknown until the next plan
        self.crossing_at = now + (horizon if dt is None else dt)
        first = math.inf
        if dt is not None:
            # the first tick at or after the crossing (a hair before it: the ledger's floats
            # may put it just past the tick that already sees it); a tick too early decides
            # nothing new and plans again
            crossing_tick = self._tick_after(now + dt - 1e-6 * self.params.pass_interval)
            first = max(crossing_tick, self._tick_after(now))
            self._push(first, _TICK, num=self.plan)
        elif horizon < math.inf:
            # a slope change a rounding error away (the window's edge is ``now - window``)
            # would land on ``now`` itself and be planned again there for ever: the next
            # representable instant has passed it
            first = max(now + horizon, math.nextafter(now, math.inf))
            self._push(first, _SEGMENT, num=self.plan)
        self.plan_made = (ledger.changes, min(first, now + horizon))

    # ---------------------------------------------------------------- warm start
    def _warm_start(self) -> None:
        """Put the cluster in ``self.initial``'s state at time 0: the usage and capacity
        windows charged before it, host states, runs with their protection and signals (as
        ``_start`` and ``_preempt`` leave them), and the queue."""
        initial = self.initial
        changes: list[tuple[float, str, float]] = []
        for leaf, gpus, start, end in initial.charged:
            changes += [(start, leaf, gpus), (end, leaf, -gpus)]
        for r in initial.running:
            if r.job.min_runtime > 0:
                changes.append((r.started, r.job.budget, r.job.gpus))
        for start, end, gpus in initial.capacity:
            changes += [(start, "\0capacity", gpus), (end, "\0capacity", -gpus)]
        for t, key, delta in sorted(changes, key=lambda c: c[0]):
            self.ledger.set_rate(key, t, delta)
        self.ledger.set_rate("\0capacity", 0.0,
                             self.healthy_gpus - self.ledger.rate("\0capacity"))
        for name, state in sorted(initial.hosts.items()):
            self._host_state(self.host_by_name[name], state)
        for number, (t, name, change) in enumerate(self.config.host_events):
            if name not in self.host_by_name or change not in HOST_CHANGES:
                raise SimulationError(f"host event {change!r} on {name!r}: no such host or kind")
            self._push(max(0.0, t), _HOST, name, number)
        for r in sorted(initial.running, key=lambda r: (r.started, r.job.job_id)):
            self._resume(r)
        for tj in sorted(initial.queued, key=lambda j: (j.submit_time, j.job_id)):
            self._submit(tj, 0.0)
        if self.pending or self.draining:
            self._push(0.0, _WAKE)  # the first pass sees the queue as it was
        if self.running:
            self.series.append((0.0, self.alloc_busy, self.unalloc_busy, self.healthy_gpus))

    def _resume(self, r: RunningAtStart) -> None:
        tj = r.job
        min_rt = min(tj.min_runtime, self.params.max_min_runtime)
        w = Workload(tj.job_id, tj.budget, tj.gpus, min_rt, tj.resumable, tj.submit_time,
                     tj.user, tj.duration)
        rec = JobRecord(tj, w, state="running", first_start=r.started, remaining=tj.duration,
                        runs=r.number)
        self.jobs[w.id] = rec
        placement = Placement(r.slots)
        for host, idx in r.slots:
            self.used[host].update(idx)
            self.room.change(host, -len(idx))
        run = Run(w, r.started, placement, r.protected_until, r.signalled_at, r.number)
        self.running[w.id] = run
        self._note(run, True)
        rr = RunRecord(w.id, r.number, r.started, None, w.gpus, " ".join(placement.hosts),
                       w.allocated, r.protected_until, signalled_at=r.signalled_at,
                       slots=r.slots)
        self.run_records.append(rr)
        self.run_rec[w.id] = rr
        if w.allocated:
            self.alloc_busy += w.gpus  # charged from ``started`` in ``_warm_start``
            heapq.heappush(self.prot_heap, (r.protected_until, w.id, r.number))
        else:
            self.unalloc_busy += w.gpus
            if r.signalled_at is None:
                self.unalloc_unsignalled += 1
        if r.signalled_at is not None:
            due = r.signalled_at + self.params.grace_for(w)
            heapq.heappush(self.grace_heap, (due, w.id, r.number))
            self._push(max(0.0, due), _WAKE)
        self._push(max(0.0, r.started + tj.duration), _COMPLETE, w.id, r.number)

    # ---------------------------------------------------------------- main loop
    def run(self, progress: Callable[[float], None] | None = None,
            progress_step: float = 0.01) -> SimResult:
        """Replay the trace. ``progress``, when given, is told how far the replay has gone, a
        fraction from 0 to 1: the simulated clock over ``config.until`` when there is one, else
        the share of the trace submitted. It is called when that fraction has grown by at least
        ``progress_step`` since the last call (so at most ``1 / progress_step`` times, plus a
        last call with 1.0 at the end), never twice with the same value."""
        t0 = time.perf_counter()
        until = self.config.until
        told = 0.0
        jobs = self.trace_jobs
        leaves = set(leaves_of(self.shares))
        leaves.update(j.budget for j in jobs if j.min_runtime > 0)
        leaves.update(leaf for leaf, *_ in self.initial.charged)
        leaves.update(r.job.budget for r in self.initial.running if r.job.min_runtime > 0)
        leaves.update(j.budget for j in self.initial.queued if j.min_runtime > 0)
        self.leaves = sorted(leaves)
        self._warm_start()
        for h in self.hosts:
            self._next_failure(h.name, 0.0)
        i, n = 0, len(jobs)
        events = self.events
        series = self.series
        now = 0.0
        while True:
            t_sub = jobs[i].submit_time if i < n else math.inf
            t_ev = events[0][0] if events else math.inf
            t = min(t_sub, t_ev)
            if t == math.inf:
                break
            if i >= n and not self.running and not self.draining and (
                not self.pending or self.room.total == self.cluster.total_gpus
            ):
                break  # idle, or what is left can never fit: only host failures would follow
            if until is not None and t > until:
                break
            self._count_idle(t - now)
            now = self.now = t
            changed = False
            while events and events[0][0] <= t:
                _, kind, _, key, num = heapq.heappop(events)
                if kind == _COMPLETE:
                    changed |= self._complete(key, num, t)
                elif kind == _FAIL:
                    self._fail(key, t)
                    changed = True
                elif kind == _HOST:
                    changed |= self._host_event(num, t)
                elif kind == _REPAIR:
                    self._repair_done(key, t)
                    changed = True
                elif kind == _IDLE:
                    changed |= self._idle(key, num, t)
                elif kind == _WAKE or (kind == _TICK and num == self.plan):
                    changed = True
                elif kind == _SEGMENT and num == self.plan:
                    self._plan_ticks(t)
            # only submissions since a settled pass, and the ranking it walked still holds
            quiet = self.settled and not changed and t < self.crossing_at
            first = i
            while i < n and jobs[i].submit_time <= t:
                self._submit(jobs[i], t)
                i += 1
                changed = True
            if changed and quiet and self._join_quietly(jobs[first:i]):
                self.skipped += 1
                self.joined_quietly += 1
            elif changed:
                self.settled = False
                if self._needs_pass(t):
                    self._pass(t)
                else:
                    self.skipped += 1
                    self._wake_at_protection_end(t)
                self._plan_ticks(t)
            series.append((t, self.alloc_busy, self.unalloc_busy, self.healthy_gpus))
            if progress is not None:
                done = min(1.0, t / until) if until else (i / n if n else 0.0)
                if done >= told + progress_step and done < 1.0:
                    told = done
                    progress(done)
        end = now if until is None else max(now, until if (self.running or self.pending or i < n)
                                              else now)
        for j in jobs[i:]:
            if until is None or j.submit_time <= end:
                self._submit(j, j.submit_time)
        self.now = end
        self.wall = time.perf_counter() - t0
        if progress is not None:
            progress(1.0)
        return SimResult.build(self, end)


class SimulationError(RuntimeError):
    """The engine returned a decision the driver cannot apply (a bug, never bad input)."""


# ------------------------------------------------------------------------------------ results


def _pct(values, qs=(50, 95, 99)) -> dict[str, float | None]:
    if len(values) == 0:
        return {f"p{q}": None for q in qs} | {"n": 0}
    arr = np.asarray(values, dtype=float)
    out: dict = {f"p{q}": float(np.percentile(arr, q)) for q in qs}
    out["mean"] = float(arr.mean())
    out["n"] = int(arr.size)
    return out


@dataclass
class SimResult:
    jobs: list[JobRecord]
    runs: list[RunRecord]
    preemptions: list[PreemptionRecord]
    summary: dict
    end: float

    @classmethod
    def build(cls, sim: Simulator, end: float) -> SimResult:
        # close open runs and queues at the end (records only: the engine is done)
        for wid, run in sim.running.items():
            rr = sim.run_rec[wid]
            rr.end = end
            rr.end_reason = "still_running"
            rec = sim.jobs[wid]
            span = end - run.started
            rec.run_s += span
            if run.workload.min_runtime > 0:
                rec.allocated_gpu_s += span * run.workload.gpus
            else:
                rec.unallocated_gpu_s += span * run.workload.gpus
            rec.state = "running"
        for wid, line in sim.in_line.items():
            sim.jobs[wid].reason = sim.line_reason[line]
        if sim.rest is not None:
            sim._resolve(sim.pending)
        for w in sim.pending:
            rec = sim.jobs[w.id]
            rec.wait_s += max(0.0, end - rec.queued_since)
            rec.state = "queued"
        jobs = sorted(sim.jobs.values(), key=lambda r: (r.job.submit_time, r.job.job_id))
        res = cls(jobs, sim.run_records, sim.preemptions, {}, end)
        res.summary = summarize(sim, res, end)
        return res

    # ------------------------------------------------------------ files
    def write_csvs(self, out: Path) -> None:
        with open(out / "jobs.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv_writer(fh)
            w.writerow(JOBS_COLUMNS)
            for r in self.jobs:
                j = r.job
                w.writerow((
                    j.job_id, j.budget, j.user, j.gpus, _f(r.workload.min_runtime),
                    int(j.resumable), _f(j.submit_time), _f(r.first_start), _f(r.end_time),
                    r.state, _f(r.wait_s), _f(r.run_s), r.preemptions,
                    _f(r.allocated_gpu_s), _f(r.unallocated_gpu_s),
                ))
        with open(out / "runs.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv_writer(fh)
            w.writerow(RUNS_COLUMNS)
            for r in self.runs:
                w.writerow((r.job_id, r.run, _f(r.start), _f(r.end), r.gpus, r.hosts,
                            placement_text(r.slots), int(r.allocated), _f(r.protected_until),
                            r.end_reason))

    def write(self, out: Path | str, html: bool = True) -> dict[str, Path]:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.write_csvs(out)
        paths = {"jobs": out / "jobs.csv", "runs": out / "runs.csv",
                 "summary": out / "summary.json"}
        with open(paths["summary"], "w", encoding="utf-8") as fh:
            json.dump(self.summary, fh, indent=1, default=_json_default)
        if html:
            paths["report"] = out / "report.html"
            write_report(self.summary, paths["report"])
        return paths


def placement_text(slots: tuple) -> str:
    """runs.csv's ``placement``: the GPUs each host holds for the run, ``h0314:8 h0315:4``."""
    return " ".join(f"{host}:{len(idx)}" for host, idx in slots)


def _json_default(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o))


def _f(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:.3f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def summarize(sim: Simulator, res: SimResult, end: float) -> dict:
    p = sim.params
    jobs = res.jobs
    waits: dict[str, list[float]] = {"all": [], "debug": [], "allocated": [], "unallocated": []}
    by_budget: dict[str, list[float]] = {}
    states = Counter(r.state for r in jobs)
    for r in jobs:
        if r.first_start is None:
            continue
        w = r.wait_s
        waits["all"].append(w)
        waits[job_class(r.workload.gpus, r.workload.min_runtime)].append(w)
        by_budget.setdefault(r.job.budget, []).append(w)
    never = sum(1 for r in jobs if r.first_start is None and r.state == "queued")
    # occupancy from the step series
    ser = np.asarray(sim.series, dtype=float) if sim.series else np.zeros((0, 4))
    occ = {"allocated_gpu_s": 0.0, "unallocated_gpu_s": 0.0, "healthy_gpu_s": 0.0}
    timeline = {"t": [], "allocated": [], "unallocated": [], "idle": [], "down": []}
    total = sim.cluster.total_gpus
    if len(ser) >= 1:
        t = np.append(ser[:, 0], end)
        dt = np.diff(t)
        occ["allocated_gpu_s"] = float((ser[:, 1] * dt).sum())
        occ["unallocated_gpu_s"] = float((ser[:, 2] * dt).sum())
        occ["healthy_gpu_s"] = float((ser[:, 3] * dt).sum())
        nb = 400
        span = max(end - ser[0, 0], 1e-9)
        edges = np.linspace(ser[0, 0], ser[0, 0] + span, nb + 1)
        # integrate the step functions per bucket
        cum_t = np.concatenate([[0.0], np.cumsum(dt)])
        for col, name in ((1, "allocated"), (2, "unallocated"), (3, "healthy")):
            cum = np.concatenate([[0.0], np.cumsum(ser[:, col] * dt)])
            vals = np.interp(edges, t, cum)
            avg = np.diff(vals) / np.diff(edges)
            timeline[name] = avg
        del cum_t
        healthy = timeline.pop("healthy")
        timeline["idle"] = np.maximum(0.0, healthy - timeline["allocated"]
                                      - timeline["unallocated"])
        timeline["down"] = np.maximum(0.0, total - healthy)
        timeline["t"] = edges[:-1]
        timeline = {k: [round(float(x), 3) for x in v] for k, v in timeline.items()}
    hs = occ["healthy_gpu_s"] or 1.0
    occupancy = {
        "allocated": occ["allocated_gpu_s"] / hs,
        "unallocated": occ["unallocated_gpu_s"] / hs,
        "idle": max(0.0, 1 - (occ["allocated_gpu_s"] + occ["unallocated_gpu_s"]) / hs),
        "availability": occ["healthy_gpu_s"] / (total * (end - (ser[0, 0] if len(ser) else 0))
                                                 or 1.0),
    } | occ
    # delivered vs entitlement per window, per node (leaves and their ancestors)
    W = p.window
    nwin = max(1, math.ceil(end / W)) if end > 0 else 1
    bounds = [min(k * W, end) for k in range(nwin + 1)]
    cap = [sim.ledger.cum("\0capacity", b) for b in bounds]
    nodes = sim.tree.nodes
    leaf_cum = {leaf: [sim.ledger.cum(leaf, b) for b in bounds] for leaf in sim.leaves}
    budgets = {}
    for node in nodes:
        frac = sim.tree.fraction(node)
        cums = [0.0] * len(bounds)
        for leaf, lc in leaf_cum.items():
            if leaf == node or leaf.startswith(node + "/"):
                cums = [a + b for a, b in zip(cums, lc, strict=True)]
        delivered = [cums[k + 1] - cums[k] for k in range(nwin)]
        ent = [frac * (cap[k + 1] - cap[k]) for k in range(nwin)]
        ratios = [d / e if e > 0 else None for d, e in zip(delivered, ent, strict=True)]
        full = [r for k, r in enumerate(ratios) if r is not None and k >= 1
                and bounds[k + 1] - bounds[k] >= W - 1e-6]
        budgets[node] = {
            "fraction": frac, "leaf": not sim.tree.children(node),
            "delivered_gpu_s": delivered, "entitlement_gpu_s": ent, "ratio": ratios,
            "delivered_total_gpu_s": sum(delivered), "entitlement_total_gpu_s": sum(ent),
            "ratio_after_first_window": {
                "min": min(full) if full else None, "max": max(full) if full else None,
                "mean": sum(full) / len(full) if full else None},
        }
    lost_pre = sum(r.lost_gpu_s for r in res.runs if r.end_reason in ("preempted", "drained"))
    lost_fail = sum(r.lost_gpu_s for r in res.runs if r.end_reason == "host_failure")
    reb = [x for x in res.preemptions if x.for_workload_id is not None]
    ends = Counter(r.end_reason for r in res.runs)
    class_quantiles = {k: (np.percentile(v, np.linspace(0, 100, 101)).round(3).tolist()
                           if v else []) for k, v in waits.items()}
    debug_p95 = _pct(waits["debug"])["p95"]
    notes = list(sim.notes)
    refused = Counter(r.reason for r in jobs if r.state == "refused")
    for why, count in refused.most_common(3):
        notes.append(f"{count} workload(s) refused at submission: {why}")
    if sim.clamped:
        notes.append(f"{sim.clamped} workload(s) declared a min_runtime above the maximum "
                     f"({p.max_min_runtime:g} s): clamped to it")
    if debug_p95 is not None and debug_p95 > 120:
        notes.append(explain_debug_wait(sim, res))
    return {
        "trace": sim.trace_description,
        "cluster": sim.cluster.describe(),
        "params": {"policy": p.policy, "partition_policy": p.partition_policy,
                   "window_s": p.window, "half_life_s": p.half_life,
                   "max_min_runtime_s": p.max_min_runtime, "hysteresis": p.hysteresis,
                   "grace_s": p.grace, "unallocated_grace_s": p.unallocated_grace,
                   "pass_interval_s": p.pass_interval, "cadence": sim.config.cadence,
                   "seed": sim.config.seed,
                   "failure_rate_per_host_day": sim.config.failure_rate,
                   "repair_time_s": sim.config.repair_time, "until_s": sim.config.until},
        "end_s": end,
        "wall_s": sim.wall,
        "passes": sim.passes,
        "skipped_passes": sim.skipped,
        # of those, instants whose submissions joined a settled cluster (``_join_quietly``)
        "skipped_for_joins": sim.joined_quietly,
        "jobs": len(jobs),
        "states": dict(states),
        "never_started": never,
        "refused": sim.refused,
        "min_runtime_clamped": sim.clamped,
        "waits": {k: _pct(v) for k, v in waits.items()},
        "wait_quantiles_by_class": class_quantiles,
        "waits_by_budget": {b: _pct(v) for b, v in sorted(by_budget.items())},
        "runs": len(res.runs),
        "run_end_reasons": dict(ends),
        "preemptions": {"total": len(res.preemptions), "rebalancing": len(reb),
                        "of_unallocated": sum(1 for x in reb if not x.allocated),
                        "of_allocated": sum(1 for x in reb if x.allocated),
                        "drain": sum(1 for x in res.preemptions if x.for_workload_id is None)},
        "requeues": sum(r.requeues for r in jobs),
        "holds": sim.holds,
        "gpu_hours_lost": {"preemption": lost_pre / 3600, "host_failure": lost_fail / 3600},
        "idle": {"share": sim.config.idle_share,
                 "policy": sim.config.idle_policy is not None,
                 "gpu_hours_idle": sim.idle_gpu_s / 3600,
                 "gpu_hours_returned": sim.idle_returned_gpu_s / 3600,
                 "preempted": sim.idle_preempted},
        "occupancy": occupancy,
        "idle_while_waiting": {
            "share": sum(sim.idle_waiting_gpu_s.values()) / hs,
            **{f"{cause}_share": gpu_s / hs for cause, gpu_s in sim.idle_waiting_gpu_s.items()},
        },
        "timeline": timeline,
        "window_bounds_s": bounds,
        "budgets": budgets,
        "hosts": {"failures": dict(sim.failures), "escalated": sim.escalations,
                  **RepairFigure(sim.repairs, sim.human_repairs).as_dict()},
        "notes": notes,
    }


def explain_debug_wait(sim: Simulator, res: SimResult) -> str:
    """Why debug workloads waited more than 2 minutes at p95 (printed and in the report):
    where they were and what the engine said while they waited (its last ``waiting`` reason).
    """
    slow = [r for r in res.jobs if r.first_start is not None
            and is_debug(r.workload.gpus, r.workload.min_runtime) and r.wait_s > 120]
    where = Counter(r.job.budget for r in slow)
    why = Counter(_reason_kind(r.reason) for r in slow)
    top = ", ".join(f"{b} ({n})" for b, n in where.most_common(3))
    reasons = "; ".join(f"{k} ({n})" for k, n in why.most_common(3))
    return (f"debug p95 wait above 2 min: {len(slow)} debug workloads waited > 2 min, mostly "
            f"in {top}. The engine's last reasons while they waited: {reasons}. A debug "
            f"workload waits when its branch ranks below branches with queued work (strict "
            f"Fair Tree dominance) and no GPU frees: protected allocated work (up to the max "
            f"min_runtime) is never preempted, and a preemption costs at least the grace "
            f"period ({sim.params.grace:g} s) - shorter max min_runtime, a shorter grace, or "
            f"more unallocated fill work (preemptible at once) shortens it")


_NUM = re.compile(r"[0-9][0-9.]*%?")


def _reason_kind(reason: str) -> str:
    """A waiting reason without its numbers and names, to count reasons by kind."""
    if not reason:
        return "no reason recorded"
    head = reason.split(";")[0]
    head = re.sub(r"\bon [^:(]+", "on <hosts>", head)
    head = re.sub(r"holding [^(]+", "holding <hosts> ", head)
    return _NUM.sub("N", head)[:90]


# ------------------------------------------------------------------------------- entry points


def simulate(
    jobs: list[TraceJob],
    shares: dict[str, float],
    cluster: ClusterSpec,
    config: SimConfig | None = None,
    description: str = "",
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    sim = Simulator(jobs, shares, cluster, config)
    sim.trace_description = description
    return sim.run(progress)


_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def duration(text: str) -> float:
    """'90', '90s', '15m', '8h', '7d', '2w' -> seconds."""
    m = _DUR.match(str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration {text!r} (use e.g. 300, 15m, 8h, 7d)")
    return float(m[1]) * _UNIT[m[2]]


def durations(text: str) -> list[float]:
    return [duration(x) for x in str(text).split(",") if x.strip()]


def floats(text: str) -> list[float]:
    try:
        return [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad list of numbers {text!r}") from None


def names(choices) -> Callable[[str], list[str]]:
    """An argument type: a comma-separated list of names out of ``choices``."""
    def parse(text: str) -> list[str]:
        listed = [x.strip() for x in str(text).split(",") if x.strip()]
        unknown = [x for x in listed if x not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, unknown))} (choose from {', '.join(choices)})")
        return listed
    return parse


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m scheduler.engine.simulate",
        description="Replay a GPU job trace against a cluster and a budget tree with "
        "Timeshare's scheduling engine (the same schedule() the live loop runs), and report "
        "queue waits, preemptions, occupancy and each budget's delivered GPU-time against its "
        "entitlement. Durations accept s/m/h/d/w suffixes (300, 15m, 8h, 7d).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The simulator's options, on its own parser or on another command's (the Celery sweep's
    management command takes the very same)."""
    g = ap.add_argument_group("input")
    g.add_argument("--trace", default=str(PHILLY_TRACE),
                   help="trace CSV, gzipped or not: docs/DESIGN.md's format (submit_time,"
                   "duration,gpus,budget,user,min_runtime,resumable) or the public format of "
                   "the traces in data/traces")
    g.add_argument("--format", choices=("auto", "design", "public"), default="auto",
                   help="trace format; auto looks at the header")
    g.add_argument("--cluster", default="philly",
                   help="'philly' (philly_vc_sizes.csv.gz: 352 hosts x 8 GPUs, VC = network "
                   "group), a sizes CSV, or HOSTSxGPUS[/GROUPS] like 16x8/2")
    g.add_argument("--tree", help="budget tree, YAML or JSON {path: shares} (e.g. "
                   "{prog-a: 70, prog-a/proj-a1: 50}); default: from the trace (public: the "
                   "conversion rule; design: equal shares per node)")
    g.add_argument("--start", type=duration, default=None,
                   help="slice: ignore submissions before this time (re-based to 0)")
    g.add_argument("--end", type=duration, default=None,
                   help="slice: ignore submissions at or after this time")
    g.add_argument("--limit", type=int, default=None, help="keep only the first N workloads")
    g.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply submission times by this (0.5 = arrivals twice as dense, "
                   "durations unchanged): accelerate a trace to raise contention")
    g = ap.add_argument_group("conversion rule for public traces (printed with the results)")
    g.add_argument("--programs", type=int, default=3, help="programs the VCs are spread over")
    g.add_argument("--shares-from", choices=("sizes", "gpu_hours"), default="sizes",
                   help="project shares: VC nodes in philly_vc_sizes.csv, or the VC's share "
                   "of the trace's GPU-hours")
    g.add_argument("--users-per-budget", type=int, default=4,
                   help="synthetic users per VC (seeded hash of job_id)")
    g.add_argument("--unallocated-fraction", type=float, default=0.1,
                   help="seeded fraction of non-debug jobs made unallocated when the trace has "
                   "no job_class ('best' jobs always are)")
    g.add_argument("--resumable-fraction", type=float, default=0.8,
                   help="seeded fraction of jobs that checkpoint and can be requeued")
    g = ap.add_argument_group("scheduling parameters (engine Params)")
    policy = g.add_argument("--policy", choices=tuple(POLICIES), default="fairshare",
                   help="; ".join(f"{p.name}: {p.summary}" for p in POLICIES.values())
                   + ". Every order breaks ties by submission time, then job id")
    g.add_argument("--partition-policy", choices=PARTITION_POLICIES, default="fifo",
                   help="the policy inside each partition under --policy partitions (the "
                   "partitions come from the cluster's groups: a sizes CSV's VCs)")
    g.add_argument("--window", type=duration, default=7 * 86400.0,
                   help="fair-share lookback window (also the period of the per-window "
                   "delivered-vs-entitlement report)")
    g.add_argument("--half-life", type=duration, default=None,
                   help="exponential decay of usage instead of the hard window")
    g.add_argument("--max-min-runtime", type=duration, default=8 * 3600.0,
                   help="cluster maximum for min_runtime; public traces declare "
                   "min(duration, this); larger declared values are clamped (counted)")
    g.add_argument("--hysteresis", type=float, default=0.1,
                   help="a branch is over-used for preemption when its ratio > 1 + this")
    g.add_argument("--grace", type=duration, default=300.0,
                   help="grace period between the preemption signal and the stop (charged)")
    g.add_argument("--unallocated-grace", type=duration, default=Params().unallocated_grace,
                   help="shorter grace for preempted unallocated work (never above --grace)")
    g.add_argument("--pass-interval", type=duration, default=Params().pass_interval,
                   help="the live loop's cadence: while allocated work waits a pass runs at "
                   "least this often (TIMESHARE_TICK_SECONDS)")
    g.add_argument("--cadence", choices=CADENCES, default="crossings",
                   help="ticks: a pass every --pass-interval while allocated work waits, as the "
                   "live loop; crossings: only at the first tick after a ratio crossing (same "
                   "decisions, fewer passes)")
    g = ap.add_argument_group("fleet")
    g.add_argument("--failure-rate", type=float, default=0.0,
                   help="host failures per host per day (seeded Poisson)")
    g.add_argument("--soft-fraction", type=float, default=0.5,
                   help="share of failures announced by a health signal (host drained) "
                   "rather than sudden death (runs killed)")
    g.add_argument("--repair-time", type=duration, default=4 * 3600.0,
                   help="time from DOWN/DRAINED to a repair attempt's result")
    g.add_argument("--repair-fail", type=float, default=0.1,
                   help="chance that one automated repair attempt fails (3 failed -> ESCALATED "
                   "to a human, fixed a day later)")
    g.add_argument("--checkpoint-interval", type=duration, default=3600.0,
                   help="resumable work checkpoints this often (work lost on a host death)")
    g.add_argument("--idle-share", type=float, default=0.0,
                   help="share of workloads whose GPUs go idle 10-40 min into each run "
                        "(sessions left open)")
    g.add_argument("--idle-policy", type=duration, default=None,
                   help="preempt allocated runs idle this long once past their minimum "
                        "runtime (the cluster idle policy; off by default)")
    g = ap.add_argument_group("run")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the conversion rule and the failures: same seed, same results")
    g.add_argument("--until", type=duration, default=None,
                   help="stop the clock here (default: when every workload is done)")
    g.add_argument("--out", default="var/sim",
                   help="output directory: summary.json, jobs.csv, runs.csv, report.html")
    g.add_argument("--no-html", action="store_true", help="skip the HTML report")
    g.add_argument("--quiet", action="store_true", help="print only the output paths")
    g = ap.add_argument_group("sweeps (grid, one simulation per point, one comparison table)")
    g.add_argument("--sweep", action="store_true",
                   help="sweep the grid given by --sweep-policy/--sweep-window/"
                   "--sweep-max-min-runtime/--sweep-grace/--sweep-hysteresis/"
                   "--sweep-unallocated-grace (each defaults to the single value above); "
                   "writes sweep.csv and sweep.json into --out")
    g.add_argument("--sweep-policy", type=names(policy.choices), default=None,
                   help="e.g. fairshare,fifo")
    g.add_argument("--sweep-window", type=durations, default=None, help="e.g. 1d,7d,14d")
    g.add_argument("--sweep-max-min-runtime", type=durations, default=None, help="e.g. 2h,8h,24h")
    g.add_argument("--sweep-grace", type=durations, default=None, help="e.g. 1m,5m,15m")
    g.add_argument("--sweep-hysteresis", type=floats, default=None, help="e.g. 0,0.1,0.25")
    g.add_argument("--sweep-unallocated-grace", type=durations, default=None,
                   help="e.g. 0,30s,1m,5m")
    g.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="parallel processes for --sweep")


def config_from_args(a: argparse.Namespace) -> tuple[SimConfig, ConversionRule]:
    for name in ("hysteresis", "failure_rate", "time_scale"):
        if getattr(a, name) < 0:
            raise TraceError(f"--{name.replace('_', '-')} must be >= 0")
    for name in ("soft_fraction", "repair_fail", "unallocated_fraction", "resumable_fraction"):
        if not 0 <= getattr(a, name) <= 1:
            raise TraceError(f"--{name.replace('_', '-')} must be between 0 and 1")
    if a.window <= 0 or (a.half_life is not None and a.half_life <= 0):
        raise TraceError("--window and --half-life must be > 0")
    if a.pass_interval <= 0:
        raise TraceError("--pass-interval must be > 0")
    params = Params(window=a.window, half_life=a.half_life, max_min_runtime=a.max_min_runtime,
                    hysteresis=a.hysteresis, grace=a.grace, policy=a.policy,
                    partition_policy=a.partition_policy,
                    unallocated_grace=a.unallocated_grace, pass_interval=a.pass_interval)
    cfg = SimConfig(params=params, seed=a.seed, failure_rate=a.failure_rate,
                    repair_time=a.repair_time, soft_fraction=a.soft_fraction,
                    repair_fail=a.repair_fail, checkpoint_interval=a.checkpoint_interval,
                    until=a.until, cadence=a.cadence, idle_share=a.idle_share,
                    idle_policy=None if a.idle_policy is None
                    else IdlePolicy(period=a.idle_policy, threshold=0.10))
    rule = ConversionRule(seed=a.seed, programs=a.programs, shares=a.shares_from,
                          users_per_budget=a.users_per_budget,
                          unallocated_fraction=a.unallocated_fraction,
                          resumable_fraction=a.resumable_fraction,
                          max_min_runtime=a.max_min_runtime)
    return cfg, rule


def load_inputs(a: argparse.Namespace, rule: ConversionRule) -> tuple[Trace, ClusterSpec]:
    trace = read_trace(a.trace, a.format, rule, start=a.start, end=a.end, limit=a.limit)
    if a.time_scale != 1.0:
        for j in trace.jobs:
            j.submit_time *= a.time_scale
        trace.notes.append(f"submission times scaled by {a.time_scale:g}")
    if a.tree:
        trace.shares = load_tree(a.tree)
        trace.notes.append(f"budget tree from {a.tree}")
    if not trace.jobs:
        raise TraceError(f"{a.trace}: no workloads in the selected slice")
    cluster = parse_cluster(a.cluster)
    cluster.failure_rate = a.failure_rate
    cluster.repair_time = a.repair_time
    return trace, cluster


def run_one(a: argparse.Namespace) -> SimResult:
    cfg, rule = config_from_args(a)
    trace, cluster = load_inputs(a, rule)
    return simulate(trace.jobs, trace.shares, cluster, cfg, trace.describe())


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    try:
        if a.sweep:
            print(run_sweep(a, run_one))
            return 0
        res = run_one(a)
        paths = res.write(a.out, html=not a.no_html)
    except (TraceError, OSError) as exc:
        print(f"simulate: error: {exc}", file=sys.stderr)
        return 2
    if not a.quiet:
        print(format_summary(res.summary))
        print("")
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
