"""One scheduling pass (DESIGN.md, "A scheduling pass").

0. Runs whose grace period is over are stopped (their GPUs are free for this very pass);
   runs on DRAINING hosts are signalled as soon as they are preemptible; an empty DRAINING
   host is reported drained.
1. Pending workloads are ranked: allocated work by Fair Tree rank, then unallocated work in
   submission order (the other named policies use their own order throughout:
   ``policies.queue_order``; ``partitions`` runs one pass per partition).
2. Walking that order, each workload starts if it fits on free GPUs (``placement.place``). A
   strict policy (``fifo``, ``sjf``) stops at the first workload that cannot start.
3. An allocated workload that does not fit may preempt (``preemption.victims_for``), within
   the final-share rule (``preemption.Rules.final_share_block``). Its victims are signalled and
   keep their GPUs for the grace period (a shorter one for unallocated work); the requester
   **claims** those GPUs (``model.Claim``, handed to the next pass by the driver) and starts on
   them when they are free: nobody else starts on claimed GPUs, across passes.
4. The first workload that can neither start nor preempt holds the hosts that will free
   soonest (under policies with a reservation: ``policies.Policy.reservations``); after that,
   held hosts take only work that will be out of the way in time (by expected duration, else
   by protection) or, under fair share, unallocated work that the holder may preempt. The
   same rule opens held hosts to preemption: a requester out of the way in time (grace period
   included) may displace victims there.
5. Every decision and every wait carries a reason naming budgets and their ratios.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import compress, count, islice, repeat
from operator import add, attrgetter, le

from .fairshare import Standing, order_key, percent, ratio
from .model import (
    BudgetTree,
    Claim,
    ClusterState,
    Hold,
    Host,
    HostDrained,
    HostState,
    Params,
    Pass,
    Placement,
    Preempt,
    RestWaits,
    Run,
    Start,
    Stop,
    TailWaits,
    Wait,
    Workload,
)
from .partitions import Partitioning
from .pending import PendingQueue, span
from .placement import Floor, FloorPlan, RunLog, choose_hosts, place
from .policies import PARTITION_POLICIES, PolicyError, policy_of, queue_order, submission_order
from .preemption import (
    Board,
    FinalShareBlock,
    Holdings,
    Rules,
    Victims,
    search_kind,
    victims_for,
)
from .wording import quantity

_id_of = attrgetter("id")
_signalled_at = attrgetter("signalled_at")
_state_of = attrgetter("state")
_gpus_of = attrgetter("gpus")
_NEVER = (math.inf, math.inf)  # no request of the budget has failed to find victims yet
_STAND_IN = "\0stand-in"  # the workload id of a victim search made ahead of its turn


@lru_cache(maxsize=4096)
def _stand_in(budget: str, gpus: int) -> Workload:
    """The requester of a victim search made ahead of its turn (``_Walk._inert``):
    a search reads of its requester only the budget, the size, whether it is allocated, and the
    id it notes a refusal under."""
    return Workload(_STAND_IN, budget, gpus, min_runtime=1.0, resumable=True, submitted=0.0)


class _Ranking:
    """When the ``k``-th GPU of each host frees for a holder (``_Walk._ready``; -1 the
    last), kept across passes for one ``(k, preempts)``. An answer stays while its host does:
    a pass asks again only the hosts the floor plan changed since (``FloorPlan.changes``),
    those the pass changed itself (``Floor.changed``), those releasing GPUs (grace periods
    end), and those whose answer is now (it moves with the pass). A reservation asks every
    host in every pass; between two passes a start and an end change two."""

    __slots__ = ("changes", "seen", "ready", "stale")

    def __init__(self, changes: list[str], hosts: Iterable[str]) -> None:
        self.changes, self.seen = changes, len(changes)
        self.ready: dict[str, tuple[float, bool]] = {}  # none for a host without a k-th GPU
        self.stale = set(hosts)  # to ask again before the answers are read


class EngineMemo:
    """Driver-owned state reused across the passes of ONE cluster (``ClusterState.memo``).

    Holds the ``FloorPlan`` so that a pass updates its picture of hosts and runs by what
    changed since the previous pass, when the runs on each host are expected free (for
    reservations, ``_Walk._ready``), what preemption could free on each host (the ``Board``
    victim searches read, brought to each pass's floor by what changed), and, for a driver
    that keeps its queue as a ``PendingQueue``, what a strict line's last pass reached
    (``_Walk.run_line``). Such a driver also takes waits that a pass does not list one by
    one (``Pass.behind``, ``Pass.rest``). Optional: without it every pass reads everything
    and lists every wait.
    """

    __slots__ = ("plan", "log", "partitioning", "parts", "queue", "taken", "reached",
                 "release_times", "rankings", "board", "quiet", "settled", "reads_order")

    def __init__(self, reads_order: bool = True) -> None:
        # whether the driver reads ``Pass.order`` of a fair-share pass: the simulator does not,
        # and copying the lines of a long queue for it is what grows with the queue in a pass
        self.reads_order = reads_order
        self.plan = FloorPlan()
        # a driver that tells the memo every run it starts, ends or signals keeps a log here
        # (the simulator): the floor plan then reads what changed from it
        self.log: RunLog | None = None
        self.partitioning: Partitioning | None = None  # the ``partitions`` policy's groups
        self.parts: dict[str, EngineMemo] = {}  # one memo per partition
        # the kept queue a strict line's last pass walked, and its ``PendingQueue.taken`` then
        self.queue: PendingQueue | None = None
        self.taken = 0
        self.reached: list[str] = []  # the workloads a strict line's last pass reached
        # host -> (its runs as the floor lists them, holder may preempt unallocated work, when
        # each GPU of those runs is expected free): ``_Walk._ready``
        self.release_times: dict[str, tuple] = {}
        # (GPU counted, holder may preempt unallocated work) -> when that GPU of each host
        # frees, kept for reservations (``_Walk._ranked``)
        self.rankings: dict[tuple[int, bool], _Ranking] = {}
        # what preemption could free on each host, as the last pass that searched left it
        # (``preemption.Board.rebase``)
        self.board: Board | None = None
        # a partition's last pass when it decided nothing, with what it read
        # (``Partitioning.inputs``): while those stay the same, so does the pass
        self.quiet: tuple[tuple, Pass] | None = None
        # the walk of the last pass when it left the cluster settled under fair share (it opened
        # no room for another pass): what it found tells a workload that joins after it
        # whether a pass would decide anything for it (``joining_wait``)
        self.settled: _Walk | None = None

    def follows(self, queue: PendingQueue) -> bool:
        """Whether the last pass walked ``queue`` and took its joined work last: what it left
        out is still known to the driver, except what joined since."""
        return self.queue is queue and self.taken == queue.taken

    def walked(self, queue: PendingQueue) -> None:
        self.queue, self.taken = queue, queue.taken

    def partitions(self, hosts: list[Host]) -> Partitioning:
        if self.partitioning is None or self.partitioning.hosts is not hosts:
            self.partitioning, self.parts = Partitioning(hosts), {}
        return self.partitioning

    def joining_wait(self, w: Workload) -> Wait | None:
        """The wait of ``w``, which joined the queue after the last pass, when a pass made now
        would decide nothing but that; None when a pass must decide.

        For a driver to ask between passes, and only while nothing else changed since the last
        pass: no run ended, no protection or grace period ran out, no host changed, and the
        Fair Tree order and every verdict of over-use are still those of the last pass (no
        crossing, ``fairshare.next_crossing``). Then the last pass, settled, is what a pass
        made now decides for everybody else, on the floor it left, and ``w`` only changes it
        if it can start, backfill, claim or preempt there, or take the reservation
        (``_Walk.joining_wait``). Skipping such passes is what keeps a saturated cluster's
        submissions from costing a pass each (notes/CONTENTION.md, "Twelfth round")."""
        walk = self.settled
        return None if walk is None else walk.joining_wait(w)

    def part(self, group: str) -> EngineMemo:
        """The memo of one partition's passes, made on first use."""
        memo = self.parts.get(group)
        if memo is None:
            memo = self.parts[group] = EngineMemo(self.reads_order)
        return memo


def schedule(state: ClusterState, tree: BudgetTree, params: Params) -> Pass:
    policy = policy_of(params.policy)
    if policy.partitioned:
        return _schedule_partitions(state, tree, params)
    memo = state.memo if isinstance(state.memo, EngineMemo) else None
    plan = memo.plan if memo is not None else FloorPlan()
    plan.update(state.hosts, state.running, memo.log if memo is not None else None)
    floor = plan.floor()
    out = Pass()
    stopped = _end_grace(state, params, plan, floor, out)
    _drain(state, plan, floor, stopped, out)
    walk = _Walk(state, tree, params, None, plan, floor, stopped, out, memo)
    walk.take_claims(state.claims)
    # a driver keeping its queue and memo takes waits named in bulk (``Pass.behind``, ``rest``)
    kept_queue = memo is not None and isinstance(state.pending, PendingQueue)
    if params.policy == "fairshare":
        queue = state.pending
        if not isinstance(queue, PendingQueue):
            queue = PendingQueue(queue)
        # Fair Tree only matters when more than one budget competes for allocated time
        if queue.allocated_budgets > 1:
            walk.standing_if_any = walk.ranked_by = Standing(tree, state.usage, state.capacity)
        segments = queue.segments(walk.standing_if_any)
        if memo is None or memo.reads_order:
            out.consider_in(line for _, line in segments)
        walk.run_leaves(queue, segments, tails={} if kept_queue else None)
    elif kept_queue and policy.line:
        walk.run_line(state.pending, memo)
    elif kept_queue and policy.backfill_line:
        walk.run_sizes(state.pending)
    else:
        order = queue_order(state.pending, policy)
        out.order = list(map(_id_of, order))
        walk.run(order)
    if walk.standing_if_any is not None:
        out.ratios = dict(walk.standing_if_any.ratios)
    out.lifts_share_block = walk.lifts_share_block()
    out.claims_open_room = (walk.claims_open_room or walk.gives_back_room()
                            or walk.reservations_move())
    out.requeued_wait = walk.requeued_wait()
    walk.keep_board()
    if memo is not None:
        memo.settled = walk if params.policy == "fairshare" and not out.opens_room else None
    return out


def _schedule_partitions(state: ClusterState, tree: BudgetTree, params: Params) -> Pass:
    """Each partition scheduled on its own hosts with the policy named for inside partitions."""
    memo = state.memo if isinstance(state.memo, EngineMemo) else EngineMemo()
    partitioning = memo.partitions(state.hosts)
    if params.partition_policy not in PARTITION_POLICIES:
        raise PolicyError(f"policy {params.partition_policy!r} cannot run inside partitions: "
                          f"use one of {', '.join(PARTITION_POLICIES)}")
    inside = replace(params, policy=params.partition_policy)
    reads_clock = policy_of(inside.policy).reads_clock
    parts, homeless = partitioning.split(state)
    passes = {}
    for group, part in parts.items():
        kept = part.memo = memo.part(group)
        inputs = None if reads_clock else partitioning.inputs(group, part)
        key = None if inputs is None else (inputs, inside)
        if key is not None and kept.quiet is not None and kept.quiet[0] == key:
            passes[group] = kept.quiet[1]  # it would decide nothing again, and wait as it waits
            continue
        passes[group] = result = schedule(part, tree, inside)
        kept.quiet = None
        if key is not None and not result.decisions:
            # a driver keeps the waits it was given: the same pass again lists none
            kept.quiet = (key, Pass(heads=result.heads, behind=result.behind,
                                    rest_unchanged=True))
    return partitioning.merge(passes, homeless)


def next_event(state: ClusterState, params: Params) -> float | None:
    """The next time a pass could decide something new without outside events: a grace
    period ending, or a protection expiring (which lets a draining host empty, or, under a
    policy that preempts, makes a run a possible victim while allocated work waits)."""
    now = state.now
    running = state.running
    # ``map`` with an attrgetter runs in C: most passes have no signalled run, no draining host
    marks = list(map(_signalled_at, running))
    ends = ([] if marks.count(None) == len(marks) else
            [run.grace_ends(params) for run in running if run.signalled_at is not None])
    draining = ({h.name for h in state.hosts if h.state == HostState.DRAINING}
                if HostState.DRAINING in map(_state_of, state.hosts) else set())
    if policy_of(params.policy).preempts and _allocated_waits(state.pending):
        ends += [run.protected_until for run in running
                 if run.signalled_at is None and run.workload.min_runtime > 0]
    elif draining:
        ends += [run.protected_until for run in running
                 if run.signalled_at is None and run.workload.min_runtime > 0
                 and not draining.isdisjoint(run.placement.hosts)]
    return min((t for t in ends if t > now), default=None)


def _allocated_waits(pending) -> bool:
    if isinstance(pending, PendingQueue):
        return pending.allocated_budgets > 0
    return any(w.min_runtime > 0 for w in pending)


# ---------------------------------------------------------------------------------------------
# Step 0: grace and drain


def _end_grace(
    state: ClusterState, params: Params, plan: FloorPlan, floor: Floor, out: Pass
) -> set[int]:
    """Stop signalled runs whose grace is over; return their ids."""
    stopped: set[int] = set()
    if not plan.signalled:
        return stopped
    healthy = floor.size
    # in a stable order (the plan keeps runs in sets)
    for run in sorted(plan.signalled, key=lambda r: (r.signalled_at, r.workload.id, r.number)):
        if state.now < run.grace_ends(params):
            continue
        drained = any(h not in healthy for h in run.placement.hosts)
        then = "requeued" if run.workload.resumable else "not resumable: ends as PREEMPTED"
        grace = _span(params.grace_for(run.workload))
        out.decisions.append(
            Stop(
                run,
                requeue=run.workload.resumable,
                reason=f"grace period of {grace} over: stopped, {then}",
                end_reason="drained" if drained else "preempted",
            )
        )
        floor.stopped(run)
        stopped.add(id(run))
    return stopped


def _drain(
    state: ClusterState, plan: FloorPlan, floor: Floor, stopped: set[int], out: Pass
) -> None:
    """DRAINING hosts: unallocated and preemptible work leaves at once, protected work when its
    protection expires; a host with nothing left on it is drained."""
    draining = plan.draining
    if not draining:
        return
    occupied: set[str] = set()
    for run in state.running:
        hosts = [h for h in run.placement.hosts if h in draining]
        if not hosts or id(run) in stopped:
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


@dataclass(slots=True)
class _Claimed:
    """A claim honoured in this pass: the GPU indices it set aside on each host."""

    claim: Claim
    taken: list[tuple[str, tuple[int, ...], tuple[int, ...]]]  # (host, free, releasing)

    @property
    def ready(self) -> bool:
        return not any(releasing for _, _, releasing in self.taken)

    def placement(self) -> Placement:
        return Placement(tuple(sorted((host, tuple(sorted(free))) for host, free, _ in self.taken)))


class _Walk:
    def __init__(
        self,
        state: ClusterState,
        tree: BudgetTree,
        params: Params,
        standing: Standing | None,
        plan: FloorPlan,
        floor: Floor,
        stopped: set[int],
        out: Pass,
        memo: EngineMemo | None = None,
    ):
        self.state = state
        self.tree = tree
        self.now = state.now
        self.params = params
        self.policy = params.policy
        self.strict = policy_of(params.policy).strict
        self.standing_if_any = standing
        self._rules: Rules | None = None
        self.plan = plan  # what ``floor`` was made from
        self.floor = floor
        self.out = out
        self.memo = memo  # kept by a driver across the passes of this cluster, if any
        self.release_times = memo.release_times if memo is not None else None
        self.holds_left = policy_of(params.policy).reservations
        self.holders: list[str] = []
        self.holder_preempts = False  # ``_preempts_unallocated`` of the reservation's holder
        self.nofit = math.inf  # smallest size that did not fit on open hosts: fits only shrink
        # (leaf, on whole hosts) -> the smallest sizes that found no victims (``_found_nothing``):
        # with every host open to them, and with the held hosts closed to them; larger requests
        # of the same kind skip the search
        self.cannot_preempt: dict[tuple[str, bool], tuple[float, float]] = {}
        self.nohold = math.inf  # smallest size no hosts could be held for
        # smallest size that found no room on held hosts in time for the reservation: there is one
        # reservation, so every request out of the way by then sees the same hosts
        self.nobackfill = math.inf
        self._free_seen = (-1, 0)
        self._room_seen = (-1, 0)
        self._until_seen = (-1, -math.inf)
        self._labels: dict[str, str] = {}
        self._whys: dict[tuple, Wait] = {}  # _why depends only on these: built once per key
        self.claimed: dict[str, _Claimed] = {}
        # budget -> the submission key of the last of its workloads with a claim: the rest of its
        # line after that one has none (``_may_act``)
        self.claimants: dict[str, tuple] = {}
        # runs this pass started, per host: a reservation counts them like the runs it found
        self.started: dict[str, list[tuple[Run, tuple[int, ...]]]] = {}
        # GPUs moved by this pass (leaf, GPUs), replayed into Holdings when rules are needed
        self._moves: list[tuple[str, int]] = []
        self._holdings: Holdings | None = None
        self._moved = 0  # moves so far: a victim search is valid for one (floor, holdings) state
        # (budget, size, opening) -> (floor generation, moves) of a search that found no
        # victims, with the final-share block that kept them, if any
        self._searched: dict[tuple, tuple[tuple[int, int], FinalShareBlock | None]] = {}
        self.share_blocked: dict[str, FinalShareBlock] = {}
        # the budgets of workloads the final-share rule kept back (``share_blocked``, and the
        # lines ``_leave`` gave its waits)
        self.blocked_budgets: set[str] = set()
        # budgets this pass gave allocated GPUs (starts, claims): the moves that may lift a
        # final-share block (``lifts_share_block``)
        self.gained: set[str] = set()
        # a claim this pass changed may let the next pass decide more (``Pass.claims_open_room``)
        self.claims_open_room = False
        # the hosts of claims given back, and ``nofit`` when the last was (``gives_back_room``)
        self.given_back: set[str] = set()
        self.nofit_given_back = math.inf
        # the standing the walk's order was ranked by (``fairshare.order_key``), if any
        self.ranked_by: Standing | None = None
        # each reservation tried so far, made or not (``_hold``): the requester and its hosts
        self.hold_tries: list[tuple[Workload, tuple[list[str], float, bool] | None]] = []
        # a claim changed, or work backfilled held hosts, after a reservation was tried
        self.changed_after_hold = False
        # a carried claim was made at this very instant: the next pass takes a claim made now
        # before it or after it by where its claimant walks (``take_claims``), and the two may
        # set aside other GPUs than in this pass
        self.claimed_now = False
        # host -> GPU index -> when the run leaving it (signalled, or preempted by this pass)
        # is stopped and the GPU free
        self._release: dict[str, dict[int, float]] | None = None
        if params.policy == "quota":
            total = sum(h.gpus for h in state.hosts)
            self.quota = {leaf: tree.fraction(leaf) * total for leaf in tree.nodes}
            self.in_use: dict[str, int] = {}
            for run in state.running:
                if run.allocated and id(run) not in stopped:
                    b = run.workload.budget
                    self.in_use[b] = self.in_use.get(b, 0) + run.gpus

    @property
    def standing(self) -> Standing:
        """Fair-share standing, computed the first time a decision needs it."""
        if self.standing_if_any is None:
            s = self.state
            self.standing_if_any = Standing(self.tree, s.usage, s.capacity)
        return self.standing_if_any

    @property
    def rules(self) -> Rules:
        if self._rules is None:
            kept = self.memo.board if self.memo is not None else None
            self._rules = Rules(self.standing, self.params, self.now, self._held, kept)
        return self._rules

    def keep_board(self) -> None:
        """Hand the preemption board to the next pass over this cluster (``EngineMemo.board``)."""
        if self.memo is not None and self._rules is not None:
            self.memo.board = self._rules.kept_board

    def _held(self) -> Holdings:
        """What each branch holds now: unsignalled allocated runs (a run preempted in this
        pass is signalled by then), claims, and every GPU this pass moved so far."""
        holdings = Holdings(self.tree.fraction, self.plan.healthy)
        per_budget = dict(self.plan.holding)  # summed first: a budget's ancestors are walked once
        # drained runs leave before the walk; the walk's own preemptions are among the moves
        for d in self.out.of(Preempt):
            run = d.run
            if d.for_workload_id is None and run.workload.min_runtime > 0:
                per_budget[run.workload.budget] -= run.gpus
        for budget, gpus in per_budget.items():
            holdings.add(budget, gpus)
        for leaf, gpus in self._moves:
            holdings.add(leaf, gpus)
        self._holdings = holdings
        return holdings

    def _move(self, leaf: str, gpus: int) -> None:
        self._moved += 1
        if self._holdings is None:
            self._moves.append((leaf, gpus))
        else:
            self._holdings.add(leaf, gpus)

    def run(self, order: list[Workload]) -> None:
        settled, waits = self._settled, self.out.waits
        for at, w in enumerate(order):
            wait = settled(w)
            if wait is None:
                self.consider(w)
            else:
                waits[w.id] = wait
            if self.strict and w.id in waits:
                self._behind(w, order[at + 1:])
                return

    def run_line(self, queue: PendingQueue, memo: EngineMemo) -> None:
        """A strict line in submission order on a kept queue, read only up to its first
        workload that cannot start (``Pass.order`` lists those the walk reached). Everybody
        behind that head has one wait, ``Pass.behind``; after a pass on the same queue,
        ``waits`` gives it only to those that were not behind the last pass's head: those that
        joined since, and those the last pass reached (a workload that joined again may have
        gone before them)."""
        last = memo.follows(queue)
        joined = queue.take_joined()
        settled, waits, reached = self._settled, self.out.waits, self.out.order
        line = queue.by_submission()
        head = None
        for w in line:
            reached.append(w.id)
            wait = settled(w)
            if wait is None:
                self.consider(w)
            else:
                waits[w.id] = wait
            if w.id in waits:
                head = w
                break
        before, memo.reached = memo.reached, reached
        memo.walked(queue)
        if head is None:
            return
        self.out.heads.append(head)
        behind = self.out.behind[None] = self._behind_wait(head)
        if not last:
            waits.update(dict.fromkeys([w.id for w in line], behind))
            return
        seen = set(reached)
        waits.update((wid, behind) for wid in joined if wid not in seen)
        waits.update((wid, behind) for wid in before if wid not in seen and wid in queue)
        self.out.rest_unchanged = True

    def run_sizes(self, queue: PendingQueue) -> None:
        """FIFO with backfill on a kept queue, read per size (``PendingQueue.by_size``). The walk
        looks only at the workloads that may start or hold hosts where it reaches them, in
        submission order across sizes, and leaves every other one the wait it would have got
        there (``Pass.rest``): what a walk of the whole queue gives each.

        What a size may do only narrows as the walk goes on, so a size passed over stays passed
        over: fits only shrink, held hosts only fill up, and a reservation made after one failed
        for a size holds fewer GPUs than that size (one that failed cannot be made on the hosts
        that could take it: a larger one fails too), so it opens nothing to it."""
        lines = queue.by_size()
        spans = {g: queue.spans_of_size(g) for g in lines}
        at = dict.fromkeys(lines, 0)  # per size, the first workload the walk has not passed
        reached = self.out.order
        marks: list[tuple] = []
        standings = [(self._open_free(), bool(self.holders))]
        while True:
            first = None
            fits = self.nofit if self.holds_left <= 0 else max(self.nofit, self.nohold)
            held = bool(self.floor.held)
            for g, line in lines.items():
                i = at[g]
                if i >= len(line):
                    continue
                if g >= fits:  # it may neither fit nor hold hosts: it may only backfill
                    i = self._backfill(g, line, spans[g], i) if held else None
                    at[g] = len(line) if i is None else i
                    if i is None:
                        continue
                key = submission_order(line[i])
                if first is None or key < first[0]:
                    first = (key, g)
            if first is None:
                break
            key, g = first
            w = lines[g][at[g]]
            at[g] += 1
            reached.append(w.id)
            self.consider(w)
            standing = (self._open_free(), bool(self.holders))
            if standing != standings[-1]:
                marks.append(key)
                standings.append(standing)
        self.out.rest = RestWaits(submission_order, marks, standings, self._wait_as)

    def _backfill(self, g: int, line: list[Workload], spans: list[float], i: int) -> int | None:
        """Where, from ``i`` on, the first workload of size ``g`` is that may backfill the held
        hosts (``_settled`` would give it no wait), or None; ``spans``: theirs (``span``)."""
        if g > self._held_room() or g >= self.nobackfill:
            return None
        # the first out of the way in time (``_ends``, compared as it compares), searched in C
        ends = map(add, repeat(self.now), islice(spans, i, None))
        return next(compress(count(i), map(le, ends, repeat(self._held_until()))), None)

    def run_leaves(
        self,
        queue: PendingQueue,
        segments: list[tuple[str | None, list[Workload]]],
        tails: dict[str | None, dict[int, tuple]] | None,
    ) -> None:
        """Fair share on a ``PendingQueue``: walk it leaf by leaf, and leave the rest of a
        leaf's line once none of it can start, claim, preempt nor hold (``_inert``, plan step 3
        in notes/CONTENTION.md), before walking it at all when none of it can, as at
        saturation; the unallocated line (key None) likewise. With ``tails`` (a driver keeps
        the queue), the rest of a line left is named there, not one by one in ``Pass.waits``
        (``Pass.rest``)."""
        settled, waits = self._settled, self.out.waits
        for leaf, line in segments:
            if leaf is None and line is not queue.unallocated:
                self.run(line)  # budgets tied at one rank, merged by submission
                continue
            spans = queue.spans(leaf)
            if line and self._inert(leaf, spans, None):
                self._leave(queue, leaf, line, 0, tails)
                continue
            for at, w in enumerate(line):
                wait = settled(w)
                if wait is not None:
                    waits[w.id] = wait
                    continue
                self.consider(w)
                if at + 1 < len(line) and self._inert(leaf, spans, submission_order(w)):
                    self._leave(queue, leaf, line, at + 1, tails)
                    break
        if tails is not None:
            self.out.rest = TailWaits(tails, self._wait_from)

    def _inert(self, leaf: str | None, spans: dict[int, list[float]], after: tuple | None
               ) -> bool:
        """Whether ``consider`` would give every workload still in ``leaf``'s line (after the
        workload with submission key ``after``, when the walk has been along it) the wait
        ``_settled`` gives it and change nothing else: nothing of its sizes fits on open hosts
        nor may take the reservation, none may backfill held hosts, none has a claim
        (``_may_act``), and the victim search of each size and opening is one its budget skips
        (``cannot_preempt``) or one made on this floor and holdings that found no victims or
        was refused by the final-share rule. Judged on the leaf's whole line, so it only errs
        on the side of walking on.

        The searches it lacks are made at once, ahead of their turn, for a stand-in of the
        budget (``_stand_in``): the first workload of that size and opening would make the same
        search where the walk reaches it, on this floor, since every workload before it only
        waits. A search that finds no victims, or only victims the final-share rule refuses,
        decides nothing but the waits ``_leave`` gives; one that finds victims the rule allows
        is left to that workload, in its turn."""
        if self._may_act(leaf, spans, after):
            return False
        if leaf is None:
            return True  # unallocated work never searches for victims
        for g, line in spans.items():
            for opening, ends in self._openings(line):
                if self._decided(leaf, g, opening, ends):
                    continue
                self._search(_stand_in(leaf, g), ends)
                if not self._decided(leaf, g, opening, ends):
                    return False  # it found victims the rule allows
        return True

    def _may_act(self, leaf: str | None, spans: dict[int, list[float]], after: tuple | None
                 ) -> bool:
        """Whether some workload of ``leaf``'s line (after the workload with submission key
        ``after``, if given) may do something other than search for victims: fit on open hosts,
        take the reservation, backfill held hosts or use a claim. Judged on sizes and spans of
        the whole line, so it only errs on the side of yes, but for claims: a workload with a
        claim the walk has passed holds it for itself."""
        least = min(spans)
        if least < self.nofit or (self.holds_left > 0 and least < self.nohold):
            return True
        held = self.floor.held
        if leaf is None:  # unallocated work neither claims nor preempts, and is out of the
            # way of a holder that may preempt it at once (``_ends``): it may only backfill held
            # hosts with room (an unallocated holder's are judged workload by workload)
            return bool(held) and least <= self._held_room() and not (
                self.holder_preempts and self.now > self._held_until())
        claimant = self.claimants.get(leaf)
        if claimant is not None and (after is None or claimant > after):
            return True
        if not held:
            return False
        if len(set(held.values())) > 1:
            return True
        now, room, until = self.now, self._held_room(), self._held_until()
        return any(g <= room and now + line[0] <= until for g, line in spans.items())

    def _openings(self, spans: list[float]) -> list[tuple[float, float]]:
        """The victim searches that waiting workloads of one size with these ``spans`` (sorted)
        would make, as (opening, ends) of the first to make each: with hosts held, one for
        those out of the way in time for the reservation and one for the others (the ends
        ``_victims`` finds)."""
        if not self.floor.held:
            return [(math.inf, math.inf)]
        now, start, grace = self.now, self._held_until(), self.params.grace
        cut = bisect_right(spans, start, key=lambda s: now + s + grace)
        openings = [(start, now + spans[0] + grace)] if cut else []
        if cut < len(spans):
            openings.append((math.inf, now + spans[cut] + grace))
        return openings

    def _decided(self, leaf: str, g: int, opening: float, ends: float) -> bool:
        """Whether the victim search of ``leaf`` for ``g`` GPUs out of the way by ``ends`` is
        one its budget skips, or one made on this floor and holdings."""
        return self._made(leaf, g, opening) is not None or self._found_nothing(leaf, g, ends)

    def _leave(
        self,
        queue: PendingQueue,
        leaf: str | None,
        line: list[Workload],
        start: int,
        tails: dict[str | None, dict[int, tuple]] | None,
    ) -> None:
        """Give ``line[start:]`` the waits ``_settled`` would give them: named in ``tails``
        when a driver keeps the queue and every workload of a size has the same, else in
        ``Pass.waits``. Only the sizes some of it has are judged: the others had their turn."""
        spans = queue.spans(leaf)
        if start:  # ``spans`` has every workload of each size
            walked = Counter(map(_gpus_of, islice(line, start)))
            spans = {g: of_size for g, of_size in spans.items() if len(of_size) > walked[g]}
        by_size, blocks = self._left_waits(leaf, spans)
        if blocks:
            self.blocked_budgets.add(leaf)
        out = self.out.waits
        if by_size is None:  # each workload's own, as the walk would give it
            for w in line[start:]:
                out[w.id] = self._settled(w)
        elif tails is not None:
            tails[leaf] = by_size
        else:
            wait_from = self._wait_from
            waits = {g: wait_from(*spec) for g, spec in by_size.items()}
            for w in line[start:]:
                out[w.id] = waits[w.gpus]

    def _left_waits(self, leaf: str | None, spans: dict[int, list[float]]
                    ) -> tuple[dict[int, tuple] | None, dict[int, FinalShareBlock]]:
        """What the wait ``_settled`` gives every workload of each size of a line found inert
        (``_inert``) is made from (``_wait_from``), and the final-share block behind it where
        there is one; None for the waits when one size's differ by the held hosts open to
        each."""
        free, held = self._open_free(), bool(self.holders)
        if leaf is None:
            return {g: (g, True, None, free, held, None) for g in spans}, {}
        waits: dict[int, tuple] = {}
        blocks: dict[int, FinalShareBlock] = {}
        for g, line in spans.items():
            for _, ends in self._openings(line):
                block = None
                if not self._found_nothing(leaf, g, ends):
                    block = self._refusal(leaf, g, ends)
                if block is not None:
                    blocks[g] = block
                spec = (g, False, leaf, free, held, block)
                if waits.setdefault(g, spec) != spec:
                    return None, {}
        return waits, blocks

    def _behind(self, first: Workload, rest: list[Workload]) -> None:
        """A strict order: nothing starts ahead of the first workload that cannot start."""
        self.out.heads.append(first)
        self.out.waits.update(dict.fromkeys([w.id for w in rest], self._behind_wait(first)))

    def _behind_wait(self, first: Workload) -> Wait:
        return Wait(f"behind {first.label}, first in line ({self.policy}: strict order)",
                    "behind")

    def _settled(self, w: Workload, record: bool = True) -> Wait | None:
        """The wait ``consider`` would give ``w`` once the walk has stopped (plan step 2 in
        notes/CONTENTION.md): the reservation is taken, nothing of its size fits on open
        hosts, held hosts have no room for it in time, and its budget already found no victim
        for a request no larger and no shorter, or made the very search it would make on this
        floor and holdings, which found none or only some the final-share rule refused. Then
        nothing can happen to ``w`` and it shares the wait of its (size, kind, budget), or of
        that refusal; None when it needs a full ``consider``. ``record``: list a refusal among
        the pass's blocks, as ``consider`` would."""
        g = w.gpus
        if (self.holds_left > 0 and g < self.nohold) or g < self.nofit or w.id in self.claimed:
            return None
        if self.policy == "quota":
            return None
        ends = math.inf
        if self.floor.held:
            ends = self._ends(w)
            if g <= self._held_room() and ends <= self._held_until():
                return None  # it may backfill
            ends += self.params.grace
        if self.policy == "fairshare" and w.min_runtime > 0 and not self._found_nothing(
            w.budget, g, ends
        ):
            made = self._made(w.budget, g, self._opening(ends))
            if made is None:
                return None  # it may find victims
            block = made[1]
            if block is not None:
                if record:
                    self.share_blocked[w.id] = block
                    self.blocked_budgets.add(w.budget)
                return self._refused(g, block)
        return self._why(w)

    def joining_wait(self, w: Workload) -> Wait | None:
        """``EngineMemo.joining_wait`` on the floor this settled walk left: the wait ``_settled``
        gives ``w`` there, when ``w`` ranks after the reservation's holder (ranked before it,
        it would try the reservation first). A pass made later on the same floor, while nothing
        changed, is this walk again with ``w`` in its place: every workload before it decides
        what it decided here, nothing (the walk settled), and whatever ``w`` only waits for
        leaves every later one as it was. Allocated work of a budget that made no search here
        (one that would make a pass rank by a standing this one did not have, say) is never
        told: ``_settled`` needs its budget's search."""
        holder = next((h for h, made in self.hold_tries if made is not None), None)
        if holder is not None:
            ranked = order_key(self.ranked_by)
            if ranked(w) <= ranked(holder):
                return None
        return self._settled(w, record=False)

    def consider(self, w: Workload) -> None:
        if self.policy == "quota" and w.min_runtime > 0 and not self._within_quota(w):
            return
        claimed = self.claimed.get(w.id)
        if claimed is not None and claimed.ready:
            # a reservation tried before counted these GPUs as nobody's, the next pass counts
            # them as a run's that ends when expected (``reservations_move``)
            self.changed_after_hold |= bool(self.hold_tries)
            self._start(w, claimed.placement(), counted=True, note="; on the GPUs it claimed")
            return
        placement = self._fit(w)
        if placement is not None:
            if claimed is not None:  # it fits elsewhere now: its claim is free for others
                self._give_back(claimed)
            self._start(w, placement, counted=claimed is not None)
            return
        if claimed is not None:
            self._wait_on_claim(w, claimed)
            return
        if self.policy == "fairshare" and w.min_runtime > 0:
            victims = self._victims(w)
            if victims is not None:
                self._claim(w, victims)
                return
        if self.holds_left > 0 and w.gpus < self.nohold:
            self._hold(w)
            return
        self._wait(w, self._why(w))

    def _wait(self, w: Workload, wait: Wait) -> None:
        self.out.waits[w.id] = wait

    # -- claims carried from the previous pass ------------------------------------------------

    def take_claims(self, claims: list[Claim]) -> None:
        """Set aside the GPUs of every claim whose claimant still waits for allocated time. A
        claim ends when its workload is no longer pending, or when its hosts left service."""
        if not claims:
            return
        pending = self.state.pending
        if not isinstance(pending, PendingQueue):
            pending = {w.id: w for w in pending}
        floor = self.floor
        # oldest first, and in the previous pass's order among equals: the GPUs free first go to
        # the claims that set them aside first
        for claim in sorted(claims, key=lambda c: c.since):
            w = pending.get(claim.workload_id)
            if w is None or w.min_runtime <= 0 or w.id in self.claimed:
                continue
            if not all(
                h in floor.size and len(floor.free[h]) + len(floor.releasing[h]) >= n
                for h, n in claim.gpus
            ):
                continue
            taken = [(h, *floor.claim(h, n)) for h, n in claim.gpus]
            self.claimed[w.id] = _Claimed(claim, taken)
            self.claimed_now |= claim.since >= self.now
            self._note_claimant(w)
            self._move(w.budget, claim.total)

    def _note_claimant(self, w: Workload) -> None:
        key, last = submission_order(w), self.claimants.get(w.budget)
        if last is None or key > last:
            self.claimants[w.budget] = key

    def _give_back(self, claimed: _Claimed) -> None:
        """Free the GPUs of a claim whose claimant fits elsewhere: work walked after it finds
        them free, work walked before it only in the next pass (``gives_back_room``), and a
        reservation tried before counted them as claimed (``reservations_move``)."""
        for host, free, releasing in claimed.taken:
            self.floor.unclaim(host, free, releasing)
            self.given_back.add(host)
        self.nofit_given_back = self.nofit
        self.changed_after_hold |= bool(self.hold_tries)

    def _wait_on_claim(self, w: Workload, claimed: _Claimed) -> None:
        claim = claimed.claim
        self.out.claims.append(claim)
        hosts = claim.hosts
        until = self._released_by(hosts)
        why = (
            f"waiting for {quantity(claim.total, 'GPU')} on {' '.join(hosts)} claimed for it since "
            f"{clock(claim.since)}: preempted runs release them by {clock(until)}"
        )
        self._wait(w, Wait(why, "claim", hosts, until))

    def _released_by(self, hosts: tuple[str, ...]) -> float:
        """When the runs being released on ``hosts`` are stopped at the latest."""
        release = self._releases()
        return max((max(release[h].values()) for h in hosts if h in release), default=self.now)

    def _released_at(self, host: str, index: int) -> float:
        """When GPU ``index`` of ``host``, being released, is free: its run's grace period
        ends then, whenever the pass is made."""
        return self._releases()[host][index]

    def _releases(self) -> dict[str, dict[int, float]]:
        if self._release is None:
            self._release = {}
            for run in self.state.running:
                if run.signalled_at is not None:
                    self._releasing(run, run.grace_ends(self.params))
            for d in self.out.of(Preempt):
                self._releasing(d.run, self.now + self.params.grace_for(d.run.workload))
        return self._release

    def _releasing(self, run: Run, until: float) -> None:
        for host, indices in run.placement.slots:
            self._release.setdefault(host, {}).update(dict.fromkeys(indices, until))

    # -- start -----------------------------------------------------------------------------

    def _ends(self, w: Workload) -> float:
        """When ``w`` would be out of the way of a reservation if started now."""
        if w.min_runtime <= 0 and self.holder_preempts:
            return self.now  # the holder may preempt unallocated work whenever it likes
        return self.now + span(w)

    def _fit(self, w: Workload):
        g = w.gpus
        if g < self.nofit:
            placement = place(g, self.floor)
            if placement is not None:
                return placement
            self.nofit = g
        if self.floor.held and g <= self._held_room():
            ends = self._ends(w)
            if ends <= self._held_until():
                placement = place(g, self.floor, ends)  # backfill
                if placement is None:
                    self.nobackfill = min(self.nobackfill, g)
                return placement
        return None

    def _held_until(self) -> float:
        """When the last reservation on held hosts starts, recomputed only after a change."""
        floor = self.floor
        if self._until_seen[0] != floor.generation:
            self._until_seen = (floor.generation, max(floor.held.values(), default=-math.inf))
        return self._until_seen[1]

    def _held_room(self) -> int:
        """Free GPUs on held hosts (a bound for backfill), recomputed only after a change."""
        floor = self.floor
        if self._room_seen[0] != floor.generation:
            self._room_seen = (floor.generation, floor.free_on(floor.held))
        return self._room_seen[1]

    def _start(self, w: Workload, placement: Placement, counted: bool = False,
               note: str = "") -> None:
        """Start ``w``; ``counted``: its GPUs are already in the holdings (it had a claim)."""
        self.floor.occupy(placement)
        run = Run(w, self.now, placement, self.now + w.min_runtime)
        for host, indices in placement.slots:
            self.started.setdefault(host, []).append((run, indices))
        held = self.floor.held
        backfill = bool(held) and not held.keys().isdisjoint(placement.hosts)
        hosts = " ".join(placement.hosts)
        if w.min_runtime <= 0:
            why = f"started on {hosts}: unallocated, uses idle GPUs until allocated work needs them"
        elif self.policy == "fairshare":
            why = f"started on {hosts}: {self._label(w.budget)} of entitlement{note}"
        else:
            why = f"started on {hosts} ({self.policy})"
        if backfill:
            why += f"; backfilled, out of the way before the reservation for {self.holders[0]}"
            self.changed_after_hold = True  # in time, but the held hosts are no longer as free
        if self.policy == "quota" and w.min_runtime > 0:
            self.in_use[w.budget] = self.in_use.get(w.budget, 0) + w.gpus
        if w.min_runtime > 0 and not counted:
            self._move(w.budget, w.gpus)
            self.gained.add(w.budget)
        self.out.decisions.append(Start(w, placement, why))

    def _within_quota(self, w: Workload) -> bool:
        used = self.in_use.get(w.budget, 0)
        quota = self.quota.get(w.budget, 0.0)
        if used + w.gpus <= quota + 1e-9:
            return True
        why = f"{w.budget} at its quota: {used} of {quota:g} GPUs in use, needs {w.gpus} more"
        self._wait(w, Wait(why, "quota"))
        return False

    # -- preempt -------------------------------------------------------------------------------

    def _victims(self, w: Workload) -> Victims | None:
        g = w.gpus
        # a held host is open to it if it is out of the way in time, grace period included
        ends = self._ends(w) + self.params.grace if self.floor.held else math.inf
        if self._found_nothing(w.budget, g, ends):
            return None  # a request of its budget no larger, with no fewer hosts, found none
        block = self._refusal(w.budget, g, ends)
        if block is None:
            found, block = self._search(w, ends)
            if block is None:
                return found
        # a victim there was, but the final-share rule kept it: that is the reason it waits
        self.share_blocked[w.id] = block
        self.blocked_budgets.add(w.budget)
        return None

    def _search(self, w: Workload, ends: float) -> tuple[Victims | None, FinalShareBlock | None]:
        """The victims of ``w``'s search, out of the way by ``ends``, and the final-share block
        that kept them from it, if one did. What it teaches about its budget's other searches is
        recorded: one that found no victims or was refused is not made again on this floor and
        holdings (``_made``), and one that found none at all is one larger requests of its
        budget and kind skip (``_found_nothing``), in this pass and the next
        (``Board.found_nothing``)."""
        rules = self.rules
        board = rules.board(self.floor)
        # a search of its budget that found nothing in an earlier pass may still hold
        found = None if board.finds_nothing(w, ends) else victims_for(w, self.floor, rules, ends)
        # a run the final-share rule kept from this search, if one was (taken: a later search
        # for the same id, as searches made ahead of their turn are, must not read it)
        refused = rules.blocked.pop(w.id, None)
        # each victim alone may keep to the final-share rule while the set does not
        block = refused if found is None else rules.final_share_block(w, found.runs)
        if found is not None and block is None:
            return found, None
        self._searched[w.budget, w.gpus, self._opening(ends)] = (self._seen(), block)
        if block is None:  # no victims at all
            board.found_nothing(w, ends)
            kind = search_kind(w.budget, w.gpus, self.floor)
            wide, narrow = self.cannot_preempt.get(kind, _NEVER)
            if self._held_closed(ends):
                narrow = min(narrow, w.gpus)
            else:
                wide = min(wide, w.gpus)
            self.cannot_preempt[kind] = (wide, narrow)
        return found, block

    def _seen(self) -> tuple[int, int]:
        """The floor and holdings a search is made on: it ends the same while they stay."""
        return self.floor.generation, self._moved

    def _made(self, budget: str, g: int, opening: float) -> tuple | None:
        """(floor and holdings, final-share block or None) of the victim search of ``budget``
        for ``g`` GPUs with the held hosts from ``opening`` open, if made on this floor and
        holdings: a search depends on the request only through these, so it ends the same."""
        memo = self._searched.get((budget, g, opening))
        return memo if memo is not None and memo[0] == self._seen() else None

    def _refusal(self, budget: str, g: int, ends: float) -> FinalShareBlock | None:
        """The final-share block that kept victims from the same search on this floor and
        holdings, if it did (a search that found none without one is among ``_found_nothing``'s
        records)."""
        made = self._made(budget, g, self._opening(ends))
        return None if made is None else made[1]

    def requeued_wait(self) -> bool:
        """Whether every workload a Stop of this pass requeued would only wait in the next
        pass at this instant (``Pass.requeued_wait``): under fair share ranked by a standing
        (which the requeued work cannot change within the instant), each walks after the
        first reservation this pass tried (before it, it might hold hosts itself), and
        ``_settled`` gives it a wait on the floor as this pass leaves it, which is the floor
        the next pass walks it on. A driver requeues it with the work it has left, which may
        be any shorter: it is judged as if it had none left, when held hosts are the most
        open to it (a longer request may only backfill and preempt on fewer hosts)."""
        requeued = [d.run.workload for d in self.out.decisions
                    if isinstance(d, Stop) and d.requeue]
        if not requeued or self.ranked_by is None or not self.hold_tries:
            return False
        ranked = order_key(self.ranked_by)
        first = ranked(self.hold_tries[0][0])
        return all(ranked(w) > first
                   and self._settled(replace(w, duration=0.0), record=False) is not None
                   for w in requeued)

    def reservations_move(self) -> bool:
        """Whether a reservation this pass tried would come out otherwise on the floor as the
        pass leaves it, which is what the next pass at this instant tries it on: the same
        requesters try in the same order, and the first that holds hosts is the last to try.
        Only a claim changed after the first try can make it so, or work that backfilled the
        held hosts: it is out of the way in time, but other hosts may now free as soon and
        be chosen instead (``changed_after_hold``)."""
        if not self.changed_after_hold:
            return False
        for w, made in self.hold_tries:
            if self._reservation(w, ()) != made:
                return True
            if made is not None:
                return False
        return False

    def gives_back_room(self) -> bool:
        """Whether the GPUs of claims given back may be room for work walked before them, or
        for other claims (``Pass.claims_open_room``): the floor the pass leaves is the floor
        the next pass at this instant walks that work on. They may be when

        * a host given back is held: its room for backfill grew;
        * a claim waiting for GPUs being released on a host given back may be set aside free
          GPUs there, free now or set aside for a claim made later in the pass (the next pass
          sets aside free GPUs first, and for the oldest claims first, ``take_claims``);
        * the smallest size that did not fit when the last claim was given back (``nofit``)
          fits now: every workload walked before it that did not start is at least that large,
          and a size that does not fit leaves no larger one room;
        * a host given back offers enough to a search that found no victims or was refused
          (``_searched``), counting unallocated work started there since: every other host
          offers no more than when the search was made, since the rest of a walk takes GPUs
          and only give-backs free them."""
        hosts = self.given_back
        if not hosts:
            return False
        floor = self.floor
        if not hosts.isdisjoint(floor.held):
            return True
        waiting = [self.claimed[c.workload_id] for c in self.out.claims]
        free = {h for h in hosts if floor.free[h]}
        free.update(h for c in waiting for h, indices, _ in c.taken if indices and h in hosts)
        if any(not c.ready and any(h in free for h, *_ in c.taken) for c in waiting):
            return True
        if self.nofit_given_back < math.inf and place(self.nofit_given_back, floor) is not None:
            return True
        if not self._searched:
            return False
        board = self.rules.board(floor)
        started = {h: sum(len(indices) for run, indices in self.started.get(h, ())
                          if run.workload.min_runtime <= 0) for h in hosts}
        searched = {(budget, g) for budget, g, _ in self._searched}  # each opening's alike here
        return any(board.offers(_stand_in(budget, g), host, started[host])
                   for budget, g in searched for host in hosts)

    def lifts_share_block(self) -> bool:
        """Whether the GPUs this pass moved between branches may be what a final-share block
        waited for (``Pass.opens_room``). A block weighs the requester's branch against a
        victim's branch that ranks below it and is over its entitlement, where the two
        diverge: it lifts when the victim's side holds more or the requester's side less.
        GPUs given to a branch (starts, claims) lift it only if that branch ranks below the
        blocked budget and is over its entitlement; given to the requester's side they only
        tighten the rule, and elsewhere they leave both sides as they were. GPUs a claim
        takes from its victims lift none: a block that came before the claim belongs to
        work ranked above the claimant, which ranks above its victims, and a branch's work is
        ranked together, so a victim on the blocked side would put its claimant there too,
        whose gain makes up for the loss (a block after the claim was judged on the GPUs
        already moved)."""
        blocked = self.blocked_budgets
        if not blocked or not self.gained:
            return False
        # a block came from the rules, so the standing they rank by is there
        standing, threshold = self.standing, 1.0 + self.params.hysteresis
        rank, diverge, over = standing.rank_of, standing.diverge, standing.ratio
        return any(rank(b) > rank(r) and over(diverge(r, b)[1]) > threshold
                   for r in blocked for b in self.gained)

    def _found_nothing(self, budget: str, g: int, ends: float) -> bool:
        """Whether a request of ``budget`` for ``g`` GPUs, out of the way by ``ends``, can
        skip its victim search: a request of the budget no larger, of the same kind, found no
        victims on this pass's floor with every host open to it, or with the held hosts closed
        to it as they are to this one. The kinds are requests on one host and requests larger
        than any host, on whole hosts: those may empty hosts too small for a request of the
        other kind. Fewer GPUs to free and more hosts to free them on only add choices;
        a hold closes hosts to later requests and opens none (those out of the way in time see
        every host, as before it), so no hold makes a recorded verdict wrong."""
        wide, narrow = self.cannot_preempt.get(search_kind(budget, g, self.floor), _NEVER)
        return g >= wide or (g >= narrow and self._held_closed(ends))

    def _held_closed(self, ends: float) -> bool:
        """Whether the held hosts are closed to a request out of the way by ``ends``: it would
        not be gone before the reservation starts (``victims_for``'s rule)."""
        return bool(self.floor.held) and ends > self._held_until()

    def _opening(self, ends: float) -> float:
        """The earliest reservation a requester out of the way by ``ends`` may still use: the
        hosts open to it are exactly those held from then on or not held at all. A pass makes
        one reservation, so every held host is held from the same moment."""
        if self.floor.held and not self._held_closed(ends):
            return self._held_until()
        return math.inf

    def _claim(self, w: Workload, victims: Victims) -> None:
        floor = self.floor
        before = sum(len(floor.free[h]) + len(floor.releasing[h]) for h in victims.hosts)
        for run in victims.runs:
            self.out.decisions.append(Preempt(run, self.rules.reason(w, run), w.id))
            if self._release is not None:
                self._releasing(run, self.now + self.params.grace_for(run.workload))
            floor.release(run)
            if run.workload.min_runtime > 0:
                self._move(run.workload.budget, -run.gpus)
        left, gpus, taken = w.gpus, [], []
        for host in victims.hosts:
            n = min(left, floor.size[host])
            taken.append((host, *floor.claim(host, n)))
            gpus.append((host, n))
            left -= n
        displaced = sorted({r.workload.budget for r in victims.runs if r.workload.min_runtime > 0})
        claim = Claim(w.id, tuple(gpus), tuple(displaced), self.now)
        claimed = self.claimed[w.id] = _Claimed(claim, taken)
        self._note_claimant(w)
        self._move(w.budget, w.gpus)
        self.gained.add(w.budget)
        self.out.claims.append(claim)
        # victims keep their GPUs for a grace period, so the next pass at this instant finds
        # the claim waiting as this one left it, unless its GPUs are all free already, a
        # victim has no grace, or victims release more than it claims (a victim search counts
        # GPUs being released as free: work walked before it may claim the rest); and a
        # reservation tried before counted them as free or as runs that end when expected,
        # the next pass as claimed (``reservations_move``)
        releasing = floor.releasing
        self.claims_open_room |= claimed.ready or self.claimed_now or any(
            self.params.grace_for(run.workload) <= 0 or any(map(releasing.get, run.placement.hosts))
            for run in victims.runs)
        self.changed_after_hold |= bool(self.hold_tries)
        where = " ".join(victims.hosts)
        if victims.runs:
            why = (
                f"preempting {len(victims.runs)} run(s) on {where} to make room "
                f"({self._label(w.budget)} of entitlement)"
            )
            surplus = before + sum(r.gpus for r in victims.runs) - w.gpus
            if surplus > 0:
                whole = "whole-host placement" if w.gpus > floor.largest else "runs end whole"
                why += f"; {whole}: frees {quantity(surplus, 'GPU')} more than it needs"
        else:
            why = f"waiting for GPUs on {where} being released by preempted runs"
        self._wait(w, Wait(why, "claim", tuple(victims.hosts), self._released_by(victims.hosts)))

    # -- reserve -------------------------------------------------------------------------------

    def _preempts_unallocated(self, holder: Workload) -> bool:
        """Whether ``holder`` may preempt unallocated work on the hosts it holds once its
        reservation starts (allocated work under fair share): such work is out of its way at
        once."""
        return holder.min_runtime > 0 and self.policy == "fairshare"

    def _free_at(self, run: Run, holder: Workload) -> tuple[float, bool]:
        """When ``run`` is expected to be out of the way of ``holder``, and whether that is
        known (an expected duration, or work the holder may preempt) or only its protection:
        at the earliest now (``_expected_free``, which may be past)."""
        t, known = self._expected_free(run, holder)
        return max(self.now, t), known

    def _expected_free(self, run: Run, holder: Workload) -> tuple[float, bool]:
        if run.workload.min_runtime <= 0 and self._preempts_unallocated(holder):
            return -math.inf, True  # the holder may preempt it: free now, whenever now is
        d = run.workload.duration
        if d is not None:
            return run.started + d, True
        return run.protected_until, False

    def _ready(self, host: str, holder: Workload, k: int) -> tuple[float, bool] | None:
        """When the ``k``-th GPU of ``host`` to be free for ``holder`` is expected free
        (``_free_at``; from 0, -1 the last), or None when fewer GPUs of it may be. What the runs
        on it give is kept across passes while they stay the same (a driver's ``EngineMemo``):
        it does not depend on when the pass is, but for runs expected free already, free now."""
        floor, now = self.floor, self.now
        releasing, started = floor.releasing[host], self.started.get(host, ())
        kept = self.release_times
        if kept is None or releasing or started:
            t = [(now, True)] * len(floor.free[host])
            t += [(self._released_at(host, i), True) for i in releasing]
            for run, idx in (*floor.runs[host], *started):
                t.extend([self._free_at(run, holder)] * len(idx))
            t.sort()
            return t[k] if -len(t) <= k < len(t) else None
        runs = floor.runs[host]
        preempts = self._preempts_unallocated(holder)
        memo = kept.get(host)
        if memo is None or memo[0] is not runs or memo[1] != preempts:
            times = []
            for run, idx in runs:
                times.extend([self._expected_free(run, holder)] * len(idx))
            times.sort()
            memo = kept[host] = (runs, preempts, times)
        times = memo[2]
        # sorted, the list is the free GPUs and the runs' GPUs expected free already, all at
        # now (those not known to be first), then the runs' other GPUs as kept
        free = len(floor.free[host])
        n = free + len(times)
        if k < 0:
            k += n
        if not 0 <= k < n:
            return None
        due = bisect_right(times, (now, True))
        if k >= free + due:
            return times[k - free]
        unknown = sum(not known for _, known in times[:due]) if due else 0
        return now, k >= unknown

    def _readiness(self, hosts: list[str], holder: Workload, k: int) -> dict[str, tuple]:
        """``_ready`` of each of ``hosts`` that has a ``k``-th GPU for ``holder``, asked of
        every host (a pass without a memo; with one, ``_ranked`` asks only what changed)."""
        out = {}
        for h in hosts:
            at = self._ready(h, holder, k)
            if at is not None:
                out[h] = at
        return out

    def _ranked(self, hosts: list[str], holder: Workload, k: int) -> dict[str, tuple]:
        """``_readiness(hosts, holder, k)``, read from the memo's ``_Ranking`` when the driver
        keeps one (the ranking's own dict when ``hosts`` is every host: not to be changed)."""
        if self.memo is None:
            return self._readiness(hosts, holder, k)
        plan, floor, now = self.plan, self.floor, self.now
        key = (k, self._preempts_unallocated(holder))
        ranking = self.memo.rankings.get(key)
        if ranking is None or ranking.changes is not plan.changes:
            ranking = self.memo.rankings[key] = _Ranking(plan.changes, floor.size)
        changes, ready = ranking.changes, ranking.ready
        releasing = {h for h, gpus in floor.releasing.items() if gpus}
        stale = ranking.stale
        stale.update(changes[ranking.seen:])
        ranking.seen = len(changes)
        stale |= floor.changed | releasing
        stale.update([h for h, at in ready.items() if at[0] <= now])  # "now" moves with the pass
        for h in stale:
            self._rank(ranking, h, holder, k)
        # what this pass changed, and GPUs being released, are asked again by the next pass
        ranking.stale = floor.changed | releasing
        if len(hosts) == len(floor.size):
            return ready
        return {h: ready[h] for h in hosts if h in ready}

    def _rank(self, ranking: _Ranking, host: str, holder: Workload, k: int) -> None:
        at = self._ready(host, holder, k)
        if at is None:
            ranking.ready.pop(host, None)
        else:
            ranking.ready[host] = at

    def _reservation(self, w: Workload, held: Collection[str]
                     ) -> tuple[list[str], float, bool] | None:
        """The hosts that will free soonest for ``w`` among those not ``held``, when, and
        whether that is known (``_free_at``); None when no hosts could be."""
        floor, g = self.floor, w.gpus
        least = min(g, floor.largest)
        candidates = [h for h, size in floor.size.items() if size >= least and h not in held]
        if g <= floor.largest:
            ready = self._ranked(candidates, w, g - 1)
            if not ready:
                return None
            (until, known), host = min(zip(ready.values(), ready, strict=True))
            return [host], until, known
        ready = dict(self._ranked(candidates, w, -1))
        ready.update((h, (self.now, True)) for h in candidates if h not in ready)
        cost = {h: (v[0],) for h, v in ready.items()}
        chosen = choose_hosts(g, {h: v[0] for h, v in ready.items()}, floor.size,
                              floor.group, cost)
        if chosen is None:
            return None
        until, known = max(ready[h] for h in chosen)
        return sorted(chosen), until, all(ready[h][1] for h in chosen if ready[h][0] == until)

    def _hold(self, w: Workload) -> None:
        reservation = self._reservation(w, self.floor.held)
        self.hold_tries.append((w, reservation))
        if reservation is None:
            self.nohold = w.gpus
            self._wait(w, self._why(w))
            return
        floor = self.floor
        hosts, until, known = reservation
        blocked = self._why(w)  # before the hold, so it counts the held hosts' free GPUs
        for h in hosts:
            floor.hold(h, until)
        self.holds_left -= 1
        self.holders.append(w.label)
        self.holder_preempts = self._preempts_unallocated(w)
        if known:
            when = f"expected free at {clock(until)}"
        elif until > self.now:
            when = f"expected free: unknown, no expected duration; protected until {clock(until)}"
        else:
            when = "expected free: unknown, no expected duration; past its minimum runtime"
        why = (
            f"{blocked.reason}; holding {' '.join(hosts)} ({when}): only work that ends in "
            "time may backfill them"
        )
        self.out.decisions.append(Hold(w, why, tuple(hosts), until))
        self._wait(w, Wait(why, "held", tuple(hosts), until if known else None))

    # -- explain ---------------------------------------------------------------------------------

    def _open_free(self) -> int:
        if self._free_seen[0] != self.floor.generation:
            self._free_seen = (self.floor.generation, self.floor.open_free)
        return self._free_seen[1]

    def _label(self, budget: str) -> str:
        """ "prog-a/proj-a1 at 40%": the budget's own usage over its own entitlement."""
        label = self._labels.get(budget)
        if label is None:
            s = self.state
            r = ratio(s.usage.get(budget, 0.0), self.tree.fraction(budget), s.capacity)
            label = self._labels[budget] = f"{budget} at {percent(r)}"
        return label

    def _why(self, w: Workload) -> Wait:
        block = self.share_blocked.get(w.id)
        if block is not None:
            return self._refused(w.gpus, block)
        return self._shared_why(w.gpus, w.min_runtime <= 0, w.budget)

    def _refused(self, g: int, block: FinalShareBlock) -> Wait:
        """The wait of every workload of size ``g`` the final-share rule keeps back by ``block``:
        one block keeps many workloads of a budget and size back in a pass."""
        return self._refused_at(g, self._open_free(), block)

    def _refused_at(self, g: int, free: int, block: FinalShareBlock) -> Wait:
        """``_refused`` where the walk had ``free`` GPUs open."""
        key = (g, free, block)
        wait = self._whys.get(key)
        if wait is None:
            why = f"{self._shape(g)}, {free} free; {block.reason()}"
            wait = self._whys[key] = Wait(why, "final share", (), None)
        return wait

    def _wait_from(self, g: int, unallocated: bool, budget: str | None, free: int, held: bool,
                   block: FinalShareBlock | None) -> Wait:
        """The wait of a workload of a line the walk left (``_left_waits``): kept back by the
        final-share rule, or as every workload of its size, kind and budget there."""
        if block is not None:
            return self._refused_at(g, free, block)
        return self._wait_as(g, unallocated, budget, free, held)

    def _shared_why(self, g: int, unallocated: bool, budget: str | None) -> Wait:
        """The wait of every workload of this size, kind and budget (None: unallocated work,
        whose wait names no budget) that nothing else explains."""
        # the reason depends only on the size, allocated or not, the budget (its label), the
        # free GPUs and whether hosts are held (holders[0] never changes once set)
        return self._wait_as(g, unallocated, budget, self._open_free(), bool(self.holders))

    def _wait_as(self, g: int, unallocated: bool, budget: str | None, free: int,
                 held: bool) -> Wait:
        """``_shared_why`` where the walk had ``free`` GPUs open and hosts ``held`` or not."""
        key = (g, unallocated, budget, free, held)
        wait = self._whys.get(key)
        if wait is None:
            wait = self._whys[key] = self._format_why(g, unallocated, budget, free, held)
        return wait

    def _shape(self, g: int) -> str:
        needs = f"needs {quantity(g, 'GPU')}"
        return needs if g <= self.floor.largest else f"{needs} on whole hosts"

    def _format_why(self, g: int, unallocated: bool, budget: str | None, free: int,
                    held: bool) -> Wait:
        shape = self._shape(g)
        if unallocated:
            why, blocker = f"unallocated: {shape}, {free} idle", "unallocated"
        elif self.policy == "fairshare":
            why = (
                f"{shape}, {free} free; no run it may preempt "
                f"({self._label(budget)} of entitlement)"
            )
            blocker = "no victim"
        else:
            why, blocker = f"{shape}, {free} free ({self.policy}: no preemption)", "no preemption"
        hosts: tuple[str, ...] = ()
        if held:
            why += f"; hosts held for {self.holders[0]}"
            hosts = tuple(sorted(self.floor.held))
        return Wait(why, blocker, hosts, None)


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


_EPOCH_2001 = 1e9  # times below this are a simulation's seconds from its start


def clock(t: float) -> str:
    """A moment as people read it on a timeline: "14:05 UTC" for live (epoch) times, "day 3
    14:05" for a simulation's seconds from its start."""
    if t < _EPOCH_2001:
        day, rest = divmod(int(t), 86400)
        return f"day {day} {rest // 3600:02d}:{rest % 3600 // 60:02d}"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))
