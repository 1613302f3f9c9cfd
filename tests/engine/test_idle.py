"""The idle policy: which idle runs are preempted, and why."""

from __future__ import annotations

from engine_builders import HOUR, hosts, job, run, state
from hypothesis import given
from hypothesis import strategies as st

from scheduler.engine.idle import IdlePolicy, idle_preemptions

POLICY = IdlePolicy(period=1800.0, threshold=0.10)
NOW = 10 * HOUR


def test_an_allocated_run_idle_for_the_period_past_its_minimum_runtime_is_preempted():
    r = run(job("w1", min_runtime=HOUR), "h0", [0], started=0.0)
    [decision] = idle_preemptions(state(NOW, hosts(1), [r]), {r: NOW - 1800}, POLICY)
    assert decision.run is r
    assert decision.reason == (
        "preempted by the cluster's idle policy: its 1 GPU(s) stayed below 10% busy for 30 min "
        "and it is past its minimum runtime of 60 min"
    )


def test_a_protected_idle_run_is_left_alone():
    r = run(job("w1", min_runtime=12 * HOUR), "h0", [0], started=0.0)
    assert idle_preemptions(state(NOW, hosts(1), [r]), {r: 0.0}, POLICY) == []


def test_idle_for_less_than_the_period_is_left_alone():
    r = run(job("w1"), "h0", [0], started=0.0)
    assert idle_preemptions(state(NOW, hosts(1), [r]), {r: NOW - 1799}, POLICY) == []


def test_unallocated_idle_work_is_left_alone():
    r = run(job("w1", min_runtime=0), "h0", [0], started=0.0)
    assert idle_preemptions(state(NOW, hosts(1), [r]), {r: 0.0}, POLICY) == []


def test_a_run_already_signalled_is_not_signalled_again():
    r = run(job("w1"), "h0", [0], started=0.0, signalled_at=NOW - 60)
    assert idle_preemptions(state(NOW, hosts(1), [r]), {r: 0.0}, POLICY) == []


def test_longest_idle_first():
    a = run(job("a"), "h0", [0], started=0.0)
    b = run(job("b"), "h0", [1], started=0.0)
    decisions = idle_preemptions(state(NOW, hosts(1), [a, b]), {a: NOW - 2000, b: NOW - 5000},
                                 POLICY)
    assert [d.run.workload.id for d in decisions] == ["b", "a"]


@given(st.lists(st.tuples(st.floats(0, 8 * HOUR), st.floats(0, 12 * HOUR),
                          st.floats(0, 10 * HOUR), st.booleans()), max_size=8))
def test_only_idle_long_enough_allocated_unsignalled_preemptible_runs_are_preempted(specs):
    runs, idle = [], {}
    for k, (min_runtime, started, since, signalled) in enumerate(specs):
        r = run(job(f"w{k}", min_runtime=min_runtime), "h0", [k], started=min(started, NOW),
                signalled_at=NOW if signalled else None)
        runs.append(r)
        idle[r] = since
    preempted = {id(d.run) for d in idle_preemptions(state(NOW, hosts(1, gpus=8), runs), idle,
                                                     POLICY)}
    for r in runs:
        eligible = (r.allocated and r.signalled_at is None and r.protected_until <= NOW
                    and NOW - idle[r] >= POLICY.period)
        assert (id(r) in preempted) == eligible
