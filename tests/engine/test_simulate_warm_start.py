"""The simulator's warm start (``InitialState``): the replay begins from the cluster as it
was, not empty. One host of 4 GPUs, one budget ``a``, times in hours from the start (0):

* R: 4 GPUs, started at -1, protected until +1, 3 h of work from its start: ends at +2;
* Q: 4 GPUs, submitted at -0.5, 1 h of work, waiting at 0: starts at +2, ends at +3.
"""

from __future__ import annotations

import pytest

from scheduler.engine.model import HostState, Params
from scheduler.engine.repairs import RepairFigure
from scheduler.engine.simulate import (
    HOST_BACK,
    HOST_FAIL,
    InitialState,
    RunningAtStart,
    SimConfig,
    Simulator,
)
from scheduler.engine.traces import TraceJob, parse_cluster

HOUR = 3600.0


def _replay(initial: InitialState, until: float = 4 * HOUR, host_events=()):
    """A replay of what really happened: hosts come back only by their HOST_BACK events."""
    config = SimConfig(params=Params(), until=until, host_events=host_events, repairs=False)
    sim = Simulator([], {"a": 1}, parse_cluster("1x4"), config, initial)
    return sim, sim.run()


def _running_r(resumable: bool = False) -> RunningAtStart:
    job = TraceJob("R", -2 * HOUR, 3 * HOUR, 4, "a", "researcher", 2 * HOUR, resumable)
    return RunningAtStart(job, -HOUR, (("h0000", (0, 1, 2, 3)),), HOUR)


def _queued_q() -> TraceJob:
    return TraceJob("Q", -0.5 * HOUR, HOUR, 4, "a", "researcher", HOUR, True)


def test_work_running_at_the_start_keeps_its_gpus_and_ends_when_its_work_does():
    _, result = _replay(InitialState(running=[_running_r()], queued=[_queued_q()]))
    jobs = {r.job.job_id: r for r in result.jobs}
    assert (jobs["R"].state, jobs["R"].end_time) == ("completed", 2 * HOUR)
    assert (jobs["Q"].first_start, jobs["Q"].end_time) == (2 * HOUR, 3 * HOUR)
    assert jobs["Q"].wait_s == 2 * HOUR  # waiting from the start of the replay


def test_delivered_counts_only_the_replayed_period():
    _, result = _replay(InitialState(running=[_running_r()], queued=[_queued_q()]))
    # R from 0 to 2 h and Q from 2 to 3 h, 4 GPUs each: 12 GPU-h (R's hour before 0 is not)
    delivered = result.summary["budgets"]["a"]["delivered_total_gpu_s"]
    assert delivered / HOUR == pytest.approx(12)


def test_the_usage_window_starts_with_what_was_charged_before():
    charged = [("a", 2, -5 * HOUR, -3 * HOUR)]  # 4 GPU-h, plus R's hour before 0: 4 GPU-h
    sim, _ = _replay(InitialState(running=[_running_r()], charged=charged), until=0.0)
    assert sim.ledger.window_value("a", 0.0) / HOUR == pytest.approx(8)


def test_a_host_out_of_service_at_the_start_stays_out_until_it_really_came_back():
    initial = InitialState(queued=[_queued_q()], hosts={"h0000": HostState.REPAIRING})
    _, result = _replay(initial, host_events=((1.5 * HOUR, "h0000", HOST_BACK),))
    assert result.jobs[0].first_start == 1.5 * HOUR


def test_a_real_failure_in_the_period_loses_the_runs_on_the_host():
    initial = InitialState(running=[_running_r()])
    _, result = _replay(initial, host_events=((0.5 * HOUR, "h0000", HOST_FAIL),
                                              (HOUR, "h0000", HOST_BACK)))
    r = result.jobs[0]
    assert (r.state, r.end_time) == ("failed", 0.5 * HOUR)  # not resumable: lost
    assert result.summary["budgets"]["a"]["delivered_total_gpu_s"] / HOUR == pytest.approx(2)


def test_the_repair_figure_compares_with_every_failure_needing_a_human():
    # 20 repairs, 3 by a human: 15%; a human for every failure would have made 20, so 85% fewer
    figure = RepairFigure(repairs=20, human=3)
    assert (figure.share, figure.baseline_human) == (pytest.approx(0.15), 20)
    assert figure.fewer_human == pytest.approx(0.85)


def test_no_repairs_give_no_figure_rather_than_zero():
    assert (RepairFigure(0, 0).share, RepairFigure(0, 0).fewer_human) == (None, None)
