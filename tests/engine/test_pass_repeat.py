"""When a driver runs another pass at the same instant (``Pass.opens_room``).

Both drivers repeat a pass at one instant only while the last one could open room for the
next. The property that makes this safe: a pass that does not open room is a fixed point, so
the live loop's next tick (the same state, a few seconds later) and the simulator, which skips
that tick, decide the same.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_pass_properties import contended, scenarios

from scheduler.engine import (
    PASSES_PER_INSTANT,
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
    Run,
    Start,
    Stop,
    Workload,
    schedule,
)
from scheduler.engine.simulate import SimConfig, simulate
from scheduler.engine.traces import TraceJob, parse_cluster

NOW = 100_000.0


def apply(state: ClusterState, result: Pass) -> ClusterState:
    """The state the next pass at the same instant sees, as a driver applies ``result``."""
    running, pending = list(state.running), list(state.pending)
    hosts = [replace(h) for h in state.hosts]
    by_name = {h.name: h for h in hosts}
    for d in result.decisions:
        if isinstance(d, Start):
            pending.remove(d.workload)
            running.append(Run(d.workload, state.now, d.placement,
                               state.now + d.workload.min_runtime))
        elif isinstance(d, Preempt):
            running[running.index(d.run)] = replace(d.run, signalled_at=state.now)
        elif isinstance(d, Stop):
            running.remove(d.run)
            if d.requeue:  # with the work it has left, as the simulator requeues it
                w, done = d.run.workload, d.run.signalled_at - d.run.started
                left = None if w.duration is None else max(0.0, w.duration - done)
                pending.append(replace(w, duration=left))
        elif isinstance(d, HostDrained):
            by_name[d.host.name].state = HostState.DRAINED
    return ClusterState(state.now, hosts, running, pending, state.usage, state.capacity,
                        result.claims)


CHANGES = (Start, Preempt, Stop, HostDrained)


def _to_end_of_instant(state: ClusterState, tree: BudgetTree, params: Params
                       ) -> tuple[ClusterState, Pass] | None:
    """The state after the passes the drivers run at ``state.now``, and the last of them; None
    when they would still open room after the drivers' limit (the next tick takes over)."""
    for _ in range(PASSES_PER_INSTANT):
        result = schedule(state, tree, params)
        state = apply(state, result)
        if not result.opens_room:
            return state, result
    return None


def _decides_nothing_after(settled: tuple[ClusterState, Pass], tree: BudgetTree,
                           params: Params) -> None:
    state, last = settled
    again = schedule(state, tree, params)
    assert [d for d in again.decisions if isinstance(d, CHANGES)] == []
    assert again.claims == last.claims


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_a_pass_that_opens_no_room_is_followed_by_one_that_decides_nothing(case):
    state, tree, params = case
    settled = _to_end_of_instant(state, tree, params)
    assume(settled is not None)
    _decides_nothing_after(settled, tree, params)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contended(), st.data())
def test_claims_carried_to_an_instant_where_runs_ended_settle_as_well(case, data):
    """Claims made at one instant are carried to one where some runs have ended: claimants
    that fit elsewhere then give their claims back to work walked before them, and to other
    claims on the same hosts."""
    state, tree, params = case
    settled = _to_end_of_instant(state, tree, params)
    assume(settled is not None and settled[0].claims)
    state = settled[0]
    ended = [r for r in state.running if r.signalled_at is None and data.draw(st.booleans())]
    later = ClusterState(state.now + 10.0, state.hosts,
                         [r for r in state.running if r not in ended], state.pending,
                         state.usage, state.capacity, state.claims)
    settled = _to_end_of_instant(later, tree, params)
    assume(settled is not None)
    _decides_nothing_after(settled, tree, params)


def _host(name: str = "h0") -> Host:
    return Host(name, 8)


def _workload(wid: str, budget: str, gpus: int, min_runtime: float = 600.0) -> Workload:
    return Workload(wid, budget, gpus, min_runtime, True, submitted=float(len(wid)))


def _kept_back(result) -> list[str]:
    """The waiting workloads whose wait names the final-share rule."""
    return sorted(wid for wid, wait in result.waits.items() if "final-share rule" in wait.reason)


def test_starts_on_free_gpus_alone_open_no_room():
    tree = BudgetTree.from_shares({"a": 1})
    state = ClusterState(NOW, [_host()], [], [_workload("w1", "a", 2), _workload("w2", "a", 4)])
    result = schedule(state, tree, Params())
    assert len(result.of(Start)) == 2
    assert not result.opens_room


def test_a_requeued_workload_that_could_start_opens_room_for_the_next_pass():
    tree = BudgetTree.from_shares({"a": 1})
    w = _workload("w1", "a", 8)
    run = Run(w, NOW - 1000, Placement((("h0", tuple(range(8))),)), NOW - 400, NOW - 400)
    result = schedule(ClusterState(NOW, [_host()], [run], []), tree, Params())
    assert [d.requeue for d in result.of(Stop)] == [True]
    assert result.opens_room


def _squatted() -> ClusterState:
    """w1 (allocated, 8 GPUs) finds h0 taken by unallocated work it may preempt."""
    squatter = Run(_workload("u1", "b", 8, min_runtime=0.0), NOW - 100,
                   Placement((("h0", tuple(range(8))),)), NOW - 100)
    return ClusterState(NOW, [_host()], [squatter], [_workload("w1", "a", 8)])


SQUATTED = BudgetTree.from_shares({"a": 1, "b": 1})
CLAIMS = BudgetTree.from_shares({"a": 1, "b": 1, "c": 1})
CLAIMS_B = BudgetTree.from_shares({"b0": 1, "b1": 1, "b2": 1})


def test_a_claim_whose_victim_keeps_its_gpus_for_a_grace_period_opens_no_room():
    state = _squatted()
    first = schedule(state, SQUATTED, Params())
    assert [d.run.workload.id for d in first.of(Preempt)] == ["u1"]
    assert not first.opens_room
    second = schedule(apply(state, first), SQUATTED, Params())
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == []
    assert second.claims == first.claims


def test_a_claim_whose_victim_has_no_grace_period_opens_room_to_start_on_it():
    state, params = _squatted(), Params(unallocated_grace=0.0)
    first = schedule(state, SQUATTED, params)
    assert first.opens_room
    second = schedule(apply(state, first), SQUATTED, params)
    assert [(type(d).__name__, d.run.workload.id if isinstance(d, Stop) else d.workload.id)
            for d in second.decisions] == [("Stop", "u1"), ("Start", "w1")]


def test_a_claim_on_gpus_all_free_already_opens_room_to_start_on_it():
    """w1 needs 12 GPUs on whole hosts: h0 is free, h1 half free and half being released. It
    claims both hosts, and what it needs there is free already."""
    leaving = Run(_workload("u1", "b", 4, min_runtime=0.0), NOW - 100,
                  Placement((("h1", (0, 1, 2, 3)),)), NOW - 100, signalled_at=NOW - 10)
    state = ClusterState(NOW, [_host("h0"), _host("h1")], [leaving], [_workload("w1", "a", 12)])
    first = schedule(state, SQUATTED, Params())
    assert [(c.workload_id, c.gpus) for c in first.claims] == [("w1", (("h0", 8), ("h1", 4)))]
    assert first.opens_room
    second = schedule(apply(state, first), SQUATTED, Params())
    assert [d.workload.id for d in second.of(Start)] == ["w1"]


def test_victims_releasing_more_than_their_claimant_claims_open_room_to_claim_the_rest():
    """a ranks first but holds twice its GPU share, so the final-share rule keeps its request
    from c's run on h0, and it holds h1 (free soonest); b, within its share, preempts that run
    for one GPU, and the seven others it releases are there for a's request to claim."""
    def on(wid: str, budget: str, host: str, protected_until: float, ends: float) -> Run:
        return Run(replace(_workload(wid, budget, 8), duration=ends - NOW + 50_000),
                   NOW - 50_000, Placement(((host, tuple(range(8))),)), protected_until)

    runs = [on("v", "c", "h0", NOW - 40_000, NOW + 50_000),
            on("x", "a", "h1", NOW + 3600, NOW + 100),
            on("y", "a", "h2", NOW + 3600, NOW + 50_000)]
    pending = [_workload("e", "a", 1), replace(_workload("r", "b", 1), submitted=9.0)]
    capacity = 24 * 86400.0
    usage = {"a": 0.0, "b": 0.1 * capacity / 3, "c": 2 * capacity / 3}
    state = ClusterState(NOW, [_host("h0"), _host("h1"), _host("h2")], runs, pending, usage,
                         capacity)
    first = schedule(state, CLAIMS, Params())
    assert _kept_back(first) == ["e"]
    assert [d.hosts for d in first.of(Hold)] == [("h1",)]
    assert [(d.run.workload.id, d.for_workload_id) for d in first.of(Preempt)] == [("v", "r")]
    assert first.opens_room
    second = schedule(apply(state, first), CLAIMS, Params())
    assert [(c.workload_id, c.gpus) for c in second.claims] == [("e", (("h0", 1),)),
                                                                 ("r", (("h0", 1),))]


def _claim_given_back(*pending: Workload, leaving: int = 8) -> ClusterState:
    """w1 (4 GPUs) carries a claim on h0, where ``leaving`` GPUs are being released and any
    others are a protected run's; h1 (4 GPUs) is free now, so w1 starts there and gives its
    claim back. h2's protected run ends soonest, before h0's GPUs are released."""
    runs = [Run(_workload("u1", "b", leaving, min_runtime=0.0), NOW - 100,
                Placement((("h0", tuple(range(leaving))),)), NOW - 100, signalled_at=NOW - 10),
            Run(replace(_workload("q1", "b", 8), duration=110.0), NOW - 100,
                Placement((("h2", tuple(range(8))),)), NOW + 10)]
    if leaving < 8:
        runs.append(Run(_workload("p1", "b", 8 - leaving), NOW - 100,
                        Placement((("h0", tuple(range(leaving, 8))),)), NOW + 500))
    return ClusterState(NOW, [_host("h0"), Host("h1", 4), _host("h2")], runs,
                        [*pending, _workload("w1", "a", 4)],
                        claims=[Claim("w1", (("h0", 4),), (), NOW - 10)])


def test_a_claim_given_back_opens_room_to_work_walked_before_it_that_may_claim_it():
    """w0 (8 GPUs, submitted first) finds only 4 GPUs of h0 open to a search, the others
    claimed, and holds h2; once w1 gives them back, h0 offers it all 8 (and h2 is still
    free first: the reservation stays)."""
    state = _claim_given_back(replace(_workload("w0", "a", 8), submitted=0.0))
    first = schedule(state, SQUATTED, Params())
    assert [(d.workload.id, d.placement.hosts) for d in first.of(Start)] == [("w1", ("h1",))]
    assert [(d.workload.id, d.hosts) for d in first.of(Hold)] == [("w0", ("h2",))]
    assert first.opens_room
    second = schedule(apply(state, first), SQUATTED, Params())
    assert [(c.workload_id, c.gpus) for c in second.claims] == [("w0", (("h0", 8),))]


def test_a_claim_given_back_with_nobody_walked_before_it_opens_no_room():
    state = _claim_given_back()
    first = schedule(state, SQUATTED, Params())
    assert [(d.workload.id, d.placement.hosts) for d in first.of(Start)] == [("w1", ("h1",))]
    assert first.claims == []
    assert not first.opens_room
    second = schedule(apply(state, first), SQUATTED, Params())
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == second.claims == []


def test_a_claim_given_back_too_small_for_work_walked_before_it_opens_no_room():
    """h0's other 4 GPUs are a protected run's: given back, it offers w0 4 of the 8 it needs,
    and h2, which w0 holds, is still free first."""
    state = _claim_given_back(replace(_workload("w0", "a", 8), submitted=0.0), leaving=4)
    first = schedule(state, SQUATTED, Params())
    assert [(d.workload.id, d.placement.hosts) for d in first.of(Start)] == [("w1", ("h1",))]
    assert [(d.workload.id, d.hosts) for d in first.of(Hold)] == [("w0", ("h2",))]
    assert not first.opens_room
    second = schedule(apply(state, first), SQUATTED, Params())
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == second.claims == []


def test_work_backfilled_on_held_hosts_that_moves_the_reservation_opens_room():
    """big (16 GPUs) holds group g0, where h0 is free now and h1 frees at +300 s, over g1,
    where both hosts free at +250 s; small backfills h0 until +300 s, in time, and leaves
    g1 the group that frees sooner: the next pass holds it instead."""
    def protected(wid: str, host: str, until: float) -> Run:
        return Run(_workload(wid, "b", 8), NOW - 100, Placement(((host, tuple(range(8))),)), until)

    hosts = [Host(name, 8, group=group)
             for name, group in (("h0", "g0"), ("h1", "g0"), ("h2", "g1"), ("h3", "g1"))]
    runs = [protected("p1", "h1", NOW + 300), protected("p2", "h2", NOW + 250),
            protected("p3", "h3", NOW + 250)]
    big = replace(_workload("big", "a", 16), submitted=0.0)
    small = replace(_workload("small", "a", 8, min_runtime=300.0), submitted=1.0)
    state = ClusterState(NOW, hosts, runs, [big, small], {"a": 0.0, "b": 5e5}, 1e6)
    first = schedule(state, SQUATTED, Params())
    assert [d.hosts for d in first.of(Hold)] == [("h0", "h1")]
    assert [d.placement.hosts for d in first.of(Start)] == [("h0",)]
    assert first.opens_room
    second = schedule(apply(state, first), SQUATTED, Params())
    assert [d.hosts for d in second.of(Hold)] == [("h2", "h3")]


def test_a_final_share_block_on_a_size_whose_work_all_had_its_turn_lifts_nothing():
    """b0's line is left once it can do nothing more; the search its 1-GPU requests would make
    there is refused, but both had their turn (one started, the other claimed GPUs). A walk
    that considers every workload finds no block, and neither may one that leaves the line
    early."""
    def run(wid: str, budget: str, host: str, gpus: tuple[int, ...], min_runtime: float = 0.0,
            protected_for: float = -100.0, started: float = NOW - 100) -> Run:
        w = replace(_workload(wid, budget, len(gpus), min_runtime), resumable=False)
        return Run(w, started, Placement(((host, gpus),)), NOW + protected_for)

    runs = [run("r0", "b0", "h0", (0,)), run("r1", "b0", "h0", tuple(range(1, 8))),
            run("r3", "b1", "h1", (1, 2), 600.0, -400.0, NOW - 1000),
            run("r4", "b0", "h1", (3, 4, 5, 6)), run("r5", "b0", "h1", (7,)),
            run("r6", "b0", "h2", tuple(range(8)), 600.0, 500.0),
            run("r7", "b0", "h3", (0, 1)), run("r8", "b0", "h3", (2, 3), 600.0, 500.0),
            run("r9", "b0", "h3", (4, 5, 6, 7), 600.0, 500.0)]
    pending = [replace(_workload(wid, budget, gpus), submitted=0.0, resumable=False)
               for wid, budget, gpus in (("w0", "b0", 1), ("w1", "b2", 1), ("w2", "b0", 2),
                                         ("w3", "b0", 4), ("w4", "b0", 16), ("w5", "b0", 4),
                                         ("w13", "b0", 1), ("w14", "b1", 1))]
    state = ClusterState(NOW, [_host(f"h{i}") for i in range(4)], runs, pending,
                         {"b0": 0.0, "b1": 5e5, "b2": 0.0}, 1e6)
    result = schedule(state, CLAIMS_B, Params())
    assert [d.workload.id for d in result.of(Hold)] == ["w4"]
    assert _kept_back(result) == []
    assert not result.lifts_share_block


def test_a_claim_made_beside_one_carried_from_the_same_instant_opens_room():
    """x claimed 4 GPUs of h0 earlier at this instant: its 2 free ones and 2 being released.
    y (ranked first) claims 2 more being released; the next pass takes y's claim first, on
    the free GPUs, and starts it."""
    leaving = Run(_workload("u1", "b", 6, min_runtime=0.0), NOW - 100,
                  Placement((("h0", tuple(range(2, 8))),)), NOW - 100, signalled_at=NOW - 10)
    y, x = _workload("y", "a", 2), replace(_workload("x", "b", 4), submitted=0.0)
    state = ClusterState(NOW, [_host("h0")], [leaving], [y, x], {"a": 0.0, "b": 5e5}, 1e6,
                         [Claim("x", (("h0", 4),), (), NOW)])
    first = schedule(state, SQUATTED, Params())
    assert [c.workload_id for c in first.claims] == ["y", "x"]
    assert first.opens_room
    second = schedule(apply(state, first), SQUATTED, Params())
    assert [d.workload.id for d in second.of(Start)] == ["y"]


def _claim_ready_beside_a_reservation(claimant_budget: str) -> ClusterState:
    """The victim on h0 (not resumable: nothing is requeued) is past its grace period, so the
    pass stops it and w1's claim there is ready; ``big`` (budget a, idle in the window) finds
    no victim and holds a host. ``claimant_budget`` a: w1, submitted first, walks first; b
    (over-used): w1 walks after ``big``'s reservation."""
    victim = Run(replace(_workload("u1", "c", 8, min_runtime=0.0), resumable=False), NOW - 1000,
                 Placement((("h0", tuple(range(8))),)), NOW - 1000, signalled_at=NOW - 400)
    protected = Run(replace(_workload("p1", "c", 8), duration=5000.0), NOW - 100,
                    Placement((("h1", tuple(range(8))),)), NOW + 500)
    claimant = replace(_workload("w1", claimant_budget, 8), submitted=0.5)
    claim = Claim("w1", (("h0", 8),), (), NOW - 400)
    big = replace(_workload("big", "a", 8), submitted=1.0)
    usage = {"a": 0.0, "b": 5e5, "c": 5e5}
    return ClusterState(NOW, [_host("h0"), _host("h1")], [victim, protected], [big, claimant],
                        usage, 1e6, [claim])


def test_a_claim_started_after_a_reservation_was_tried_opens_room():
    first = schedule(_claim_ready_beside_a_reservation("b"), CLAIMS, Params())
    assert [type(d).__name__ for d in first.decisions] == ["Stop", "Hold", "Start"]
    assert first.opens_room


def test_a_claim_started_before_any_reservation_was_tried_opens_no_room():
    state = _claim_ready_beside_a_reservation("a")
    first = schedule(state, CLAIMS, Params())
    assert [type(d).__name__ for d in first.decisions] == ["Stop", "Start", "Hold"]
    assert not first.opens_room
    second = schedule(apply(state, first), CLAIMS, Params())
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == []


def _requeued_beside_a_reservation(budget: str, submitted: float) -> ClusterState:
    """The run on h0 (resumable, of ``budget``) is past its grace period: the pass stops and
    requeues it, and w1 starts on its claim there. ``big`` (budget a, idle in the window,
    submitted at 0) finds no victim and holds h1; c's other request finds no victim either."""
    requeued = replace(_workload("u1", budget, 8), submitted=submitted)
    leaving = Run(requeued, NOW - 1000,
                  Placement((("h0", tuple(range(8))),)), NOW - 400, signalled_at=NOW - 400)
    busy = Run(replace(_workload("p1", "b", 8), duration=1000.0), NOW - 100,
               Placement((("h1", tuple(range(8))),)), NOW + 3500)
    claimant = replace(_workload("w1", "b", 8, min_runtime=3600.0), submitted=0.5)
    pending = [replace(_workload("big", "a", 8), submitted=0.0), claimant,
               replace(_workload("c1", "c", 8), submitted=0.2)]
    usage = {"a": 0.0, "b": 5e4, "c": 5e5}
    return ClusterState(NOW, [_host("h0"), _host("h1")], [leaving, busy], pending, usage, 1e6,
                        [Claim("w1", (("h0", 8),), (), NOW - 400)])


def test_work_requeued_behind_the_reservation_that_would_only_wait_opens_no_room():
    state = _requeued_beside_a_reservation("c", 2.0)
    first = schedule(state, CLAIMS, Params())
    assert [type(d).__name__ for d in first.decisions] == ["Stop", "Hold", "Start"]
    assert not first.opens_room
    second = schedule(apply(state, first), CLAIMS, Params())
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == []


def test_work_requeued_ahead_of_the_reservation_opens_room():
    first = schedule(_requeued_beside_a_reservation("a", -1.0), CLAIMS, Params())
    assert [type(d).__name__ for d in first.decisions] == ["Stop", "Hold", "Start"]
    assert first.opens_room


def test_work_requeued_with_little_left_to_do_opens_room_to_backfill():
    """``big`` holds h1 and h2 until h2's runs end; u1 would outlast that with all its work,
    but requeued with what is left it ends in time, and backfills the free half of h2."""
    def busy(wid: str, host: str, gpus: range, ends: float) -> Run:
        w = replace(_workload(wid, "b", len(gpus)), duration=ends - (NOW - 100))
        return Run(w, NOW - 100, Placement(((host, tuple(gpus)),)), NOW + 3500)

    u1 = replace(_workload("u1", "c", 4), duration=1500.0, submitted=3.0)
    leaving = Run(u1, NOW - 1000, Placement((("h0", (0, 1, 2, 3)),)), NOW - 400,
                  signalled_at=NOW - 400)
    runs = [leaving, busy("q", "h0", range(4, 8), NOW + 9000),
            busy("p1", "h1", range(8), NOW + 900), busy("p2", "h2", range(4), NOW + 900)]
    pending = [replace(_workload("big", "a", 16), submitted=0.0),
               replace(_workload("w1", "b", 4, min_runtime=3600.0), submitted=0.5),
               replace(_workload("c1", "c", 4), duration=5000.0, submitted=0.2)]
    state = ClusterState(NOW, [_host("h0"), _host("h1"), _host("h2")], runs, pending,
                         {"a": 0.0, "b": 5e4, "c": 5e5}, 1e6,
                         [Claim("w1", (("h0", 4),), (), NOW - 400)])
    first = schedule(state, CLAIMS, Params())
    assert [d.hosts for d in first.of(Hold)] == [("h1", "h2")]
    assert first.opens_room
    second = schedule(apply(state, first), CLAIMS, Params())
    assert [(d.workload.id, d.placement.hosts) for d in second.of(Start)] == [("u1", ("h2",))]


def test_arrivals_that_all_fit_cost_one_pass_each_in_the_simulator():
    jobs = [TraceJob(f"j{i}", 600.0 * i, 300.0, 1 + i % 4, "a", "alice", 300.0 * (i % 2), True)
            for i in range(40)]
    result = simulate(jobs, {"a": 1}, parse_cluster("4x8"), SimConfig())
    assert all(r.wait_s == 0 for r in result.jobs)
    assert result.summary["passes"] == 40


def _blocked_by_the_final_share_rule(small: Workload) -> ClusterState:
    """b (idle in the window) holds 47 of the 72 GPUs with protected runs; a1 (far over its
    entitlement) holds 24 with runs past their protection; c, at half its entitlement, holds
    none. b's 8-GPU request may not take an a1 run: b would hold 55 GPUs (123% of its 65/105
    share), above its own share and above a1 (16 GPUs, 67% of its 35/105). ``small`` fits on
    the one free GPU."""
    hosts = [_host(f"h{i}") for i in range(9)]

    def on(w: Workload, host: str, gpus: int, started: float) -> Run:
        return Run(w, started, Placement(((host, tuple(range(gpus))),)),
                   started + w.min_runtime)

    runs = [on(replace(_workload(f"b{i}", "b", 8), duration=36_000.0), f"h{i}", 8, NOW)
            for i in range(5)]
    runs += [on(replace(_workload(f"a{i}", "a1", 8), duration=40_000.0), f"h{i}", 8, 0.0)
             for i in range(5, 8)]
    runs.append(on(replace(_workload("b8", "b", 7), duration=36_000.0), "h8", 7, NOW))
    capacity = 72 * 7 * 86400.0
    big = replace(_workload("big", "b", 8), submitted=1.0)
    usage = {"a1": capacity, "b": 0.0, "c": 0.5 * capacity * 5 / 105}
    return ClusterState(NOW, hosts, runs, [big, small], usage, capacity)


FINAL_SHARE = BudgetTree.from_shares({"a1": 35, "b": 65, "c": 5})


@pytest.mark.parametrize("budget", [
    pytest.param("b", id="in-the-blocked-budgets-own-branch"),
    pytest.param("c", id="in-a-branch-within-its-entitlement"),
])
def test_a_start_the_final_share_block_did_not_weigh_opens_no_room(budget):
    small = replace(_workload("small", budget, 1), submitted=2.0, duration=600.0)
    state = _blocked_by_the_final_share_rule(small)
    first = schedule(state, FINAL_SHARE, Params())
    assert _kept_back(first) == ["big"]
    assert [d.workload.id for d in first.of(Start)] == ["small"]
    assert not first.opens_room
    second = schedule(apply(state, first), FINAL_SHARE, Params())
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == []


def test_a_start_in_the_branch_a_final_share_block_weighed_opens_room():
    small = replace(_workload("small", "a1", 1), submitted=2.0, duration=600.0)
    first = schedule(_blocked_by_the_final_share_rule(small), FINAL_SHARE, Params())
    assert _kept_back(first) == ["big"]
    assert [d.workload.id for d in first.of(Start)] == ["small"]
    assert first.opens_room
