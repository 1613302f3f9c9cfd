"""Submitting through the form: only your own budget leaves are offered, durations are typed
in minutes or h:mm, and what you asked for is what is queued."""

import pytest
from django.urls import reverse
from fixtures_scheduler import form_data

from scheduler.models import Event, Workload

NEW = reverse("scheduler:workload_create")


@pytest.mark.parametrize(
    ("persona", "budgets"),
    [
        ("researcher", ["org/prog-a/proj-a1/exp-1"]),  # proj-a1 too, but it is not a leaf
        ("lead", ["org/prog-a/proj-a1/exp-1", "org/prog-a/proj-a2"]),
        ("bob", ["org/prog-b/proj-b1"]),
        ("pi", []), ("ceo", []), ("operator", []), ("outsider", []),
    ],
)
def test_only_your_own_budget_leaves_are_offered(fleet, client_for, persona, budgets):
    response = client_for(persona).get(NEW)
    assert response.status_code == 200
    offered = [node.path for node in response.context["form"].fields["budget"].queryset]
    assert offered == budgets
    assert ("not a member of any budget leaf" in response.content.decode()) is (not budgets)


def test_form_explains_the_contract(fleet, client_for):
    body = client_for("researcher").get(NEW).content.decode()
    assert "protected from rebalancing and charged to the budget" in body
    assert "0 means unallocated: free, never charged, and preemptible at any moment" in body
    assert "preempted for good" in body
    assert "b200 4:00" in body and "h100 8:00" in body


def test_researcher_submits_to_their_leaf(fleet, client_for):
    response = client_for("researcher").post(NEW, form_data(fleet))
    workload = Workload.objects.get(name="llama-debug")
    assert response.status_code == 302
    assert response["Location"] == reverse("scheduler:workload", kwargs={"pk": workload.pk})
    assert workload.owner == fleet.org.researcher
    assert workload.budget == fleet.org.exp_1
    assert workload.cluster == fleet.org.cluster
    assert workload.gpus == 2
    assert workload.min_runtime == 5400           # 1:30
    assert workload.expected_duration == 7200     # 120 minutes
    assert workload.resumable is True
    assert workload.command == "torchrun train.py --debug"
    assert workload.events.filter(kind=Event.Kind.SUBMITTED).count() == 1


def test_minutes_and_hours_minutes_mean_the_same(fleet, client_for):
    client_for("lead").post(NEW, form_data(fleet, name="in-minutes", min_runtime="90"))
    client_for("lead").post(NEW, form_data(fleet, name="in-hours", min_runtime="1:30"))
    assert Workload.objects.get(name="in-minutes").min_runtime == 5400
    assert Workload.objects.get(name="in-hours").min_runtime == 5400


def test_zero_min_runtime_is_unallocated(fleet, client_for):
    client_for("researcher").post(NEW, form_data(fleet, min_runtime="0", resumable=None,
                                                 expected_duration=""))
    workload = Workload.objects.get(name="llama-debug")
    assert workload.min_runtime == 0
    assert not workload.allocated
    assert workload.resumable is False
    assert workload.expected_duration is None


def test_the_cluster_maximum_itself_is_allowed(fleet, client_for):
    response = client_for("researcher").post(NEW, form_data(fleet, min_runtime="8:00"))
    assert response.status_code == 302
    assert Workload.objects.get(name="llama-debug").min_runtime == 8 * 3600


def test_largest_placement_is_allowed(fleet, client_for):
    """h100 has two hosts of 5 GPUs: 10 GPUs fit on both whole hosts."""
    response = client_for("researcher").post(NEW, form_data(fleet, gpus="10"))
    assert response.status_code == 302


def test_unallocated_work_on_a_cluster_without_shares(fleet, client_for):
    """exp-1 has no allocation on b200: free, preemptible work is still welcome there."""
    response = client_for("researcher").post(
        NEW, form_data(fleet, cluster=fleet.b200.pk, min_runtime="0")
    )
    assert response.status_code == 302
    assert Workload.objects.get(name="llama-debug").cluster == fleet.b200


def test_lead_submits_to_the_other_leaf(fleet, client_for):
    response = client_for("lead").post(NEW, form_data(fleet, budget=fleet.org.proj_a2.pk))
    assert response.status_code == 302
    assert Workload.objects.get(name="llama-debug").budget == fleet.org.proj_a2


def test_anonymous_is_sent_to_login(fleet, client_for):
    response = client_for(None).post(NEW, form_data(fleet))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert not Workload.objects.filter(name="llama-debug").exists()


def test_submit_asks_for_a_tick_once_committed(fleet, client_for,
                                               django_capture_on_commit_callbacks):
    """The tick runs after the commit (scheduler.tasks.request_tick), never inside the form's
    transaction; the test only counts the callback, no broker is needed."""
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        client_for("researcher").post(NEW, form_data(fleet))
    assert len(callbacks) == 1
