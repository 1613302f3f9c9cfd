"""An expired allocation tells its managers, and the owners of the pending allocated work it
covered; a run flagged idle tells its owner. By email through a real SMTP server, with the
link of the page concerned."""

from datetime import timedelta

import pytest
from django.utils import timezone

from budgets import services
from notifications.models import Notification
from scheduler.models import Run
from scheduler.signals import run_idle

NOW = timezone.now().replace(microsecond=0)


@pytest.fixture
def addressed(fleet):
    for name, user in fleet.org.users.items():
        user.email = f"{name}@example.org"
        user.save()
    return fleet


def kinds_of(user):
    return list(Notification.objects.filter(recipient=user).values_list("kind", flat=True))


def expire_a1(org, capture, monkeypatch):
    """Project A1's allocation (its lead manages it) expires; Experiment 1 below it holds
    the lead's pending allocated workload "wait"."""
    monkeypatch.setattr("scheduler.tasks.send_tick", lambda cluster_id: None)
    services.set_shares(org.pi, org.proj_a1, org.cluster, 50, expires_at=NOW + timedelta(days=1))
    with capture(execute=True):
        services.expire_due_allocations(now=NOW + timedelta(days=2))


def test_an_expiry_is_emailed_to_the_budget_s_manager(addressed, smtp, monkeypatch,
                                                      django_capture_on_commit_callbacks):
    expire_a1(addressed.org, django_capture_on_commit_callbacks, monkeypatch)
    [mail] = [m for m in smtp.received if "can no longer" not in m.subject]
    assert mail.to == ["lead@example.org"]
    assert mail.subject.startswith(
        "[Timeshare] The allocation of org/prog-a/proj-a1 on h100 expired on"
    )
    assert f"https://timeshare.example.org/budgets/nodes/{addressed.org.proj_a1.pk}/" in mail.body


def test_the_owner_of_pending_allocated_work_learns_why_it_waits(
    addressed, smtp, monkeypatch, django_capture_on_commit_callbacks
):
    expire_a1(addressed.org, django_capture_on_commit_callbacks, monkeypatch)
    [mail] = [m for m in smtp.received if "can no longer" in m.subject]
    assert mail.to == ["lead@example.org"]
    assert mail.subject.endswith(f"wait (#{addressed.wait.pk}) can no longer run allocated")
    assert "submit it unallocated" in mail.body
    assert f"https://timeshare.example.org/workloads/{addressed.wait.pk}/" in mail.body


def test_an_expiry_tells_nobody_outside_the_budget(addressed, monkeypatch,
                                                   django_capture_on_commit_callbacks):
    expire_a1(addressed.org, django_capture_on_commit_callbacks, monkeypatch)
    org = addressed.org
    # the researcher's workload below A1 is running, not pending: nothing to tell
    for persona in ("ceo", "pi", "researcher", "outsider", "operator", "bob"):
        assert kinds_of(org.users[persona]) == [], persona


def test_an_expiry_without_a_manager_tells_the_nearest_manager_above(
    addressed, monkeypatch, django_capture_on_commit_callbacks
):
    org = addressed.org
    monkeypatch.setattr("scheduler.tasks.send_tick", lambda cluster_id: None)
    services.set_shares(org.pi, org.proj_a2, org.cluster, 50, expires_at=NOW + timedelta(days=1))
    with django_capture_on_commit_callbacks(execute=True):
        services.expire_due_allocations(now=NOW + timedelta(days=2))
    # Project A2 has no manager: Program A's PI answers for it. Its pending workload "a2"
    # is unallocated (minimum runtime 0) and keeps running as before: its owner hears nothing.
    assert kinds_of(org.pi) == ["allocation_expired"]
    assert kinds_of(org.lead) == []


def flag_idle(fleet, capture):
    run = Run.objects.get(pk=fleet.run.pk)
    with capture(execute=True):
        run_idle.send(sender=Run, run_id=run.pk, workload_id=run.workload_id,
                      owner_id=fleet.run_w.owner_id, idle_since=NOW,
                      reason="GPUs idle: below 10% busy since 2026-11-30 09:00 UTC")


def test_an_idle_run_is_emailed_to_its_owner(addressed, smtp, django_capture_on_commit_callbacks):
    flag_idle(addressed, django_capture_on_commit_callbacks)
    [mail] = smtp.received
    assert mail.to == ["researcher@example.org"]
    assert mail.subject == (
        f"[Timeshare] The GPUs of run (#{addressed.run_w.pk}) on h100 sit idle"
    )
    assert "below 10% busy since 2026-11-30 09:00 UTC" in mail.body
    assert f"https://timeshare.example.org/workloads/{addressed.run_w.pk}/" in mail.body


def test_an_idle_run_tells_only_its_owner(addressed, django_capture_on_commit_callbacks):
    flag_idle(addressed, django_capture_on_commit_callbacks)
    assert list(Notification.objects.values_list("recipient__username", "kind")) == [
        ("researcher", "run_idle")
    ]


def test_an_owner_who_turned_idle_notices_off_hears_nothing(addressed, smtp,
                                                            django_capture_on_commit_callbacks):
    from notifications.services import set_preference

    set_preference(addressed.org.researcher, "run_idle", "none", "immediate")
    flag_idle(addressed, django_capture_on_commit_callbacks)
    assert smtp.received == []
    assert Notification.objects.count() == 0
