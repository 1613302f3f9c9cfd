"""When a driver runs another pass at the same instant (``Pass.opens_room``).

Both drivers repeat a pass at one instant only while the last one could open room for the
next. The property that makes this safe: a pass that does not open room is a fixed point, so
the live loop's next tick (the same state, a few seconds later) and the simulator, which skips
that tick, decide the same.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from test_pass_properties import scenarios

from scheduler.engine import (
    BudgetTree,
    ClusterState,
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
            if d.requeue:
                pending.append(d.run.workload)
        elif isinstance(d, HostDrained):
            by_name[d.host.name].state = HostState.DRAINED
    return ClusterState(state.now, hosts, running, pending, state.usage, state.capacity,
                        result.claims)


CHANGES = (Start, Preempt, Stop, HostDrained)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_a_pass_that_opens_no_room_is_followed_by_one_that_decides_nothing(case):
    state, tree, params = case
    for _ in range(6):  # to the end of the instant, as the drivers run it
        first = schedule(state, tree, params)
        state = apply(state, first)
        if not first.opens_room:
            break
    else:
        return  # still opening room after the drivers' limit: the next tick takes over
    second = schedule(state, tree, params)
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == []
    assert second.claims_changed == []


def _host(name: str = "h0") -> Host:
    return Host(name, 8)


def _workload(wid: str, budget: str, gpus: int, min_runtime: float = 600.0) -> Workload:
    return Workload(wid, budget, gpus, min_runtime, True, submitted=float(len(wid)))


def test_starts_on_free_gpus_alone_open_no_room():
    tree = BudgetTree.from_shares({"a": 1})
    state = ClusterState(NOW, [_host()], [], [_workload("w1", "a", 2), _workload("w2", "a", 4)])
    result = schedule(state, tree, Params())
    assert len(result.of(Start)) == 2
    assert not result.opens_room


def test_a_requeued_workload_opens_room_for_the_next_pass():
    tree = BudgetTree.from_shares({"a": 1})
    w = _workload("w1", "a", 8)
    run = Run(w, NOW - 1000, Placement((("h0", tuple(range(8))),)), NOW - 400, NOW - 400)
    result = schedule(ClusterState(NOW, [_host()], [run], []), tree, Params())
    assert [d.requeue for d in result.of(Stop)] == [True]
    assert result.opens_room


def test_a_signal_for_a_claim_opens_room_for_the_next_pass():
    tree = BudgetTree.from_shares({"a": 1, "b": 1})
    squatter = Run(_workload("u1", "b", 8, min_runtime=0.0), NOW - 100,
                   Placement((("h0", tuple(range(8))),)), NOW - 100)
    state = ClusterState(NOW, [_host()], [squatter], [_workload("w1", "a", 8)])
    result = schedule(state, tree, Params())
    assert [d.run for d in result.of(Preempt)] == [squatter]
    assert result.claims_changed == ["w1"]
    assert result.opens_room


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
    assert first.share_blocked == ["big"]
    assert [d.workload.id for d in first.of(Start)] == ["small"]
    assert not first.opens_room
    second = schedule(apply(state, first), FINAL_SHARE, Params())
    assert [d for d in second.decisions if isinstance(d, CHANGES)] == []


def test_a_start_in_the_branch_a_final_share_block_weighed_opens_room():
    small = replace(_workload("small", "a1", 1), submitted=2.0, duration=600.0)
    first = schedule(_blocked_by_the_final_share_rule(small), FINAL_SHARE, Params())
    assert first.share_blocked == ["big"]
    assert [d.workload.id for d in first.of(Start)] == ["small"]
    assert first.opens_room
