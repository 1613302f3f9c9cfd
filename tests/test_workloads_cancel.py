"""Cancelling: the owner, a manager above the budget or an operator; anybody else gets 403
(or 404 when they may not even see the workload) and nothing changes."""

import pytest
from django.urls import reverse

from scheduler.models import Event, Run, RunGPU, Workload


def cancel_url(workload):
    return reverse("scheduler:workload_cancel", kwargs={"pk": workload.pk})


@pytest.mark.parametrize(
    ("persona", "workload"),
    [
        ("researcher", "run"),   # the owner, a running workload
        ("lead", "run"),         # manages proj-a1, above exp-1
        ("pi", "wait"),          # manages prog-a
        ("ceo", "b"),            # manages the root
        ("operator", "b"),       # operators cancel anything
        ("lead", "a2"),          # the owner, a pending workload
    ],
)
def test_who_may_cancel(fleet, client_for, persona, workload):
    target = fleet.workloads[workload]
    response = client_for(persona).post(cancel_url(target))
    assert response.status_code == 302
    assert response["Location"] == reverse("scheduler:workload", kwargs={"pk": target.pk})
    target.refresh_from_db()
    assert target.state == Workload.State.CANCELLED
    assert target.events.filter(kind=Event.Kind.CANCELLED).count() == 1


def test_cancelling_a_running_workload_frees_its_gpus(fleet, client_for):
    client_for("researcher").post(cancel_url(fleet.run_w))
    run = Run.objects.get(pk=fleet.run.pk)
    assert run.ended is not None
    assert run.end_reason == Run.EndReason.CANCELLED
    assert not RunGPU.objects.filter(run=run, held=True).exists()


@pytest.mark.parametrize(
    ("persona", "workload", "status"),
    [
        ("researcher", "wait", 403),   # sees a fellow member's workload, may not cancel it
        ("researcher", "a2", 404),     # cannot even see it
        ("pi", "b", 404),
        ("bob", "run", 404),
        ("outsider", "run", 404),
    ],
)
def test_others_are_refused_and_nothing_changes(fleet, client_for, nothing_written, persona,
                                                workload, status):
    with nothing_written():
        response = client_for(persona).post(cancel_url(fleet.workloads[workload]))
    assert response.status_code == status


def test_cancel_needs_post(fleet, client_for, nothing_written):
    with nothing_written():
        assert client_for("researcher").get(cancel_url(fleet.run_w)).status_code == 405


def test_cancel_needs_the_csrf_token(fleet, nothing_written):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(fleet.org.researcher)
    with nothing_written():
        assert client.post(cancel_url(fleet.run_w)).status_code == 403


def test_cancelling_a_finished_workload_says_so(fleet, client_for, nothing_written):
    with nothing_written():
        response = client_for("researcher").post(cancel_url(fleet.done), follow=True)
    assert response.status_code == 200
    assert "done is already completed." in [str(m) for m in response.context["messages"]]


def test_anonymous_is_sent_to_login(fleet, client_for, nothing_written):
    with nothing_written():
        response = client_for(None).post(cancel_url(fleet.run_w))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
