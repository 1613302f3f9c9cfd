"""Work that joins a settled cluster (``EngineMemo.joining_wait``): told its wait without a pass
only where a pass would decide nothing but that wait."""

from __future__ import annotations

import math
from dataclasses import replace

from engine_builders import HOUR, hosts, job, run, tree
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_pass_properties import NOW, contended, scenarios
from test_pass_repeat import apply

from scheduler.engine import (
    PASSES_PER_INSTANT,
    ClusterState,
    EngineMemo,
    Hold,
    Host,
    HostState,
    Params,
    schedule,
)
from scheduler.engine.pending import PendingQueue
from scheduler.engine.scheduling import next_event


def _settle(state, tree_, params):
    """Passes at one instant with one memo, their decisions applied as a driver applies them
    (``test_pass_repeat.apply``), until one opens no room for the next: the settled pass, the
    state it left and the memo, or None if the instant does not settle within the driver's
    passes."""
    memo = EngineMemo()
    for _ in range(PASSES_PER_INSTANT):
        last = schedule(replace(state, memo=memo), tree_, params)
        state = apply(state, last)
        if not last.opens_room:
            return last, state, memo
    return None


def _holds(result):
    return [(d.workload.id, d.hosts) for d in result.decisions if isinstance(d, Hold)]


def _quiet_until(state, params) -> float | None:
    """Until when a driver may tell joining work its wait without a pass: the next time a pass
    could decide something new by itself (``next_event``), or a running workload's expected end
    (its protection's end without one), which moves a reservation when it passes. The driver
    that tells waits (the simulator) ends every run at its expected end, an outside event."""
    ends = [r.started + r.workload.duration if r.workload.duration is not None
            else r.protected_until for r in state.running]
    due = next_event(state, params)
    soonest = min([t for t in ends if t > state.now] + [math.inf if due is None else due])
    return None if soonest == math.inf else soonest


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(contended(), scenarios().map(lambda c: (*c[:2], Params()))), st.data())
def test_a_workload_told_its_wait_on_joining_is_what_a_pass_made_then_gives_it(case, data):
    """Where a workload that joins a settled cluster is told its wait, a pass made then (on a
    plain list, with no memo) starts, claims, preempts and stops nothing, holds what the
    settled pass held, gives the newcomer that wait and everybody else the wait a pass
    without the newcomer gives them; a while later too, as long as no protection or grace
    period runs out in between."""
    state, tree_, params = case
    settled = _settle(state, tree_, params)
    assume(settled is not None)
    last, state, memo = settled
    assume(state.pending or case[0].pending)
    like = data.draw(st.sampled_from(list(state.pending) or list(case[0].pending)))
    newcomer = replace(like, id="newcomer", submitted=NOW + 1.0,
                       gpus=data.draw(st.sampled_from([like.gpus, 1, 2, 8])))
    told = memo.joining_wait(newcomer)
    assume(told is not None)
    due = _quiet_until(state, params)
    later = NOW + data.draw(st.sampled_from([0.0, 0.5])) * ((due or NOW + 600.0) - NOW)
    without = schedule(replace(state, now=later, pending=list(state.pending), memo=None),
                       tree_, params)
    joined = schedule(replace(state, now=later, pending=[*state.pending, newcomer], memo=None),
                      tree_, params)
    assert [d for d in joined.decisions if not isinstance(d, Hold)] == []
    assert _holds(joined) == _holds(last) == _holds(without)
    assert joined.waits.pop("newcomer") == told
    assert joined.waits == without.waits


def _full_cluster(*pending, free_on_h1: int = 0):
    """Two 8-GPU hosts full of protected runs of a/a1, far over its share; b/b1 under its share
    and d/d1 further over it than a/a1: nothing waiting can preempt them."""
    t = tree(a=40, a__a1=1, b=40, b__b1=1, d=20, d__d1=1)
    hs = hosts(2)
    running = [run(job("r0", "a/a1", 8, min_runtime=8 * HOUR, duration=10 * HOUR),
                   "h0", range(8), started=NOW - HOUR)]
    busy = 8 - free_on_h1
    running.append(run(job("r1", "a/a1", busy, min_runtime=8 * HOUR, duration=10 * HOUR),
                       "h1", range(busy), started=NOW - HOUR))
    usage = {"a/a1": 9e5, "b/b1": 1e4, "d/d1": 9e5}
    return ClusterState(NOW, hs, running, list(pending), usage, 1e6), t


def test_work_of_a_budget_that_found_no_victims_joining_behind_the_reservation_is_told():
    state, t = _full_cluster(job("b-big", "b/b1", 8, submitted=10.0, duration=HOUR),
                             job("a-old", "a/a1", 1, submitted=20.0, duration=HOUR))
    last, state, memo = _settle(state, t, Params())
    assert _holds(last) == [("b-big", ("h0",))]
    told = memo.joining_wait(job("a-late", "a/a1", 1, submitted=NOW, duration=HOUR))
    assert told is not None and told.blocker == "no victim"
    assert "hosts held for workload #b-big" in told.reason


def test_work_of_a_budget_that_made_no_search_is_not_told():
    state, t = _full_cluster(job("b-big", "b/b1", 8, submitted=10.0, duration=HOUR))
    _, state, memo = _settle(state, t, Params())
    # nothing of a/a1 waited: whether it may preempt is not known without a pass
    assert memo.joining_wait(job("a-late", "a/a1", 1, submitted=NOW, duration=HOUR)) is None


def test_work_ranked_before_the_reservations_holder_is_not_told():
    # b/b1 is under its share, so its work comes first, but 24 GPUs can never be held on two
    # hosts: a/a1's 8-GPU request holds h0 after it
    state, t = _full_cluster(job("b-huge", "b/b1", 24, submitted=5.0, duration=HOUR),
                             job("a-big", "a/a1", 8, submitted=10.0, duration=HOUR))
    last, state, memo = _settle(state, t, Params())
    assert _holds(last) == [("a-big", ("h0",))]
    assert "hosts held" not in last.waits["b-huge"].reason
    # walked before the reservation like b-huge, its wait would not name the held hosts
    assert memo.joining_wait(job("b-new", "b/b1", 24, submitted=NOW, duration=HOUR)) is None


def test_work_of_another_budget_joining_a_queue_ranked_without_a_standing_is_not_told():
    state, t = _full_cluster(job("a-big", "a/a1", 8, submitted=10.0, duration=HOUR))
    _, state, memo = _settle(state, t, Params())
    # one budget competed, so the pass ranked nobody; two would be ranked by their standing
    assert memo.joining_wait(job("d-new", "d/d1", 8, submitted=NOW, duration=HOUR)) is None


def test_work_that_fits_on_free_gpus_is_not_told():
    state, t = _full_cluster(job("b-big", "b/b1", 8, submitted=10.0, duration=HOUR),
                             free_on_h1=4)
    last, state, memo = _settle(state, t, Params())
    assert _holds(last) == [("b-big", ("h0",))]
    assert memo.joining_wait(job("a-small", "a/a1", 2, submitted=NOW, duration=HOUR)) is None


def test_nobody_is_told_after_a_pass_that_opened_room():
    state, t = _full_cluster(job("b-big", "b/b1", 8, submitted=10.0, duration=HOUR),
                             job("a-old", "a/a1", 1, submitted=20.0, duration=HOUR))
    state.hosts.append(Host("h2", 8, state=HostState.DRAINING))  # empty: drained in the pass
    memo = EngineMemo()
    result = schedule(replace(state, pending=PendingQueue(state.pending), memo=memo), t,
                      Params())
    assert result.opens_room
    assert memo.joining_wait(job("a-late", "a/a1", 1, submitted=NOW, duration=HOUR)) is None
