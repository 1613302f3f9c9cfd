"""The simulator's progress hook: how far a replay has gone, told a bounded number of times,
increasing, ending with 1.0, without changing the replay."""

from __future__ import annotations

import pytest

from scheduler.engine.simulate import SimConfig, Simulator, simulate
from scheduler.engine.traces import TraceJob, parse_cluster


def trace(n: int) -> list[TraceJob]:
    """`n` one-GPU jobs of 50 s, one every 100 s on a host of 4 GPUs (no queueing)."""
    return [TraceJob(f"j{k}", 100.0 * k, 50.0, 1, "a", "u", 60.0, True) for k in range(n)]


def test_the_clock_over_until_in_steps_of_at_least_the_step():
    seen: list[float] = []
    sim = Simulator(trace(1000), {"a": 1}, parse_cluster("1x4"), SimConfig(until=100_000.0))
    sim.run(progress=seen.append, progress_step=0.05)
    assert seen[-1] == 1.0
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    told = seen[:-1]  # before the last call, 1.0
    steps = [b - a for a, b in zip([0.0, *told[:-1]], told, strict=True)]
    assert all(step >= 0.05 - 1e-12 for step in steps)
    assert 15 <= len(seen) <= 21  # about 1 / 0.05 calls, 2,000 events notwithstanding
    # the clock at the k-th call: a submission or a completion at 100 s x k or 100 s x k + 50
    assert seen[0] == pytest.approx(0.05)


def test_without_until_the_share_of_the_trace_submitted():
    seen: list[float] = []
    simulate(trace(10), {"a": 1}, parse_cluster("1x4"), SimConfig(), progress=seen.append)
    assert seen == pytest.approx([0.1 * k for k in range(1, 10)] + [1.0])


def test_the_hook_changes_nothing():
    jobs = [TraceJob("a1", 0, 100, 4, "a", "u", 100, True),
            TraceJob("b1", 10, 50, 2, "b", "u", 50, True)]
    quiet = simulate(jobs, {"a": 1, "b": 1}, parse_cluster("1x4"), SimConfig())
    told = simulate(jobs, {"a": 1, "b": 1}, parse_cluster("1x4"), SimConfig(),
                    progress=lambda p: None)
    assert [(r.first_start, r.end_time, r.wait_s) for r in told.jobs] == [
        (r.first_start, r.end_time, r.wait_s) for r in quiet.jobs]
    assert told.summary["preemptions"] == quiet.summary["preemptions"]


def test_an_empty_trace_still_ends_at_one():
    seen: list[float] = []
    simulate([], {"a": 1}, parse_cluster("1x4"), SimConfig(until=3600.0), progress=seen.append)
    assert seen == [1.0]
