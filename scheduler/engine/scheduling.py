"""One scheduling pass (DESIGN.md, "A scheduling pass").

0. Runs whose grace period is over are stopped (their GPUs are free for this very pass);
   runs on DRAINING hosts are signalled as soon as they are preemptible; an empty DRAINING
   host is reported drained.
1. Pending workloads are ranked: allocated work by Fair Tree rank, then unallocated work in
   submission order ("fifo" and "quota" use submission order throughout).
2. Walking that order, each workload starts if it fits on free GPUs (``placement.place``).
3. An allocated workload that does not fit may preempt (``preemption.victims_for``). Its
   victims are signalled and keep their GPUs for the grace period; the requester claims those
   GPUs and waits, so the next pass sees them on their way and preempts nothing more for it.
4. The first workload that can neither start nor preempt holds the hosts that will free
   soonest; after that, held hosts take only work that will be out of the way in time
   (by expected duration, else by protection) or, under fair share, unallocated work that the
   holder may preempt.
5. Every decision and every wait carries a reason naming budgets and their ratios.
"""

from __future__ import annotations

import math

from .fairshare import Standing, order_key
from .model import (
    BudgetTree,
    ClusterState,
    Hold,
    HostDrained,
    HostState,
    Params,
    Pass,
    Preempt,
    Run,
    Start,
    Stop,
    Workload,
)
from .placement import Floor, choose_hosts, place
from .preemption import Rules, Victims, victims_for

RESERVATIONS = 1  # how many blocked workloads may hold hosts in one pass (as Slurm's backfill)


def schedule(state: ClusterState, tree: BudgetTree, params: Params) -> Pass:
    standing = Standing(tree, state.usage, state.capacity)
    out = Pass(ratios=dict(standing.ratios))
    floor = Floor(state.hosts, state.running)
    running = _end_grace(state, params, floor, out)
    _drain(state, floor, running, out)
    if params.policy == "fairshare":
        order = sorted(state.pending, key=order_key(standing))
    else:
        order = sorted(state.pending, key=lambda w: (w.submitted, w.id))
    out.order = [w.id for w in order]
    _Walk(state, tree, params, standing, floor, running, out).run(order)
    return out


def next_event(state: ClusterState, params: Params) -> float | None:
    """The next time a pass could decide something new without outside events: a grace
    period ending, or a protection expiring (which lets a draining host empty, or makes a run
    a possible victim while allocated work waits)."""
    now = state.now
    draining = {h.name for h in state.hosts if h.state == HostState.DRAINING}
    waiting_allocated = any(w.min_runtime > 0 for w in state.pending)
    soonest = math.inf
    for run in state.running:
        if run.signalled_at is not None:
            t = run.signalled_at + params.grace
        elif run.workload.min_runtime > 0 and (
            waiting_allocated or any(h in draining for h in run.placement.hosts)
        ):
            t = run.protected_until
        else:
            continue
        if now < t < soonest:
            soonest = t
    return None if soonest == math.inf else soonest


# ---------------------------------------------------------------------------------------------
# Step 0: grace and drain


def _end_grace(state: ClusterState, params: Params, floor: Floor, out: Pass) -> list[Run]:
    """Stop signalled runs whose grace is over; return the runs still there."""
    healthy = {h.name for h in state.hosts if h.state == HostState.AVAILABLE}
    still = []
    for run in state.running:
        if run.signalled_at is None or state.now < run.signalled_at + params.grace:
            still.append(run)
            continue
        drained = any(h not in healthy for h in run.placement.hosts)
        then = "requeued" if run.workload.resumable else "not resumable: ends as PREEMPTED"
        out.decisions.append(
            Stop(
                run,
                requeue=run.workload.resumable,
                reason=f"grace period of {_span(params.grace)} over: stopped, {then}",
                end_reason="drained" if drained else "preempted",
            )
        )
        floor.stopped(run)
    return still


def _drain(state: ClusterState, floor: Floor, running: list[Run], out: Pass) -> None:
    """DRAINING hosts: unallocated and preemptible work leaves at once, protected work when its
    protection expires; a host with nothing left on it is drained."""
    draining = {h.name: h for h in state.hosts if h.state == HostState.DRAINING}
    if not draining:
        return
    occupied: set[str] = set()
    for run in running:
        hosts = [h for h in run.placement.hosts if h in draining]
        if not hosts:
            continue
        occupied.update(hosts)
        if run.signalled_at is not None:
            continue  # already leaving
        if not run.preemptible(state.now):
            continue  # protected: leaves when its minimum runtime is reached
        kind = "allocated work past its minimum runtime" if run.allocated else "unallocated work"
        why = f"host {hosts[0]} is draining: {kind} leaves at once (requeued if resumable)"
        out.decisions.append(Preempt(run, why))
        floor.release(run)
    for name, host in draining.items():
        if name not in occupied:
            out.decisions.append(HostDrained(host, f"host {name} is draining and has no runs left"))


# ---------------------------------------------------------------------------------------------
# Steps 2-5: the walk


class _Walk:
    def __init__(
        self,
        state: ClusterState,
        tree: BudgetTree,
        params: Params,
        standing: Standing,
        floor: Floor,
        running: list[Run],
        out: Pass,
    ):
        self.now = state.now
        self.params = params
        self.policy = params.policy
        self.standing = standing
        self.floor = floor
        self.out = out
        self.rules = Rules(standing, params, state.now)
        self.holds_left = RESERVATIONS
        self.holders: list[str] = []
        self.nofit = math.inf  # smallest size that did not fit on open hosts: fits only shrink
        self.cannot_preempt: dict[str, int] = {}  # leaf -> smallest size with no victim set
        self.reach = self._reach()  # what preemption could free at best, per host
        if params.policy == "quota":
            total = sum(h.gpus for h in state.hosts)
            self.quota = {leaf: tree.fraction(leaf) * total for leaf in tree.nodes}
            self.in_use: dict[str, int] = {}
            for run in running:
                if run.allocated:
                    b = run.workload.budget
                    self.in_use[b] = self.in_use.get(b, 0) + run.gpus

    def run(self, order: list[Workload]) -> None:
        for w in order:
            self.consider(w)

    def consider(self, w: Workload) -> None:
        if self.policy == "quota" and w.min_runtime > 0 and not self._within_quota(w):
            return
        placement = self._fit(w)
        if placement is not None:
            self._start(w, placement)
            return
        if self.policy == "fairshare" and w.min_runtime > 0:
            victims = self._victims(w)
            if victims is not None:
                self._claim(w, victims)
                return
        if self.holds_left > 0:
            self._hold(w)
            return
        self.out.waiting[w.id] = self._why(w)

    # -- start -----------------------------------------------------------------------------

    def _ends(self, w: Workload) -> float:
        """When ``w`` would be out of the way of a reservation if started now."""
        if w.min_runtime <= 0 and self.policy == "fairshare":
            return self.now  # the holder may preempt unallocated work whenever it likes
        if w.duration is not None:
            return self.now + w.duration
        if w.min_runtime > 0:
            return self.now + w.min_runtime  # preemptible from then on
        return math.inf

    def _fit(self, w: Workload):
        g = w.gpus
        if g < self.nofit:
            placement = place(g, self.floor)
            if placement is not None:
                return placement
            self.nofit = g
        if self.floor.held:
            ends = self._ends(w)
            if ends <= max(self.floor.held.values()):
                return place(g, self.floor, ends)
        return None

    def _start(self, w: Workload, placement) -> None:
        self.floor.occupy(placement)
        hosts = " ".join(placement.hosts)
        backfill = any(h in self.floor.held for h in placement.hosts)
        if w.min_runtime <= 0:
            why = f"started on {hosts}: unallocated, uses idle GPUs until allocated work needs them"
        elif self.policy == "fairshare":
            why = f"started on {hosts}: {self.standing.label(w.budget)} of entitlement"
        else:
            why = f"started on {hosts} ({self.policy})"
        if backfill:
            why += f"; backfilled, out of the way before the reservation for {self.holders[0]}"
        if self.policy == "quota" and w.min_runtime > 0:
            self.in_use[w.budget] = self.in_use.get(w.budget, 0) + w.gpus
        self.out.decisions.append(Start(w, placement, why))

    def _within_quota(self, w: Workload) -> bool:
        used = self.in_use.get(w.budget, 0)
        quota = self.quota.get(w.budget, 0.0)
        if used + w.gpus <= quota + 1e-9:
            return True
        self.out.waiting[w.id] = (
            f"{w.budget} at its quota: {used} of {quota:g} GPUs in use, needs {w.gpus} more"
        )
        return False

    # -- preempt -------------------------------------------------------------------------------

    def _reach(self) -> tuple[int, int]:
        """(most GPUs one host could offer, GPUs on hosts that could be emptied) if every run
        that anybody may preempt left: a cheap bound that skips hopeless searches."""
        floor, best, whole = self.floor, 0, 0
        for host, size in floor.size.items():
            if host in floor.held:
                continue
            n = len(floor.free[host]) + len(floor.releasing[host])
            n += sum(len(idx) for run, idx in floor.runs[host] if self.rules.candidate(run))
            best = max(best, n)
            if n == size:
                whole += size
        return best, whole

    def _victims(self, w: Workload) -> Victims | None:
        g = w.gpus
        one, whole = self.reach
        if (g <= self.floor.largest and g > one) or (g > self.floor.largest and g > whole):
            return None
        if g >= self.cannot_preempt.get(w.budget, math.inf):
            return None  # a smaller request of the same budget found nothing: neither will this
        found = victims_for(w, self.floor, self.rules)
        if found is None:
            self.cannot_preempt[w.budget] = min(g, self.cannot_preempt.get(w.budget, math.inf))
        return found

    def _claim(self, w: Workload, victims: Victims) -> None:
        floor = self.floor
        for run in victims.runs:
            self.out.decisions.append(Preempt(run, self.rules.reason(w, run), w.id))
            floor.release(run)
        left = w.gpus
        for host in victims.hosts:
            n = min(left, floor.size[host])
            floor.claim(host, n)
            left -= n
        where = " ".join(victims.hosts)
        if victims.runs:
            self.out.waiting[w.id] = (
                f"preempting {len(victims.runs)} run(s) on {where} to make room "
                f"({self.standing.label(w.budget)} of entitlement)"
            )
        else:
            self.out.waiting[w.id] = f"waiting for GPUs on {where} being released by preempted runs"

    # -- reserve -------------------------------------------------------------------------------

    def _free_at(self, run: Run, holder: Workload) -> float:
        """When ``run`` is expected to be out of the way of ``holder``."""
        if run.workload.min_runtime <= 0 and holder.min_runtime > 0 and self.policy == "fairshare":
            return self.now
        d = run.workload.duration
        if d is not None:
            return max(self.now, run.started + d)
        return max(self.now, run.protected_until)

    def _hold(self, w: Workload) -> None:
        floor, g = self.floor, w.gpus
        times: dict[str, list[float]] = {}
        grace_end = self.now + self.params.grace  # at the latest; signalled runs leave by then
        for host, size in floor.size.items():
            if host in floor.held or size < min(g, floor.largest):
                continue
            t = [self.now] * len(floor.free[host]) + [grace_end] * len(floor.releasing[host])
            for run, idx in floor.runs[host]:
                t.extend([self._free_at(run, w)] * len(idx))
            t.sort()
            times[host] = t
        if g <= floor.largest:
            ready = {h: t[g - 1] for h, t in times.items() if len(t) >= g}
            if not ready:
                self.out.waiting[w.id] = self._why(w)
                return
            host = min(ready, key=lambda h: (ready[h], h))
            hosts, until = [host], ready[host]
        else:
            ready = {h: t[-1] if t else self.now for h, t in times.items()}
            cost = {h: (v,) for h, v in ready.items()}
            chosen = choose_hosts(g, ready, floor.size, floor.group, cost)
            if chosen is None:
                self.out.waiting[w.id] = self._why(w)
                return
            hosts, until = sorted(chosen), max(ready[h] for h in chosen)
        for h in hosts:
            floor.hold(h, until)
        self.holds_left -= 1
        self.holders.append(f"{w.budget}/{w.id}")
        why = (
            f"holding {' '.join(hosts)} (expected free in {_span(until - self.now)}): "
            f"needs {g} GPUs, {floor.open_free + floor.free_on(hosts)} free; "
            "only work that ends in time may backfill them"
        )
        self.out.decisions.append(Hold(w, why, tuple(hosts), until))
        self.out.waiting[w.id] = why

    # -- explain ---------------------------------------------------------------------------------

    def _why(self, w: Workload) -> str:
        g, free = w.gpus, self.floor.open_free
        shape = f"needs {g} GPUs" if g <= self.floor.largest else f"needs {g} GPUs on whole hosts"
        if w.min_runtime <= 0:
            why = f"unallocated: {shape}, {free} idle"
        elif self.policy == "fairshare":
            why = (
                f"{shape}, {free} free; no run it may preempt "
                f"({self.standing.label(w.budget)} of entitlement)"
            )
        else:
            why = f"{shape}, {free} free ({self.policy}: no preemption)"
        if self.holders:
            why += f"; hosts held for {self.holders[0]}"
        return why


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
