"""A member who leaves keeps their history and finished work; their pending work charged to
the budget is cancelled with the reason, or moved to a leaf the manager chooses."""

import pytest

from budgets import people
from budgets.models import Allocation, MembershipChange
from common.errors import ServiceError
from scheduler.models import Workload


@pytest.fixture
def leaving(fleet, monkeypatch):
    """The lead leaves exp-1: `wait` (PENDING) is theirs there; `run` and `done` are the
    researcher's. Ticks asked for are recorded, not sent."""
    sent = []
    monkeypatch.setattr("scheduler.tasks.send_tick", sent.append)
    fleet.ticks = sent
    return fleet


def test_pending_work_is_cancelled_with_the_reason(leaving, django_capture_on_commit_callbacks):
    org = leaving.org
    with django_capture_on_commit_callbacks(execute=True):
        people.remove_person(org.pi, org.exp_1, "lead", "member", reason="moved to industry")
    wait = Workload.objects.get(pk=leaving.wait.pk)
    assert wait.state == Workload.State.CANCELLED
    assert wait.events.last().reason == (
        "cancelled by pi: lead left org/prog-a/proj-a1/exp-1: moved to industry"
    )
    assert leaving.ticks == [org.cluster.pk]


def test_the_log_says_what_happened_to_the_work(leaving):
    org = leaving.org
    people.remove_person(org.pi, org.exp_1, "lead", "member")
    assert MembershipChange.objects.get().outcome == "1 pending workload(s) cancelled"


def test_finished_and_running_work_and_other_budgets_stay(leaving):
    org = leaving.org
    people.remove_person(org.pi, org.exp_1, "researcher", "member")
    states = dict(Workload.objects.values_list("name", "state"))
    assert states == {"run": "RUNNING", "wait": "PENDING", "a2": "PENDING", "b": "PENDING",
                      "done": "COMPLETED"}
    assert Workload.objects.get(name="done").owner == org.researcher


def test_pending_work_moves_to_the_chosen_leaf(leaving):
    org = leaving.org
    people.remove_person(org.pi, org.exp_1, "lead", "member", move_to=org.proj_a2)
    wait = Workload.objects.get(pk=leaving.wait.pk)
    assert (wait.state, wait.budget) == (Workload.State.PENDING, org.proj_a2)
    assert wait.events.last().reason.startswith(
        "moved from org/prog-a/proj-a1/exp-1 to org/prog-a/proj-a2 by pi"
    )


def test_moving_allocated_work_where_it_has_no_shares_is_refused(leaving, unchanged,
                                                                  nothing_written):
    org = leaving.org
    Allocation.objects.filter(node=org.proj_a2).delete()
    with unchanged(), nothing_written(), pytest.raises(ServiceError, match="has no allocation"):
        people.remove_person(org.pi, org.exp_1, "lead", "member", move_to=org.proj_a2)


def test_moving_work_to_a_budget_that_is_not_a_leaf_is_refused(leaving, unchanged):
    org = leaving.org
    with unchanged(), pytest.raises(ServiceError, match="is not a leaf budget"):
        people.remove_person(org.pi, org.exp_1, "lead", "member", move_to=org.proj_a1)


def test_moving_work_outside_your_subtree_is_refused(leaving, unchanged, nothing_written):
    org = leaving.org
    from django.core.exceptions import PermissionDenied

    with unchanged(), nothing_written(), pytest.raises(PermissionDenied):
        people.remove_person(org.pi, org.exp_1, "lead", "member", move_to=org.proj_b1)


def test_the_page_moves_work_to_the_chosen_leaf(leaving, client_for):
    from test_budgets_people import remove

    org = leaving.org
    response = remove(client_for("pi"), org.exp_1, "lead", move_to=org.proj_a2.pk)
    assert response.status_code == 302
    assert Workload.objects.get(pk=leaving.wait.pk).budget == org.proj_a2
