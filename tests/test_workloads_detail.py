"""The workload page: 404 for those who may not see it, a timeline that says where and why,
htmx polling while the workload is active, and the Cancel button only for those who may."""

from datetime import timedelta

import pytest
from django.urls import reverse
from fixtures_scheduler import T0

from scheduler.models import Event, Run, RunGPU, Workload


def url(workload):
    return reverse("scheduler:workload", kwargs={"pk": workload.pk})


@pytest.mark.parametrize(
    ("persona", "workload", "status"),
    [
        ("researcher", "run", 200), ("researcher", "wait", 200), ("researcher", "a2", 404),
        ("researcher", "b", 404), ("lead", "a2", 200), ("lead", "b", 404),
        ("pi", "run", 200), ("pi", "b", 404), ("ceo", "b", 200), ("operator", "b", 200),
        ("bob", "b", 200), ("bob", "run", 404), ("outsider", "run", 404),
    ],
)
def test_who_sees_which_workload(fleet, client_for, persona, workload, status):
    assert client_for(persona).get(url(fleet.workloads[workload])).status_code == status


def test_anonymous_is_sent_to_login(fleet, client_for):
    response = client_for(None).get(url(fleet.run_w))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_pending_workload_says_why_it_waits(fleet, client_for):
    body = client_for("researcher").get(url(fleet.wait)).content.decode()
    assert "#1 in the queue" in body
    assert "needs 4 GPUs, 3 free on one host" in body


def test_running_workload_shows_hosts_gpus_and_protection(fleet, client_for):
    response = client_for("researcher").get(url(fleet.run_w))
    timeline = response.context["timeline"]
    assert [e.kind for e in timeline] == ["submitted", "started", "preemptible"]
    started = timeline[1]
    assert started.placement == [("h100-0", "0, 1")]
    assert started.reason == "proj-a1 is at 20% of its entitlement, first in rank"
    # Started 2 h 50 min ago with a 1 h minimum runtime: preemptible for 1 h 50 min.
    assert timeline[2].at == T0 + timedelta(minutes=70)
    body = response.content.decode()
    assert "Preemptible since" in body
    assert 'hx-trigger="every 3s"' in body


def test_protection_in_the_future_is_shown_as_upcoming(fleet, client_for):
    Run.objects.filter(pk=fleet.run.pk).update(protected_until=T0 + timedelta(days=1))
    timeline = client_for("researcher").get(url(fleet.run_w)).context["timeline"]
    assert [(e.kind, e.upcoming) for e in timeline] == [
        ("submitted", False), ("started", False), ("protected", True),
    ]


def test_preempted_and_requeued_workload_tells_the_story(fleet, client_for):
    """A resumable workload preempted after its minimum runtime, requeued, started again."""
    w, first = fleet.run_w, fleet.run
    signalled = T0 + timedelta(minutes=80)
    ended = signalled + timedelta(minutes=5)
    Run.objects.filter(pk=first.pk).update(
        signalled_at=signalled, ended=ended, end_reason="preempted", accounted_until=ended
    )
    RunGPU.objects.filter(run=first).update(held=False)
    Event.objects.create(workload=w, run=first, at=signalled, kind=Event.Kind.SIGNALLED,
                         reason="preempted to make room for proj-b1/job-42: exp-1 at 180% of "
                         "its entitlement, proj-b1 at 40%")
    Event.objects.create(workload=w, run=first, at=ended, kind=Event.Kind.REQUEUED,
                         reason="resumable: back in the queue at its original place")
    again = ended + timedelta(minutes=1)
    second = Run.objects.create(
        workload=w, number=2, allocated=True, gpus=2, started=again,
        protected_until=again + timedelta(hours=1), accounted_until=again,
    )
    RunGPU.objects.create(run=second, host=fleet.h100_1, index=3)
    RunGPU.objects.create(run=second, host=fleet.h100_1, index=4)

    response = client_for("researcher").get(url(w))
    kinds = [e.kind for e in response.context["timeline"]]
    # Run 2 has no STARTED event: the page says so from the run itself.
    assert kinds == ["submitted", "started", "preemptible", "signalled", "requeued", "started",
                     "preemptible"]
    assert response.context["timeline"][5].placement == [("h100-1", "3, 4")]
    body = response.content.decode()
    assert "exp-1 at 180% of its entitlement, proj-b1 at 40%" in body
    assert "Requeued" in body


def test_finished_workload_shows_exit_code_and_stops_polling(fleet, client_for):
    response = client_for("researcher").get(url(fleet.done))
    body = response.content.decode()
    assert "Exit code 0" in body
    assert "hx-trigger" not in body.split('id="live"')[1].split(">")[0]
    assert response.context["timeline"][-1].kind == "completed"


def test_htmx_poll_gets_only_the_live_part(fleet, client_for, htmx):
    response = client_for("researcher").get(url(fleet.wait), **htmx)
    assert [t.name for t in response.templates][0] == "scheduler/_workload_live.html"
    assert "<html" not in response.content.decode()


@pytest.mark.parametrize(
    ("persona", "workload", "shown"),
    [
        ("researcher", "run", True),     # the owner
        ("researcher", "wait", False),   # a fellow member's workload
        ("lead", "run", True),           # manages proj-a1, above exp-1
        ("pi", "run", True),
        ("ceo", "b", True),
        ("operator", "b", True),
        ("researcher", "done", False),   # finished: nothing to cancel
    ],
)
def test_cancel_button_only_for_those_who_may(fleet, client_for, persona, workload, shown):
    body = client_for(persona).get(url(fleet.workloads[workload])).content.decode()
    assert ("Cancel workload" in body) is shown


def test_unallocated_workload_is_never_protected(fleet, client_for):
    w = fleet.a2
    Workload.objects.filter(pk=w.pk).update(state=Workload.State.RUNNING)
    run = Run.objects.create(workload=w, number=1, allocated=False, gpus=1, started=T0,
                             protected_until=T0, accounted_until=T0)
    RunGPU.objects.create(run=run, host=fleet.h100_1, index=0)
    response = client_for("lead").get(url(w))
    assert [e.kind for e in response.context["timeline"]] == ["submitted", "started"]
    assert "unallocated" in response.content.decode()
