"""Waiting and preemption reasons: honest about what is known, naming workloads the way people
do, and a test of when a reason changed enough to be worth a new timeline event."""

from __future__ import annotations

from engine_builders import HOUR, hosts, run, state, tree

from scheduler.engine import Hold, Params, Wait, Workload, clock, materially_changed, schedule

NOW = 10 * HOUR
TWO = tree(a=1, b=1, a__a1=1, b__b1=1)


def _named(id, budget, gpus, min_runtime=HOUR, duration=None, name=""):
    return Workload(id, budget, gpus, min_runtime, True, 0.0, duration=duration, name=name)


def _blocked_by_protected_work(duration):
    """b/b1's protected run (started 1 h ago, protected for 4 h) fills the only host; a/a1
    asks for the whole host and may not preempt it: it holds the host."""
    young = run(_named("3008", "b/b1", 8, min_runtime=4 * HOUR, duration=duration,
                       name="train-7"), "h0", range(8), started=NOW - HOUR)
    return state(NOW, hosts(1), [young], [_named("42", "a/a1", 8)],
                 usage={"b/b1": 1e6}, capacity=2e6)


def test_without_an_expected_duration_the_hold_says_so_and_gives_the_protection():
    result = schedule(_blocked_by_protected_work(duration=None), TWO, Params())
    [hold] = result.of(Hold)
    # protected until NOW - 1 h + 4 h = 13:00 on day 0
    assert "no expected duration; protected until day 0 13:00" in hold.reason
    assert "free in 0 s" not in hold.reason
    assert result.waits["42"].until is None  # nothing known: no estimate to compare later


def test_with_an_expected_duration_the_hold_gives_the_time_it_ends():
    result = schedule(_blocked_by_protected_work(duration=2 * HOUR), TWO, Params())
    [hold] = result.of(Hold)
    # started 09:00, runs 2 h: free at 11:00
    assert "expected free at day 0 11:00" in hold.reason
    assert result.waits["42"] == Wait(hold.reason, "held", ("h0",), 11 * HOUR)


def test_a_preemption_names_the_workload_it_makes_room_for_by_number_and_name():
    victim = run(_named("7", "b/b1", 8), "h0", range(8), started=0.0)
    busy = [run(_named(f"busy{i}", "b/b1", 8), f"h{i}", range(8), started=NOW)
            for i in (1, 2)]
    req = _named("3008", "a/a1", 8, name="train-7")
    st = state(NOW, hosts(3), [victim, *busy], [req], usage={"b/b1": 9e5}, capacity=1e6)
    [preempt] = schedule(st, TWO, Params()).decisions
    assert preempt.reason.startswith("preempted to make room for workload #3008 (train-7) of a/a1")


def test_live_times_read_as_utc_clock_times():
    assert clock(1_800_000_000.0) == "2027-01-15 08:00 UTC"


def test_the_same_blocker_on_the_same_hosts_is_not_a_new_event():
    before = Wait("needs 8 GPUs, 2 free; holding h0", "held", ("h0",), 1000.0)
    after = Wait("needs 8 GPUs, 3 free; holding h0", "held", ("h0",), 1005.0)
    # 400 s were left at 600: moving by 5 s is ~1%
    assert not materially_changed(before, after, now=600.0)


def test_an_estimate_moving_by_more_than_ten_percent_is_a_new_event():
    before = Wait("holding h0 (expected free at 00:16)", "held", ("h0",), 1000.0)
    after = Wait("holding h0 (expected free at 00:17)", "held", ("h0",), 1050.0)
    # 50 s of the 400 s left: 12.5%
    assert materially_changed(before, after, now=600.0)


def test_other_hosts_are_a_new_event():
    before = Wait("holding h0", "held", ("h0",), 1000.0)
    assert materially_changed(before, Wait("holding h1", "held", ("h1",), 1000.0), now=600.0)


def test_the_same_sentence_is_not_a_new_event_whatever_moved_behind_it():
    why = "needs 16 GPUs on whole hosts, 0 free; no run it may preempt; hosts held for #2664"
    before = Wait(why, "no victim", ("gpu-120",))
    assert not materially_changed(before, Wait(why, "no victim", ("gpu-001",)), now=600.0)


def test_a_different_blocker_is_a_new_event():
    before = Wait("held", "held", ("h0",), 1000.0)
    assert materially_changed(before, Wait("claim", "claim", ("h0",), 1000.0), now=600.0)


def test_the_first_reason_is_always_an_event():
    assert materially_changed(None, Wait("no victim", "no victim"), now=0.0)


def test_a_waiting_reason_is_unchanged_in_substance_from_one_pass_to_the_next():
    st = _blocked_by_protected_work(duration=None)
    first = schedule(st, TWO, Params()).waits["42"]
    st.now += 5.0  # the live loop's next tick: nothing happened
    second = schedule(st, TWO, Params()).waits["42"]
    assert not materially_changed(first, second, now=st.now)
