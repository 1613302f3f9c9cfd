"""Owners are told what happens to their workloads: started, preempted (why, and whether it
was requeued), finished, failed, cancelled by someone else; by email through a real SMTP
server, and a mail server that is down never holds up a tick or a form."""

import pytest
from django.urls import reverse
from fixtures_loop import at, make_workload, overuse

from notifications.models import Notification
from scheduler import loop, services
from scheduler.models import Workload


@pytest.fixture
def mailboxes(lab):
    for user in (lab.alice, lab.bob):
        user.email = f"{user.username}@example.org"
        user.save()
    return lab


def tick(lab, seconds, capture):
    with capture(execute=True):
        loop.tick(lab.cluster.pk, at(seconds))


def test_the_owner_is_told_in_the_app_that_their_workload_started(
    mailboxes, django_capture_on_commit_callbacks, smtp
):
    lab = mailboxes
    w = make_workload(lab, lab.a1, gpus=2, name="llama")
    tick(lab, 0, django_capture_on_commit_callbacks)
    told = Notification.objects.get(recipient=lab.alice)
    assert (told.kind, told.title, told.link) == (
        "workload_started", f"llama (#{w.pk}) started on lab", f"/workloads/{w.pk}/"
    )
    assert smtp.received == []  # started: in the app only, by default


def test_a_requeue_is_emailed_to_the_owner_with_the_reason_and_link(
    mailboxes, django_capture_on_commit_callbacks, smtp
):
    lab = mailboxes
    overuse(lab, lab.b1, 3.0)
    bob = make_workload(lab, lab.b1, gpus=8, min_runtime=3600, name="bob-train")
    tick(lab, 0, django_capture_on_commit_callbacks)
    make_workload(lab, lab.a1, gpus=4, submitted=at(500))
    for seconds in (600, 3600, 3900):
        tick(lab, seconds, django_capture_on_commit_callbacks)
    [mail] = [m for m in smtp.received if "requeued" in m.subject]
    assert mail.to == ["bob@example.org"]
    assert mail.subject == (
        f"[Timeshare] bob-train (#{bob.pk}) was stopped and requeued: it keeps its place in "
        "the queue"
    )
    assert f"https://timeshare.example.org/workloads/{bob.pk}/" in mail.body
    assert "org/prog-b at 301% of entitlement" in mail.body


def test_a_mail_server_that_is_down_does_not_hold_up_the_tick(
    mailboxes, django_capture_on_commit_callbacks, dead_smtp
):
    lab = mailboxes
    overuse(lab, lab.b1, 3.0)
    bob = make_workload(lab, lab.b1, gpus=8, min_runtime=3600)
    tick(lab, 0, django_capture_on_commit_callbacks)
    make_workload(lab, lab.a1, gpus=4, submitted=at(500))
    for seconds in (600, 3600, 3900):
        tick(lab, seconds, django_capture_on_commit_callbacks)
    assert Workload.objects.get(pk=bob.pk).state == "PENDING"
    told = Notification.objects.get(recipient=lab.bob, kind="workload_preempted")
    assert told.emailed_at is None  # Celery retries it later; the inbox has it already


def test_a_cancel_by_someone_else_is_told_to_the_owner(
    fleet, client_for, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("scheduler.tasks.send_tick", lambda cluster_id: None)
    url = reverse("scheduler:workload_cancel", kwargs={"pk": fleet.wait.pk})
    with django_capture_on_commit_callbacks(execute=True):
        client_for("pi").post(url)
    told = Notification.objects.get(recipient=fleet.org.lead)
    assert (told.kind, told.title) == (
        "workload_cancelled", f"wait (#{fleet.wait.pk}) was cancelled by pi"
    )


def test_cancelling_your_own_workload_tells_nobody(fleet, django_capture_on_commit_callbacks,
                                                   monkeypatch):
    monkeypatch.setattr("scheduler.tasks.send_tick", lambda cluster_id: None)
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel(fleet.org.lead, fleet.wait)
    assert not Notification.objects.exists()


def test_a_cancel_form_answers_even_when_mail_is_down(
    fleet, client_for, django_capture_on_commit_callbacks, monkeypatch, dead_smtp
):
    monkeypatch.setattr("scheduler.tasks.send_tick", lambda cluster_id: None)
    fleet.org.lead.email = "lead@example.org"
    fleet.org.lead.save()
    url = reverse("scheduler:workload_cancel", kwargs={"pk": fleet.wait.pk})
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for("pi").post(url)
    assert response.status_code == 302
    assert Workload.objects.get(pk=fleet.wait.pk).state == "CANCELLED"
    assert Notification.objects.get(recipient=fleet.org.lead).emailed_at is None
