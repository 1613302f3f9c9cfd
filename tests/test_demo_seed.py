"""`manage.py seed_demo`: the demo institute with a week of past (portal/demo.py,
scheduler/history.py): idempotent, consistent with itself and with the live loop that takes over,
and never after its own "now"."""

from collections import defaultdict
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Max, Sum
from django.utils import timezone

from budgets.models import AllocationChange, ChangeRequest, ReviewCycle, ReviewItem
from fleet.models import CapacityRollup, Cluster, Host, HostEvent
from portal import demo
from scheduler import loop
from scheduler.models import Event, OccupancySample, Run, RunGPU, UsageRollup, Workload

MODELS = [Workload, Run, RunGPU, Event, HostEvent, OccupancySample, UsageRollup, CapacityRollup,
          AllocationChange, ChangeRequest, Host, ReviewCycle, ReviewItem]


@pytest.fixture
def seeded(db):
    now = timezone.now().replace(microsecond=0)
    since = now - timedelta(days=7)
    demo.seed(since=since, now=now)
    written = demo.seed_history(since, now)
    return now, since, written


def counts():
    return {model.__name__: model.objects.count() for model in MODELS}


def test_seeding_twice_adds_nothing(db):
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert "h100: 7 days of history" in out.getvalue()
    first = counts()
    assert first["Workload"] > 1000
    again = StringIO()
    call_command("seed_demo", stdout=again)
    assert counts() == first
    assert "days of history" not in again.getvalue()


def test_a_cluster_with_a_past_gets_no_history(db):
    now = timezone.now()
    demo.seed()  # budgets from now on: no history can be consistent with them
    assert demo.seed_history(now - timedelta(days=7), now) == {}
    assert not Workload.objects.exists()


def test_the_history_ends_before_now(seeded):
    now, since, _ = seeded
    latest = [
        Workload.objects.aggregate(t=Max("submitted"))["t"],
        Workload.objects.aggregate(t=Max("finished"))["t"],
        Run.objects.aggregate(t=Max("started"))["t"],
        Run.objects.aggregate(t=Max("ended"))["t"],
        Run.objects.aggregate(t=Max("accounted_until"))["t"],
        Run.objects.aggregate(t=Max("signalled_at"))["t"],
        Event.objects.aggregate(t=Max("at"))["t"],
        HostEvent.objects.aggregate(t=Max("at"))["t"],
        OccupancySample.objects.aggregate(t=Max("at"))["t"],
        AllocationChange.objects.aggregate(t=Max("at"))["t"],
        ChangeRequest.objects.aggregate(t=Max("created"))["t"],
        ChangeRequest.objects.aggregate(t=Max("decided_at"))["t"],
        Host.objects.aggregate(t=Max("state_changed"))["t"],
    ]
    assert all(t is not None and t <= now for t in latest)
    assert UsageRollup.objects.aggregate(t=Max("hour"))["t"] <= now
    assert CapacityRollup.objects.aggregate(t=Max("hour"))["t"] <= now
    assert OccupancySample.objects.filter(at=now).count() == 2  # the hand-over sample
    assert not Workload.objects.filter(submitted__lt=since).exists()
    for cluster in Cluster.objects.all():
        assert cluster.created == since


def test_usage_rollups_are_the_runs(seeded):
    now, _, _ = seeded
    expected = defaultdict(float)
    for budget_id, gpus, started, until in Run.objects.filter(allocated=True).values_list(
            "workload__budget_id", "gpus", "started", "accounted_until"):
        expected[budget_id] += gpus * (until - started).total_seconds()
    got = dict(UsageRollup.objects.values("budget_id").annotate(s=Sum("gpu_seconds"))
               .values_list("budget_id", "s"))
    assert set(got) == set(expected)
    for budget_id, seconds in expected.items():
        assert got[budget_id] == pytest.approx(seconds)
    # live runs are charged up to now, ended ones to their end
    assert not Run.objects.filter(ended=None).exclude(accounted_until=now).exists()
    assert not Run.objects.exclude(ended=None).exclude(
        accounted_until__isnull=True).filter(accounted_until__gt=now).exists()


def test_capacity_rollups_are_the_samples(seeded):
    now, _, _ = seeded
    for cluster in Cluster.objects.all():
        samples = list(cluster.samples.order_by("at").values_list("at", "available"))
        integral = sum(available * ((samples[i + 1][0] if i + 1 < len(samples) else now) - at)
                       .total_seconds() for i, (at, available) in enumerate(samples))
        total = cluster.capacity_rollups.aggregate(s=Sum("gpu_seconds"))["s"]
        assert total == pytest.approx(integral)
        gpus = cluster.gpu_count
        assert 0.9 * gpus * 7 * 86400 < total <= gpus * 7 * 86400


def test_no_gpu_is_ever_held_twice(seeded):
    now, _, _ = seeded
    by_gpu = defaultdict(list)
    for host_id, index, started, ended in RunGPU.objects.values_list(
            "host_id", "index", "run__started", "run__ended"):
        by_gpu[(host_id, index)].append((started, ended or now))
    assert by_gpu
    for spans in by_gpu.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end
    # the GPUs held now are exactly those of the live runs, each run its own count
    for run in Run.objects.filter(ended=None):
        assert run.assigned_gpus.filter(held=True).count() == run.gpus
    assert not RunGPU.objects.filter(held=True).exclude(run__ended=None).exists()


def test_workloads_runs_and_events_agree(seeded):
    states = set(Workload.objects.values_list("state", flat=True))
    assert {"COMPLETED", "RUNNING"} <= states
    assert Run.objects.filter(end_reason="preempted").exists()
    # every run started with a "started" event, every workload was submitted once
    assert Event.objects.filter(kind="started").count() == Run.objects.count()
    assert Event.objects.filter(kind="submitted").count() == Workload.objects.count()
    for w in Workload.objects.filter(state="RUNNING")[:50]:
        assert w.runs.filter(ended=None).count() == 1
    for w in Workload.objects.filter(state__in=["COMPLETED", "FAILED", "PREEMPTED"])[:200]:
        assert w.finished is not None and not w.runs.filter(ended=None).exists()
    # the load is spread over the demo's teams and members
    assert Workload.objects.values("budget").distinct().count() >= 5
    assert Workload.objects.values("owner").distinct().count() >= 5


def test_hosts_failed_were_repaired_and_one_escalated(seeded):
    kinds = defaultdict(int)
    for kind in HostEvent.objects.values_list("kind", flat=True):
        kinds[kind] += 1
    assert kinds["failed"] + kinds["health_signal"] >= 3
    assert kinds["repair_succeeded"] >= 3
    assert kinds["escalated"] == 1
    assert HostEvent.objects.get(kind="escalated").needed_human
    # no run was on a host while it was down: a failure ends the runs on it
    for event in HostEvent.objects.filter(kind="failed"):
        assert not RunGPU.objects.filter(
            host=event.host, run__started__lte=event.at, run__ended__gt=event.at).exists()


def test_change_requests_one_approved_one_pending_for_the_ceo(seeded):
    approved = ChangeRequest.objects.get(state="approved")
    assert approved.node.path == "institute/prog-a/proj-a2"
    assert approved.decided_by.username == "pi"
    change = AllocationChange.objects.get(request=approved)
    assert (change.old_shares, change.new_shares) == (24, 30)
    pending = ChangeRequest.objects.get(state="pending")
    assert pending.node.parent.parent is None  # a program: the CEO decides
    assert pending.node.parent.managers.filter(username="ceo").exists()
    # today's shares are the demo's (the 35% example holds)
    assert approved.node.allocations.get(cluster=approved.cluster).shares == 30


def test_the_quarter_s_review_is_open_with_program_a_s_projects_confirmed(seeded):
    cycle = ReviewCycle.objects.get()
    assert (cycle.state, cycle.repeat_months) == ("open", 3)
    # two projects of Program A, on both clusters: Pretraining and Post-training
    assert sorted(cycle.items.filter(decision="confirmed").values_list(
        "node__path", "cluster__name", "decided_by__username"
    )) == [
        ("institute/prog-a/proj-a1", "b200", "pi"), ("institute/prog-a/proj-a1", "h100", "pi"),
        ("institute/prog-a/proj-a2", "b200", "pi"), ("institute/prog-a/proj-a2", "h100", "pi"),
    ]
    assert cycle.items.filter(decision="pending").count() == cycle.items.count() - 4


def test_the_live_loop_takes_over(seeded):
    now, _, _ = seeded
    for cluster in Cluster.objects.all():
        report = loop.tick(cluster.pk, now + timedelta(seconds=5))
        assert not report.skipped and not report.error
    for held in RunGPU.objects.filter(held=True).values("host", "index").annotate(
            n=Sum(1)).values_list("n", flat=True):
        assert held == 1


def test_reports_see_the_week(seeded, client):
    from budgets.models import BudgetNode
    from reports import review_report

    now, since, _ = seeded
    h100 = Cluster.objects.get(name="h100")
    report = review_report.budget_report(h100, since, now, now=now)
    a1 = next(r for r in report.rows if r.node.path == "institute/prog-a/proj-a1")
    assert a1.entitlement_h > 0 and a1.delivered_h > 0
    assert BudgetNode.objects.count() > 10
