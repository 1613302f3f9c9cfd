"""Share changes with an effective date, and allocations that expire: a beat task applies
them at their moment and writes the audit log then; reports see them only from that date;
the owners are warned a week before an expiry; pending allocated work learns why."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from budgets import services
from budgets.models import Allocation, AllocationChange, ScheduledShareChange
from notifications.models import Notification
from notifications.tasks import warn_expiring_allocations
from reports.accounting import Tree, share_segments
from scheduler.models import Event, Workload

NOW = timezone.now().replace(microsecond=0)
NEXT_MONTH = NOW + timedelta(days=30)


@pytest.fixture
def next_month_change(org):
    """The PI gives Project A1 150 shares (now 50) from next month."""
    return services.schedule_shares(org.pi, org.proj_a1, org.cluster, 150, NEXT_MONTH,
                                    reason="second half of the grant")


def test_nothing_changes_before_the_date(org, next_month_change, shares_of):
    assert services.apply_due_share_changes(now=NEXT_MONTH - timedelta(seconds=1)) == 0
    assert shares_of(org.proj_a1) == 50


def test_the_change_applies_at_its_date_with_an_audit_entry_then(org, next_month_change,
                                                                 shares_of):
    services.apply_due_share_changes(now=NEXT_MONTH + timedelta(minutes=1))
    assert shares_of(org.proj_a1) == 150
    entry = AllocationChange.objects.filter(node=org.proj_a1).first()
    assert (entry.old_shares, entry.new_shares, entry.at, entry.changed_by_name) == (
        50, 150, NEXT_MONTH, "pi"
    )


def test_reports_see_the_change_only_from_its_date(org, next_month_change):
    services.apply_due_share_changes(now=NEXT_MONTH + timedelta(minutes=5))
    start = timezone.now()  # after the initial budget
    segments = share_segments(org.cluster, Tree(), start, NEXT_MONTH + timedelta(days=1))
    assert [(s.start, s.shares[org.proj_a1.pk]) for s in segments] == [
        (start, 50), (NEXT_MONTH, 150)
    ]


def test_the_tree_form_schedules_a_change(org, client_for, htmx):
    url = reverse("budgets:tree", kwargs={"cluster": org.cluster.name})
    response = client_for("pi").post(url, {
        "node": org.proj_a1.pk, "shares": 80, "effective_at": "2099-01-01 00:00",
    }, **htmx)
    assert response.status_code == 200
    change = ScheduledShareChange.objects.get()
    assert (change.node, change.shares, change.effective_at.year) == (org.proj_a1, 80, 2099)
    assert Allocation.objects.get(node=org.proj_a1).shares == 50


def test_an_effective_date_in_the_past_is_refused(org, client_for, htmx, unchanged):
    url = reverse("budgets:tree", kwargs={"cluster": org.cluster.name})
    with unchanged():
        response = client_for("pi").post(url, {
            "node": org.proj_a1.pk, "shares": 80, "effective_at": "2020-01-01 00:00",
        }, **htmx)
    assert response.status_code == 422
    assert "The effective date is in the past" in response.content.decode()
    assert not ScheduledShareChange.objects.exists()


def test_an_expiry_before_the_effective_date_is_refused(org, api_for, unchanged):
    with unchanged():
        response = api_for("pi").post(f"/api/budgets/{org.proj_a1.pk}/shares/", {
            "cluster": "h100", "shares": 80, "effective_at": "2099-06-01T00:00:00Z",
            "expires_at": "2099-05-01T00:00:00Z",
        }, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "expires_at"
    assert response.json()["detail"].startswith("The allocation would expire before it takes")
    assert not ScheduledShareChange.objects.exists()


def test_nobody_schedules_outside_their_subtree(org, unchanged):
    from django.core.exceptions import PermissionDenied

    with unchanged(), pytest.raises(PermissionDenied):
        services.schedule_shares(org.lead, org.proj_a2, org.cluster, 80, NEXT_MONTH)


# Expiry ----------------------------------------------------------------------------------


@pytest.fixture
def expiring(org):
    """Project A2's 50 shares expire in five days."""
    services.set_shares(org.pi, org.proj_a2, org.cluster, 50,
                        expires_at=NOW + timedelta(days=5), reason="pilot")
    return Allocation.objects.get(node=org.proj_a2)


def test_on_expiry_the_share_returns_to_the_siblings(org, expiring):
    assert services.expire_due_allocations(now=expiring.expires_at + timedelta(minutes=1)) == 1
    assert not Allocation.objects.filter(node=org.proj_a2).exists()
    segments = share_segments(org.cluster, Tree(), timezone.now(),
                              expiring.expires_at + timedelta(days=1))
    assert segments[-1].start == expiring.expires_at
    # A1 had 50 of A1 + A2's 100 shares of Program A (70%): 35%; alone, all of Program A.
    assert segments[-1].fraction[org.proj_a1.pk] == pytest.approx(0.7)


def test_the_expiry_is_audited_at_its_moment(org, expiring):
    services.expire_due_allocations(now=expiring.expires_at + timedelta(hours=2))
    entry = AllocationChange.objects.filter(node=org.proj_a2).first()
    assert (entry.old_shares, entry.new_shares, entry.at) == (50, 0, expiring.expires_at)


def test_pending_allocated_work_is_told_why(fleet, monkeypatch):
    monkeypatch.setattr("scheduler.tasks.send_tick", lambda cluster_id: None)
    org = fleet.org
    services.set_shares(org.pi, org.proj_a1, org.cluster, 50, expires_at=NOW + timedelta(days=1))
    services.expire_due_allocations(now=NOW + timedelta(days=2))
    wait = Workload.objects.get(pk=fleet.wait.pk)
    assert wait.queue_reason.startswith(
        "the allocation of org/prog-a/proj-a1 on h100 expired on"
    )
    assert "can no longer run allocated there" in Event.objects.filter(workload=wait).last().reason
    # unallocated work and other budgets are not concerned
    assert not Event.objects.filter(workload=fleet.a2, kind="queued").exists()


def test_the_managers_are_warned_a_week_before_once(org, expiring):
    assert warn_expiring_allocations(now=NOW) == 1
    assert warn_expiring_allocations(now=NOW + timedelta(hours=1)) == 0
    # Project A2 has no manager: its parent's manager, the PI, is told.
    told = Notification.objects.get()
    assert (told.recipient, told.kind) == (org.pi, "allocation_expiring")
    assert told.title.startswith("The allocation of org/prog-a/proj-a2 on h100 expires on")


def test_an_expiry_further_than_a_week_is_not_warned_yet(org):
    services.set_shares(org.pi, org.proj_a2, org.cluster, 50, expires_at=NOW + timedelta(days=9))
    assert warn_expiring_allocations(now=NOW) == 0
