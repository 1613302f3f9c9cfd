"""Squatting in the simulator: sessions left open hold idle GPUs; the idle policy takes them
back once past their minimum runtime, and the summary says how much it returned.

One host of 4 GPUs, one non-resumable 4-GPU workload "s" of 4 h with a 1 h minimum runtime,
every workload a session left open (idle share 1): its GPUs go idle ``after`` seconds into
the run (a seeded draw between 10 and 40 minutes). With the policy (30 min) it is signalled
at max(after + 30 min, 1 h) and stopped 5 min later (grace)."""

from __future__ import annotations

import pytest

from scheduler.engine.idle import IDLE_AFTER, IdlePolicy, goes_idle_after
from scheduler.engine.model import Params
from scheduler.engine.simulate import SimConfig, simulate
from scheduler.engine.traces import TraceJob, parse_cluster

HOUR = 3600.0
POLICY = IdlePolicy(period=1800.0, threshold=0.10)


def run(idle_share=1.0, policy=None, min_runtime=HOUR):
    jobs = [TraceJob("s", 0, 4 * HOUR, 4, "a", "u", min_runtime, False)]
    config = SimConfig(params=Params(grace=300), idle_share=idle_share, idle_policy=policy)
    return simulate(jobs, {"a": 1}, parse_cluster("1x4"), config)


def test_the_draw_lies_in_the_session_s_working_time():
    after = goes_idle_after(0, "s", 1.0)
    assert IDLE_AFTER[0] <= after <= IDLE_AFTER[1]
    assert goes_idle_after(0, "s", 0.0) is None


def test_without_the_policy_the_session_squats_to_its_end():
    after = goes_idle_after(0, "s", 1.0)
    idle = run().summary["idle"]
    assert idle["gpu_hours_idle"] == pytest.approx(4 * (4 * HOUR - after) / HOUR)
    assert (idle["gpu_hours_returned"], idle["preempted"]) == (0, 0)


def test_the_policy_returns_the_rest_of_the_squat():
    after = goes_idle_after(0, "s", 1.0)
    stopped = max(after + 1800, HOUR) + 300
    res = run(policy=POLICY)
    idle = res.summary["idle"]
    assert idle["preempted"] == 1
    assert idle["gpu_hours_returned"] == pytest.approx(4 * (4 * HOUR - stopped) / HOUR)
    assert idle["gpu_hours_idle"] == pytest.approx(4 * (stopped - after) / HOUR)
    [record] = res.jobs
    assert (record.state, record.end_time) == ("preempted", pytest.approx(stopped))


def test_the_policy_never_touches_a_protected_session():
    res = run(policy=POLICY, min_runtime=8 * HOUR)
    assert res.summary["idle"]["preempted"] == 0
    assert res.jobs[0].state == "completed"


def test_busy_workloads_are_never_idle():
    idle = run(idle_share=0.0, policy=POLICY).summary["idle"]
    assert (idle["gpu_hours_idle"], idle["preempted"]) == (0, 0)
