"""scheduler.services: bad input gets a clear error and writes nothing; good input is one
transaction with its events, and asks for a tick once committed."""

import pytest
from django.core.exceptions import PermissionDenied
from fixtures_loop import make_workload, state_snapshot, tick

from budgets.models import BudgetNode
from fleet import services as host_services
from fleet.models import Host, HostEvent
from fleet.services import HostActionError
from scheduler import services, tasks
from scheduler.models import Event, Run, RunGPU, Workload
from scheduler.services import SubmissionError


@pytest.fixture
def ticks(monkeypatch):
    sent = []
    monkeypatch.setattr(tasks, "send_tick", sent.append)
    return sent


def good(lab, **changes):
    fields = dict(name="train", budget=lab.a1, cluster=lab.cluster, gpus=2, min_runtime=3600,
                  resumable=True, command="python train.py", expected_duration=None)
    fields.update(changes)
    return fields


def test_submit_writes_the_workload_its_event_and_asks_for_a_tick(
    lab, ticks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        w = services.submit(lab.alice, **good(lab, expected_duration="5400"))
    assert (w.state, w.gpus, w.min_runtime, w.expected_duration) == ("PENDING", 2, 3600, 5400)
    event = Event.objects.get(workload=w)
    assert event.kind == "submitted" and "protected for 60 min" in event.reason
    assert ticks == [lab.cluster.pk]
    assert "waiting" in services.explain(w)


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"gpus": 9}, "gpus", "can never be placed"),
        ({"gpus": 0}, "gpus", "at least 1 GPU"),
        ({"gpus": "two"}, "gpus", "whole number"),
        ({"gpus": 1.5}, "gpus", "whole number"),
        ({"min_runtime": -1}, "min_runtime", "cannot be negative"),
        ({"min_runtime": 8 * 3600 + 1}, "min_runtime", "between 0 and 8 h"),
        ({"name": "  "}, "name", "name"),
        ({"command": ""}, "command", "command"),
        ({"expected_duration": 0}, "expected_duration", "positive"),
        ({"budget": "prog_a"}, "budget", "not a leaf"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error_and_nothing_written(
    lab, ticks, changes, field, words, django_capture_on_commit_callbacks
):
    if changes.get("budget") == "prog_a":
        changes["budget"] = lab.prog_a
    before = state_snapshot()
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(SubmissionError) as error:
        services.submit(lab.alice, **good(lab, **changes))
    assert error.value.field == field
    assert words in str(error.value)
    assert state_snapshot() == before
    assert ticks == []


def test_a_budget_without_allocation_runs_only_unallocated_work(lab, ticks):
    lonely = BudgetNode.objects.create(parent=lab.root, slug="proj-c", name="C", kind="project")
    lonely.members.add(lab.alice)
    before = state_snapshot()
    with pytest.raises(SubmissionError) as error:
        services.submit(lab.alice, **good(lab, budget=lonely))
    assert error.value.field == "min_runtime"
    assert "no allocation on this cluster" in str(error.value)
    assert "unallocated" in str(error.value)
    assert state_snapshot() == before
    assert ticks == []  # nothing to schedule: no tick asked for
    free = services.submit(lab.alice, **good(lab, budget=lonely, min_runtime=0))
    assert free.min_runtime == 0 and free.state == "PENDING"  # never silently downgraded


def test_a_budget_you_are_not_a_member_of_is_refused(lab, ticks):
    before = state_snapshot()
    with pytest.raises(PermissionDenied):
        services.submit(lab.alice, **good(lab, budget=lab.b1))
    with pytest.raises(PermissionDenied):
        services.submit(lab.outsider, **good(lab))
    assert state_snapshot() == before
    assert ticks == []


def test_cancel_someone_elses_workload_is_refused(lab, ticks):
    w = make_workload(lab, lab.b1)
    before = state_snapshot()
    with pytest.raises(PermissionDenied):
        services.cancel(lab.alice, w)
    assert state_snapshot() == before
    assert ticks == []


def test_cancel_a_pending_workload(lab, ticks, django_capture_on_commit_callbacks):
    w = make_workload(lab, lab.a1)
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel(lab.alice, w)
    assert w.state == "CANCELLED" and w.finished is not None
    assert Event.objects.filter(workload=w, kind="cancelled", reason__contains="alice").exists()
    assert ticks == [lab.cluster.pk]


def test_cancel_a_running_workload_releases_its_gpus_and_charges_it(lab, ticks):
    w = make_workload(lab, lab.a1, gpus=2)
    tick(lab, -50)
    assert RunGPU.objects.filter(held=True).count() == 2
    services.cancel(lab.operator, w)
    run = Run.objects.get(workload=w)
    assert run.end_reason == "cancelled" and run.ended == run.accounted_until
    assert RunGPU.objects.filter(held=True).count() == 0
    assert w.state == "CANCELLED"


def test_cancel_a_finished_workload_is_refused(lab, ticks):
    w = make_workload(lab, lab.a1)
    services.cancel(lab.alice, w)
    before = state_snapshot()
    with pytest.raises(SubmissionError, match="already cancelled"):
        services.cancel(lab.alice, w)
    assert state_snapshot() == before
    assert ticks == []


def test_host_actions_are_for_operators(lab, ticks):
    host = lab.hosts[0]
    before = state_snapshot()
    for action in (
        lambda: host_services.drain(lab.alice, host, "broken fan"),
        lambda: host_services.return_to_service(lab.ceo, host),
        lambda: host_services.repair(lab.bob, host),
    ):
        with pytest.raises(PermissionDenied):
            action()
    assert state_snapshot() == before


def test_drain_needs_a_reason_and_an_available_host(lab, ticks):
    host = lab.hosts[0]
    with pytest.raises(HostActionError) as error:
        host_services.drain(lab.operator, host, " ")
    assert error.value.field == "reason"
    host_services.drain(lab.operator, host, "broken fan")
    host.refresh_from_db()
    assert host.state == "DRAINING" and "broken fan" in host.state_reason
    event = HostEvent.objects.get(host=host)
    assert (event.kind, event.by) == ("drain_requested", lab.operator)
    before = state_snapshot()
    with pytest.raises(HostActionError, match="only an AVAILABLE host"):
        host_services.drain(lab.operator, host, "again")
    with pytest.raises(HostActionError, match="only an escalated"):
        host_services.repair(lab.operator, host)
    assert state_snapshot() == before
    host_services.return_to_service(lab.operator, host)
    assert Host.objects.get(pk=host.pk).state == "AVAILABLE"


def test_explain_a_running_workload(lab, ticks):
    w = make_workload(lab, lab.a1, gpus=2)
    tick(lab, 0)
    w.refresh_from_db()
    text = services.explain(w)
    assert text.startswith("running on lab-0 since") and "protected until" in text
    assert Workload.objects.get(pk=w.pk).state == "RUNNING"
