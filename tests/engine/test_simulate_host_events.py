"""Host events in the simulator (``SimConfig.host_events``): one list, one code path, whether
they are scheduled (the equivalence test's failure and drain) or what really happened (the
what-if's replay). One host of 8 GPUs, budget ``a``; times in hours."""

from __future__ import annotations

import pytest

from scheduler.engine.model import Params
from scheduler.engine.simulate import (
    HOST_BACK,
    HOST_DRAIN,
    HOST_FAIL,
    SimConfig,
    SimulationError,
    Simulator,
)
from scheduler.engine.traces import TraceJob, parse_cluster

HOUR = 3600.0


def _job(jid: str, submitted: float, hours: float, resumable: bool = True) -> TraceJob:
    return TraceJob(jid, submitted * HOUR, hours * HOUR, 8, "a", "alice", HOUR, resumable)


def _run(jobs, host_events, repairs=True, repair_hours=4.0):
    config = SimConfig(params=Params(), until=24 * HOUR, host_events=host_events,
                       repairs=repairs, repair_time=repair_hours * HOUR, repair_fail=0.0)
    sim = Simulator(jobs, {"a": 1}, parse_cluster("1x8"), config)
    return sim, {r.job.job_id: r for r in sim.run().jobs}


def test_a_failure_requeues_resumable_work_which_restarts_after_the_simulated_repair():
    sim, jobs = _run([_job("R", 0, 3)], ((1 * HOUR, "h0000", HOST_FAIL),))
    assert sim.failures["hard"] == 1
    # fails at 1 h, just as it checkpointed (hourly): 2 h of work left, host back at 1 + 4 h
    assert jobs["R"].state == "completed"
    assert jobs["R"].end_time == pytest.approx(7 * HOUR)


def test_a_drained_host_without_simulated_repairs_stays_out_until_it_really_came_back():
    events = ((1 * HOUR, "h0000", HOST_DRAIN), (10 * HOUR, "h0000", HOST_BACK))
    _, jobs = _run([_job("R", 0, 0.5), _job("Q", 2, 1)], events, repairs=False)
    assert jobs["Q"].first_start == 10 * HOUR


def test_a_drained_host_with_simulated_repairs_returns_after_the_repair_time():
    events = ((1 * HOUR, "h0000", HOST_DRAIN),)
    _, jobs = _run([_job("R", 0, 0.5), _job("Q", 2, 1)], events, repair_hours=2.0)
    # empty at once when drained at 1 h, repaired by 3 h
    assert jobs["Q"].first_start == 3 * HOUR


def test_a_failure_of_a_host_already_out_changes_nothing():
    events = ((1 * HOUR, "h0000", HOST_DRAIN), (2 * HOUR, "h0000", HOST_FAIL),
              (5 * HOUR, "h0000", HOST_BACK))
    sim, jobs = _run([_job("R", 0, 0.5), _job("Q", 2, 1)], events, repairs=False)
    assert sim.failures["hard"] == 0
    assert jobs["Q"].first_start == 5 * HOUR


@pytest.mark.parametrize("event", [(HOUR, "h9999", HOST_FAIL), (HOUR, "h0000", "explode")])
def test_a_host_event_naming_no_host_or_no_kind_is_refused(event):
    with pytest.raises(SimulationError, match="no such host or kind"):
        _run([_job("R", 0, 1)], (event,))
