"""The live loop end to end: a real Celery worker process schedules on PostgreSQL.

Waits poll with generous deadlines; what is asserted is the order of events and the contract
(nobody is preempted before its minimum runtime), never how fast the worker was."""

from datetime import timedelta

import pytest
from polling import wait_for

from fleet import services as host_services
from fleet.models import Host, HostEvent
from scheduler import loop, services
from scheduler.models import Event, Run, UsageRollup, Workload

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def state(w):
    return Workload.objects.get(pk=w.pk).state


@pytest.fixture
def live(lab, celery_worker):
    lab.cluster.grace = 2
    lab.cluster.backend_config.update(repair_seconds=1, default_duration=3600)
    lab.cluster.save()
    return lab


def submit(lab, user, budget, **fields):
    defaults = dict(name="job", cluster=lab.cluster, resumable=True, command="python train.py")
    defaults.update(fields)
    return services.submit(user, budget=budget, **defaults)


def test_a_submission_starts_running(live):
    w = submit(live, live.alice, live.a1, gpus=2, min_runtime=60)
    wait_for(lambda: state(w) == "RUNNING", what="the run to start")
    run = Run.objects.get(workload=w)
    assert run.assigned_gpus.filter(held=True).count() == 2
    assert Event.objects.filter(workload=w, kind="started").exists()


def test_higher_ranked_demand_preempts_only_after_min_runtime_and_requeues(live):
    now = loop.floor_hour(live.cluster.created)
    UsageRollup.objects.create(cluster=live.cluster, budget=live.b1, hour=now,
                               gpu_seconds=0.3 * 8 * 86400 * 3)  # proj-b1 at ~300%
    bob = submit(live, live.bob, live.b1, gpus=8, min_runtime=4)
    wait_for(lambda: state(bob) == "RUNNING", what="bob's run")
    alice = submit(live, live.alice, live.a1, gpus=4, min_runtime=60)
    wait_for(lambda: state(alice) == "RUNNING", what="alice to get GPUs")
    first = Run.objects.get(workload=bob, number=1)
    assert first.signalled_at >= first.protected_until == first.started + timedelta(seconds=4)
    assert first.ended >= first.signalled_at + timedelta(seconds=2)  # the grace period
    assert first.end_reason == "preempted"
    kinds = list(Event.objects.filter(workload=bob).values_list("kind", flat=True))
    assert kinds[:4] == ["submitted", "started", "signalled", "requeued"]
    assert state(bob) in ("PENDING", "RUNNING")
    assert Workload.objects.get(pk=bob.pk).submitted == bob.submitted


def test_an_unallocated_run_is_preempted_at_once(live):
    free = submit(live, live.bob, live.b1, gpus=8, min_runtime=0)
    wait_for(lambda: state(free) == "RUNNING", what="the unallocated run")
    alice = submit(live, live.alice, live.a2, gpus=4, min_runtime=60)
    wait_for(lambda: state(alice) == "RUNNING", what="alice to get GPUs")
    run = Run.objects.get(workload=free, number=1)
    assert run.signalled_at is not None and run.end_reason == "preempted"
    signalled = Event.objects.get(workload=free, kind="signalled")
    assert "unallocated" in signalled.reason.lower()
    assert run.signalled_at >= Workload.objects.get(pk=alice.pk).submitted


def test_a_drained_host_empties_as_protection_expires_and_comes_back_after_repair(live):
    protected = submit(live, live.alice, live.a1, gpus=2, min_runtime=5)
    free = submit(live, live.bob, live.b1, gpus=2, min_runtime=0)
    wait_for(lambda: state(protected) == state(free) == "RUNNING", what="both runs")
    lab0 = Host.objects.get(pk=Run.objects.get(workload=protected).assigned_gpus.first().host_id)
    host_services.drain(live.operator, lab0, "fan noise")
    wait_for(lambda: Host.objects.get(pk=lab0.pk).state == "AVAILABLE"
             and HostEvent.objects.filter(host=lab0, kind="returned").exists(),
             what="the host to drain, be repaired and come back")
    kinds = list(HostEvent.objects.filter(host=lab0).order_by("at", "id")
                 .values_list("kind", flat=True))
    assert kinds[:2] == ["drain_requested", "drained"]
    assert "repair_started" in kinds and "repair_succeeded" in kinds
    run = Run.objects.get(workload=protected, number=1)
    assert run.signalled_at >= run.protected_until  # protected work left only after 5 s
    drained = HostEvent.objects.get(host=lab0, kind="drained")
    assert drained.at >= run.ended
    assert Run.objects.get(workload=free, number=1).signalled_at <= run.signalled_at
