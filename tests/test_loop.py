"""The live loop with a controlled clock: starts, protection, preemption after the minimum
runtime, grace then requeue (same place), PREEMPTED for non-resumable work, unallocated work
preempted at once, idempotence. Every tick here runs twice at the same instant and the second
one must change nothing."""

import pytest
from django.core.exceptions import ValidationError
from fixtures_loop import (
    at,
    held_gpus,
    make_workload,
    overuse,
    refresh,
    state_snapshot,
)

from scheduler import loop
from scheduler.models import Claim, Event, OccupancySample, Run, Workload


def tick(lab, seconds):
    report = loop.tick(lab.cluster.pk, at(seconds))
    after = state_snapshot()
    again = loop.tick(lab.cluster.pk, at(seconds))
    assert state_snapshot() == after, "a second tick at the same instant changed something"
    assert not again.decisions or all(type(d).__name__ == "Hold" for d in again.decisions)
    return report


def kinds(w):
    return list(Event.objects.filter(workload=w).values_list("kind", flat=True))


def test_a_workload_starts_on_free_gpus_with_its_protection(lab):
    w = make_workload(lab, lab.a1, gpus=3, min_runtime=1800)
    report = tick(lab, 0)
    refresh(w)
    assert w.state == "RUNNING" and w.queue_position is None
    run = Run.objects.get(workload=w)
    assert (run.number, run.gpus, run.allocated) == (1, 3, True)
    assert run.started == at(0) and run.protected_until == at(1800)
    assert held_gpus() == [("lab-0", 0), ("lab-0", 1), ("lab-0", 2)]
    started = Event.objects.get(workload=w, kind="started")
    assert started.reason == report.passes[0].decisions[0].reason
    assert "proj-a1 at 0% of entitlement" in started.reason
    sample = OccupancySample.objects.get()
    assert (sample.total, sample.available, sample.allocated, sample.unallocated) == (8, 8, 3, 0)


def test_waiting_workloads_get_their_position_and_a_reason(lab):
    overuse(lab, lab.b1, 2.0)
    make_workload(lab, lab.a1, gpus=8, submitted=at(-100))
    first = make_workload(lab, lab.b1, gpus=4, submitted=at(-90))
    second = make_workload(lab, lab.b1, gpus=4, submitted=at(-80))
    tick(lab, 0)
    refresh(first, second)
    assert (first.state, first.queue_position, second.queue_position) == ("PENDING", 1, 2)
    for w in (first, second):
        assert w.queue_reason and w.queue_reason != "pending"
        assert "needs 4 GPUs" in w.queue_reason


def test_protected_work_is_preempted_only_after_its_min_runtime_then_requeued_in_place(lab):
    overuse(lab, lab.b1, 3.0)
    bob = make_workload(lab, lab.b1, gpus=8, min_runtime=3600, resumable=True,
                        submitted=at(-60))
    tick(lab, 0)
    alice = make_workload(lab, lab.a1, gpus=4, submitted=at(500))
    tick(lab, 600)
    refresh(bob, alice)
    assert (bob.state, alice.state) == ("RUNNING", "PENDING")
    assert "signalled" not in kinds(bob)
    tick(lab, 3599)
    assert refresh(bob).state == "RUNNING"

    report = tick(lab, 3600)  # protection over: signalled, keeps its GPUs for the grace period
    refresh(bob, alice)
    assert (bob.state, alice.state) == ("PREEMPTING", "PENDING")
    signalled = Event.objects.get(workload=bob, kind="signalled")
    assert "org/prog-b at 301% of entitlement" in signalled.reason
    assert signalled.reason == report.decisions[0].reason
    run = Run.objects.get(workload=bob)
    assert run.signalled_at == at(3600) and run.ended is None
    assert len(held_gpus()) == 8

    tick(lab, 3600 + 299)
    assert refresh(bob).state == "PREEMPTING"
    tick(lab, 3600 + 300)  # grace over: stopped, requeued with its place; alice starts
    refresh(bob, alice)
    assert (bob.state, alice.state) == ("PENDING", "RUNNING")
    assert bob.submitted == at(-60)
    run.refresh_from_db()
    assert (run.ended, run.end_reason) == (at(3900), "preempted")
    assert kinds(bob)[:4] == ["submitted", "started", "signalled", "requeued"]
    assert "keeps its place" in Event.objects.get(workload=bob, kind="requeued").reason
    assert bob.queue_position == 1 and bob.queue_reason
    assert len(held_gpus()) == 4


def test_non_resumable_work_ends_preempted(lab):
    overuse(lab, lab.b1, 3.0)
    bob = make_workload(lab, lab.b1, gpus=8, min_runtime=600, resumable=False)
    tick(lab, 0)
    alice = make_workload(lab, lab.a1, gpus=4, submitted=at(10))
    tick(lab, 600)
    tick(lab, 900)
    refresh(bob, alice)
    assert (bob.state, bob.finished, alice.state) == ("PREEMPTED", at(900), "RUNNING")
    assert "not resumable" in Event.objects.get(workload=bob, kind="preempted").reason
    assert Run.objects.filter(workload=bob).count() == 1


def test_a_budget_within_its_entitlement_is_not_preempted(lab):
    bob = make_workload(lab, lab.b1, gpus=8, min_runtime=600)  # prog-b unused: ratio ~0
    tick(lab, 0)
    make_workload(lab, lab.a1, gpus=4, submitted=at(10))
    tick(lab, 5000)
    assert refresh(bob).state == "RUNNING"


def test_unallocated_work_is_preempted_at_once(lab):
    free = make_workload(lab, lab.b1, gpus=8, min_runtime=0, resumable=True)
    tick(lab, 0)
    assert refresh(free).state == "RUNNING"
    alice = make_workload(lab, lab.a2, gpus=4, submitted=at(5))
    tick(lab, 10)
    assert refresh(free).state == "PREEMPTING"
    assert "unallocated" in Event.objects.get(workload=free, kind="signalled").reason.lower()
    tick(lab, 310)
    refresh(free, alice)
    assert (free.state, alice.state) == ("PENDING", "RUNNING")
    assert Run.objects.get(workload=free, number=1).end_reason == "preempted"


def test_unallocated_work_fills_idle_gpus_after_allocated_work(lab):
    free = make_workload(lab, lab.b1, gpus=4, min_runtime=0, submitted=at(-200))
    funded = make_workload(lab, lab.a1, gpus=8, submitted=at(-100))
    tick(lab, 0)
    refresh(free, funded)
    assert (funded.state, free.state) == ("RUNNING", "PENDING")
    assert "needs 4 GPUs" in free.queue_reason


def test_a_run_finishes_after_its_expected_duration_and_failing_commands_fail(lab):
    ok = make_workload(lab, lab.a1, gpus=2, expected_duration=1000)
    bad = make_workload(lab, lab.a2, gpus=1, expected_duration=500, command="python x.py; exit 3")
    tick(lab, 0)
    tick(lab, 999)
    assert refresh(ok).state == "RUNNING"
    tick(lab, 1500)
    refresh(ok, bad)
    assert (ok.state, ok.exit_code, ok.finished) == ("COMPLETED", 0, at(1000))
    assert (bad.state, bad.exit_code, bad.finished) == ("FAILED", 3, at(500))
    assert Run.objects.get(workload=ok).accounted_until == at(1000)
    assert held_gpus() == []


def test_a_requeued_resumable_run_only_does_the_work_left(lab):
    overuse(lab, lab.b1, 3.0)
    bob = make_workload(lab, lab.b1, gpus=8, min_runtime=600, expected_duration=2000)
    tick(lab, 0)
    alice = make_workload(lab, lab.a1, gpus=2, expected_duration=100, submitted=at(5))
    tick(lab, 600)  # signalled after 600 s of work
    tick(lab, 900)  # stopped; alice runs 100 s
    tick(lab, 1000)  # alice done; bob restarts with 1400 s left
    assert Run.objects.get(workload=bob, number=2).started == at(1000)
    tick(lab, 2399)
    assert refresh(bob).state == "RUNNING"
    tick(lab, 2400)
    assert refresh(bob).state == "COMPLETED" and refresh(alice).state == "COMPLETED"


def test_a_large_workload_holds_hosts_without_an_event_per_tick(lab):
    make_workload(lab, lab.b1, gpus=2, min_runtime=600, expected_duration=3000)
    tick(lab, 0)
    big = make_workload(lab, lab.a1, gpus=8, submitted=at(10))
    for t in (20, 30, 40, 50):
        tick(lab, t)
    assert refresh(big).state == "PENDING"
    assert kinds(big).count("held") == 1
    assert "holding lab-" in big.queue_reason


def test_a_tick_that_only_starts_and_holds_runs_one_pass_and_records_the_hold_once(lab):
    """A start opens no room for a second pass at the same instant (``Pass.opens_room``); the
    next tick holds the same hosts again: still one "Hosts reserved" line on the timeline."""
    make_workload(lab, lab.b1, gpus=2, min_runtime=600, expected_duration=3000)
    tick(lab, 0)
    big = make_workload(lab, lab.a1, gpus=8, submitted=at(10))
    small = make_workload(lab, lab.b1, gpus=1, min_runtime=0, expected_duration=5000,
                          submitted=at(11))
    report = tick(lab, 20)
    assert refresh(small).state == "RUNNING" and len(report.passes) == 1
    assert [type(d).__name__ for d in report.decisions].count("Hold") == 1
    assert kinds(big).count("held") == 1
    tick(lab, 30)
    assert kinds(big).count("held") == 1


def test_a_wait_whose_sentence_stays_the_same_gets_no_new_timeline_line(lab):
    """The hosts recorded behind a wait moved since the last tick while its sentence stayed
    the same (as when another workload's reservation moves, which the sentence does not
    name): the reader has nothing new, so nothing is written."""
    overuse(lab, lab.b1, 2.0)
    make_workload(lab, lab.a1, gpus=8, submitted=at(-100))
    waiting = make_workload(lab, lab.b1, gpus=4, submitted=at(-90))
    tick(lab, 0)
    reason = refresh(waiting).queue_reason
    lines = kinds(waiting)
    Workload.objects.filter(pk=waiting.pk).update(
        last_wait={**waiting.last_wait, "hosts": ["somewhere-else"]})
    tick(lab, 5)
    assert kinds(waiting) == lines == ["submitted", "held"]
    assert refresh(waiting).queue_reason == reason


def test_ticks_on_one_cluster_leave_other_clusters_alone(lab):
    from fleet.models import Cluster, Host

    other = Cluster.objects.create(name="other", gpu_type="B200")
    Host.objects.create(cluster=other, name="o-0", gpus=8)
    w = Workload.objects.create(name="x", owner=lab.alice, budget=lab.a1, cluster=other, gpus=1,
                                min_runtime=0, resumable=True, command="x", submitted=at(-5))
    tick(lab, 0)
    assert refresh(w).state == "PENDING"
    loop.tick(other.pk, at(1))
    assert refresh(w).state == "RUNNING"


@pytest.mark.parametrize("seconds", [0, 1234.5])
def test_a_tick_reports_skipped_only_when_the_lock_is_busy(lab, seconds):
    assert not loop.tick(lab.cluster.pk, at(seconds)).skipped


def test_gpus_a_preemption_frees_are_claimed_until_the_claimant_starts_on_them(lab):
    for t in (-30, -20):
        make_workload(lab, lab.b1, gpus=4, min_runtime=0, submitted=at(t))
    tick(lab, 0)
    alice = make_workload(lab, lab.a1, gpus=4, submitted=at(5))
    tick(lab, 10)  # an unallocated run is signalled; its GPUs are claimed for alice
    claim = Claim.objects.get()
    assert (claim.workload, claim.gpus, claim.displaced, claim.since) == (alice, 4, [], at(10))
    tick(lab, 20)  # still in its 30 s grace: the claim is kept, in the database too
    assert Claim.objects.get().host == claim.host
    tick(lab, 40)
    assert refresh(alice).state == "RUNNING" and not Claim.objects.exists()
    run = Run.objects.get(workload=alice)
    assert set(run.assigned_gpus.values_list("host__name", flat=True)) == {claim.host.name}


def test_a_pass_interval_other_than_the_tick_is_refused(lab, settings):
    settings.TIMESHARE_TICK_SECONDS = 5
    lab.cluster.pass_interval = 30
    with pytest.raises(ValidationError) as refused:
        lab.cluster.full_clean()
    assert "TIMESHARE_TICK_SECONDS" in refused.value.message_dict["pass_interval"][0]
