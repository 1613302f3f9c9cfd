"""One scheduling pass: order, starts, grace, drain, reservation, policies, reasons, events."""

from __future__ import annotations

from dataclasses import replace

from engine_builders import (
    HOUR,
    hosts,
    job,
    one_pass,
    preempted,
    run,
    started,
    state,
    tree,
)

from scheduler.engine import (
    EngineMemo,
    Hold,
    HostDrained,
    HostState,
    Params,
    Preempt,
    Run,
    Start,
    Stop,
    next_event,
    schedule,
)

NOW = 10 * HOUR
CAPACITY = 1000.0
TWO = tree(a=1, b=1, a__a1=1, b__b1=1)  # each leaf 50%: entitlement 500 GPU-s


def past(w, host, idx):
    return run(w, host, idx, started=0.0)


# -- starting work ---------------------------------------------------------------------------


def test_higher_ranked_budget_starts_first_when_only_one_fits():
    st = state(
        NOW,
        hosts(1),
        [],
        [job("a-job", "a/a1", gpus=8), job("b-job", "b/b1", gpus=8)],
        usage={"a/a1": 400.0, "b/b1": 100.0},
        capacity=CAPACITY,
    )
    result = one_pass(st, TWO)
    assert list(started(result)) == ["b-job"]
    assert result.order == ["b-job", "a-job"]


def test_start_reason_names_the_budget_and_its_ratio():
    st = state(NOW, hosts(1), [], [job("j", "b/b1")], usage={"b/b1": 100.0}, capacity=CAPACITY)
    [start] = one_pass(st, TWO).decisions
    assert start.reason == "started on h0: b/b1 at 20% of entitlement"


def test_unallocated_work_uses_idle_gpus_after_allocated_work():
    pending = [
        job("free", "a/a1", gpus=4, min_runtime=0, submitted=0),
        job("paid", "b/b1", gpus=6, submitted=5),
    ]
    result = one_pass(state(NOW, hosts(1), [], pending), TWO)
    assert list(started(result)) == ["paid"]
    assert "unallocated" in result.waiting["free"]


def test_no_start_on_hosts_that_are_not_available():
    host_list = hosts(2)
    host_list[0].state = HostState.REPAIRING
    host_list[1].state = HostState.DRAINING
    result = one_pass(state(NOW, host_list, [], [job("j")]), TWO)
    assert started(result) == {}
    assert "needs 1 GPU, 0 free" in result.waiting["j"]


def test_every_pending_workload_that_does_not_start_has_a_reason():
    pending = [job(f"j{i}", "a/a1" if i % 2 else "b/b1", gpus=4, submitted=i) for i in range(7)]
    result = one_pass(state(NOW, hosts(1), [], pending), TWO)
    ids = {w.id for w in pending}
    assert set(result.waiting) == ids - set(started(result))
    assert all(result.waiting.values())


# -- grace: Preempt, then Stop ------------------------------------------------------------------


def test_preempted_run_is_stopped_and_requeued_once_grace_is_over():
    leaving = run(job("r", "b/b1", resumable=True), "h0", [0], signalled_at=NOW - 300)
    [stop] = one_pass(state(NOW, hosts(1), [leaving], []), TWO, grace=300).decisions
    assert isinstance(stop, Stop)
    assert stop.requeue is True
    assert stop.end_reason == "preempted"


def test_non_resumable_run_ends_preempted_without_requeue():
    leaving = run(job("r", "b/b1", resumable=False), "h0", [0], signalled_at=NOW - 300)
    [stop] = one_pass(state(NOW, hosts(1), [leaving], []), TWO, grace=300).decisions
    assert stop.requeue is False
    assert "PREEMPTED" in stop.reason


def test_signalled_run_keeps_its_gpus_during_grace():
    leaving = run(job("r", "b/b1", gpus=8), "h0", range(8), signalled_at=NOW - 100)
    result = one_pass(state(NOW, hosts(1), [leaving], [job("j", "a/a1")]), TWO, grace=300)
    assert result.decisions == [] or not result.of(Start)
    assert not result.of(Stop)


def test_gpus_freed_by_a_stop_are_used_in_the_same_pass_after_it():
    leaving = run(job("r", "b/b1", gpus=8), "h0", range(8), signalled_at=NOW - 300)
    result = one_pass(state(NOW, hosts(1), [leaving], [job("j", "a/a1", gpus=8)]), TWO)
    kinds = [type(d) for d in result.decisions]
    assert kinds == [Stop, Start]


def test_signalled_run_is_never_preempted_again():
    host_list = hosts(1)
    host_list[0].state = HostState.DRAINING
    leaving = run(job("r", "b/b1", min_runtime=0), "h0", [0], signalled_at=NOW - 10)
    assert one_pass(state(NOW, host_list, [leaving], []), TWO).decisions == []


# -- drain ----------------------------------------------------------------------------------------


def draining_host():
    host_list = hosts(2)
    host_list[0].state = HostState.DRAINING
    return host_list


def test_drain_signals_unallocated_and_preemptible_runs_at_once():
    free = run(job("free", min_runtime=0), "h0", [0], started=NOW - 10)
    old = run(job("old", min_runtime=HOUR), "h0", [1], started=NOW - 2 * HOUR)
    young = run(job("young", min_runtime=HOUR), "h0", [2], started=NOW - 60)
    result = one_pass(state(NOW, draining_host(), [free, old, young], []), TWO)
    assert sorted(preempted(result)) == ["free", "old"]
    assert all("draining" in d.reason for d in result.of(Preempt))


def test_drain_signals_protected_run_when_its_protection_expires():
    young = run(job("young", min_runtime=HOUR), "h0", [2], started=NOW - HOUR)
    assert preempted(one_pass(state(NOW, draining_host(), [young], []), TWO)) == ["young"]


def test_stop_of_a_run_on_a_draining_host_ends_as_drained():
    leaving = run(job("r"), "h0", [0], signalled_at=NOW - 300)
    result = one_pass(state(NOW, draining_host(), [leaving], []), TWO)
    assert result.of(Stop)[0].end_reason == "drained"


def test_empty_draining_host_is_reported_drained():
    result = one_pass(state(NOW, draining_host(), [], []), TWO)
    [drained] = result.of(HostDrained)
    assert drained.host.name == "h0"


def test_draining_host_with_a_protected_run_is_not_drained_yet():
    young = run(job("young", min_runtime=HOUR), "h0", [0], started=NOW - 60)
    assert one_pass(state(NOW, draining_host(), [young], []), TWO).of(HostDrained) == []


# -- reservation and backfill -------------------------------------------------------------------


def reserved_cluster(*pending):
    """Two 8-GPU hosts, one leaf: h0 has 4 GPUs busy until NOW+100, h1 all 8 until NOW+1000.
    All runs protected (same leaf: no preemption possible)."""
    a = run(job("a", gpus=4, duration=100 + NOW, min_runtime=HOUR), "h0", range(4), started=0)
    b = run(job("b", gpus=8, duration=1000 + NOW, min_runtime=HOUR), "h1", range(8), started=0)
    a.protected_until = b.protected_until = NOW + HOUR
    return state(NOW, hosts(2), [a, b], list(pending))


def test_blocked_large_workload_holds_the_hosts_that_free_soonest():
    big = job("big", gpus=16, submitted=0)
    result = one_pass(reserved_cluster(big), TWO)
    [hold] = result.of(Hold)
    assert hold.hosts == ("h0", "h1")
    assert hold.until == NOW + 1000


def test_a_reservation_counts_gpus_being_released_free_when_their_grace_period_ends():
    # h0's run was signalled 200 s ago and leaves in 100 s; h1's unallocated run was signalled
    # just now and leaves in 30 s (its shorter grace): h1 frees first, whenever the pass is made
    allocated = run(job("a", gpus=8, min_runtime=HOUR), "h0", range(8), started=0,
                    signalled_at=NOW - 200)
    unallocated = run(job("u", gpus=8, min_runtime=0), "h1", range(8), started=0,
                      signalled_at=NOW)
    big = job("big", "b/b1", gpus=8, min_runtime=0, submitted=0)  # it claims nothing: it holds
    for now in (NOW, NOW + 20):
        result = one_pass(state(now, hosts(2), [allocated, unallocated], [big]), TWO)
        [hold] = result.of(Hold)
        assert (hold.hosts, hold.until) == (("h1",), NOW + 30)


def test_a_reservation_kept_from_pass_to_pass_counts_what_its_own_pass_started():
    """A driver's memo keeps when each host frees from one pass to the next. Work a later pass
    starts on a host before the reservation is made counts there: h1, soonest free in the
    first pass, takes a long run in the second, and h0 frees first then."""
    cluster = hosts(2)  # one hosts list for both passes, as a driver keeps it
    a = run(job("a", gpus=8, duration=NOW + 1000), "h0", range(8), started=0)
    b = run(job("b", gpus=4, duration=NOW + 500), "h1", range(4), started=0)
    big = job("big", gpus=8, submitted=5)
    older = job("older", gpus=4, submitted=1, duration=5000)  # goes first, fits on h1
    memo, params = EngineMemo(), Params(policy="fifo-backfill")

    def kept(now, pending):
        return replace(state(now, cluster, [a, b], pending), hosts=cluster, memo=memo)

    [hold] = schedule(kept(NOW, [big]), TWO, params).of(Hold)
    assert (hold.hosts, hold.until) == (("h1",), NOW + 500)
    second = schedule(kept(NOW + 10, [older, big]), TWO, params)
    assert list(started(second)) == ["older"]
    [hold] = second.of(Hold)
    assert (hold.hosts, hold.until) == (("h0",), NOW + 1000)


def test_held_hosts_take_no_work_that_would_outlast_the_reservation():
    big = job("big", gpus=16, submitted=0)
    long_small = job("long", gpus=1, submitted=1, duration=5000)
    result = one_pass(reserved_cluster(big, long_small), TWO)
    assert started(result) == {}
    assert "held for workload #big" in result.waiting["long"]


def test_short_work_backfills_held_hosts():
    big = job("big", gpus=16, submitted=0)
    short = job("short", gpus=1, submitted=1, duration=500)
    result = one_pass(reserved_cluster(big, short), TWO)
    assert list(started(result)) == ["short"]
    assert "backfilled" in result.decisions[-1].reason


def test_reservation_stops_small_jobs_from_starving_a_large_one():
    """A stream of small jobs keeps arriving; the large job, submitted first, still starts."""
    t = tree(a=1, a__a1=1)
    host_list = hosts(2)
    running: list[Run] = []
    for i in range(16):  # every GPU busy, one freeing every 10 s
        w = job(f"old{i}", gpus=1, duration=10.0 * (i + 1), min_runtime=HOUR)
        running.append(run(w, f"h{i // 8}", [i % 8], started=0.0))
    pending = [job("big", gpus=16, submitted=0.0, duration=1000.0)]
    big_started = None
    for step in range(1, 60):
        now = 10.0 * step
        running = [r for r in running if r.started + r.workload.duration > now]
        pending.append(job(f"small{step}", gpus=1, submitted=now, duration=300.0))
        result = schedule(state(now, host_list, running, pending), t, Params())
        for d in result.of(Start):
            running.append(Run(d.workload, now, d.placement, now + d.workload.min_runtime))
            pending.remove(d.workload)
            if d.workload.id == "big":
                big_started = now
    assert big_started == 160.0  # the last of the 16 old runs ends at 160 s


# -- policies -----------------------------------------------------------------------------------


def test_fifo_starts_in_submission_order_whatever_the_usage():
    pending = [job("late", "b/b1", gpus=8, submitted=2), job("early", "a/a1", gpus=8, submitted=1)]
    st = state(NOW, hosts(1), [], pending, usage={"a/a1": 900.0}, capacity=CAPACITY)
    result = one_pass(st, TWO, policy="fifo")
    assert list(started(result)) == ["early"]


def test_fifo_never_preempts():
    victim = past(job("v", "b/b1", gpus=8), "h0", range(8))
    st = state(
        NOW,
        hosts(1),
        [victim],
        [job("req", "a/a1", gpus=8)],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, TWO, policy="fifo")) == []


def test_quota_caps_a_budget_at_its_fraction_of_the_cluster():
    # 16 GPUs, each leaf 50%: quota 8 GPUs. a/a1 already runs 8.
    mine = past(job("mine", "a/a1", gpus=8), "h0", range(8))
    pending = [job("more", "a/a1", gpus=1, submitted=1), job("theirs", "b/b1", gpus=1, submitted=2)]
    result = one_pass(state(NOW, hosts(2), [mine], pending), TWO, policy="quota")
    assert list(started(result)) == ["theirs"]
    assert result.waiting["more"] == "a/a1 at its quota: 8 of 8 GPUs in use, needs 1 more"


def test_quota_never_preempts():
    victim = past(job("v", "b/b1", gpus=8), "h0", range(8))
    st = state(
        NOW,
        hosts(1),
        [victim],
        [job("req", "a/a1", gpus=4)],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, TWO, policy="quota")) == []


# -- next event -----------------------------------------------------------------------------------


def test_next_event_is_the_end_of_a_grace_period():
    leaving = run(job("r"), "h0", [0], signalled_at=NOW - 100)
    assert next_event(state(NOW, hosts(1), [leaving], []), Params(grace=300)) == NOW + 200


def test_next_event_is_a_protection_expiry_while_allocated_work_waits():
    young = run(job("young", min_runtime=HOUR), "h0", range(1), started=NOW - 60)
    st = state(NOW, hosts(1), [young], [job("waiting", gpus=8)])
    assert next_event(st, Params()) == NOW - 60 + HOUR


def test_no_next_event_when_nothing_waits_on_time():
    young = run(job("young", min_runtime=HOUR), "h0", range(1), started=NOW - 60)
    assert next_event(state(NOW, hosts(1), [young], []), Params()) is None


def test_next_event_is_the_protection_expiry_of_a_run_on_a_draining_host():
    young = run(job("young", min_runtime=HOUR), "h0", [0], started=NOW - 60)
    assert next_event(state(NOW, draining_host(), [young], []), Params()) == NOW - 60 + HOUR


def test_fifo_backfill_keeps_unallocated_work_without_known_end_off_held_hosts():
    big = job("big", gpus=16, submitted=0)
    free = job("free", gpus=1, min_runtime=0, submitted=1)
    result = one_pass(reserved_cluster(big, free), TWO, policy="fifo-backfill")
    assert started(result) == {}


def test_fair_share_backfills_unallocated_work_the_holder_may_preempt():
    big = job("big", gpus=16, submitted=0)
    free = job("free", gpus=1, min_runtime=0, submitted=1)
    result = one_pass(reserved_cluster(big, free), TWO)
    assert list(started(result)) == ["free"]


def test_an_unallocated_holder_keeps_unallocated_work_off_its_hosts_unless_it_ends_in_time():
    """Unallocated work may not preempt unallocated work: for such a holder, unallocated work
    is out of the way only when its expected duration ends before the reservation starts."""
    big = job("big", gpus=16, min_runtime=0, submitted=0)
    endless = job("endless", gpus=1, min_runtime=0, submitted=1)
    short = job("short", gpus=1, min_runtime=0, submitted=2, duration=500)
    result = one_pass(reserved_cluster(big, endless, short), TWO)
    assert [hold.workload.id for hold in result.of(Hold)] == ["big"]
    assert list(started(result)) == ["short"]


def test_unallocated_work_backfills_held_hosts_where_allocated_work_of_its_size_could_not():
    """Allocated work of one GPU outlasts the reservation and waits; unallocated work of one
    GPU is out of the holder's way at once and backfills."""
    big = job("big", gpus=16, submitted=0)
    long_small = job("long", gpus=1, submitted=1, duration=5000)
    free = job("free", gpus=1, min_runtime=0, submitted=2)
    result = one_pass(reserved_cluster(big, long_small, free), TWO)
    assert list(started(result)) == ["free"]
    assert "held for workload #big" in result.waiting["long"]


def test_preempted_gpus_go_to_the_requester_after_grace_without_further_preemption():
    """Pass 1 signals the victim; pass 2 (in grace) changes nothing; pass 3 stops it and starts
    the requester on the very GPUs."""
    victim = past(job("victim", "b/b1", gpus=8), "h0", range(8))
    other = past(job("other", "b/b1", gpus=8), "h1", range(8))
    requester = job("req", "a/a1", gpus=8)
    usage = {"b/b1": 900.0, "a/a1": 0.0}

    def at(now):
        st = state(now, hosts(2), [victim, other], [requester], usage=usage, capacity=CAPACITY)
        return one_pass(st, TWO, grace=300)

    first = at(NOW)
    [signal] = first.of(Preempt)
    signal.run.signalled_at = NOW
    second = at(NOW + 100)
    assert second.decisions == []
    third = at(NOW + 300)
    assert [type(d) for d in third.decisions] == [Stop, Start]
    assert third.of(Start)[0].placement.hosts == signal.run.placement.hosts
