"""Submit through the UI, see the run start: the browser's form POST (Django's test client,
logged in as a member of the budget) queues the workload, and the REAL Celery worker process
(tests/integration/conftest.py) starts its run. The page the researcher is sent to then shows
it running, on which GPUs."""

import pytest
from django.test import Client
from django.urls import reverse
from polling import wait_for

from scheduler.models import Event, Run, Workload

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_workload_submitted_through_the_form_starts_on_the_worker(lab, celery_worker):
    browser = Client()
    browser.force_login(lab.alice)
    form = browser.get(reverse("scheduler:workload_create")).context["form"]
    response = browser.post(reverse("scheduler:workload_create"), {
        "submit_token": form["submit_token"].value(),
        "name": "ui-submitted", "budget": lab.a1.pk, "cluster": lab.cluster.pk, "gpus": "2",
        "min_runtime": "1", "resumable": "on", "command": "python train.py",
        "expected_duration": "",
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    w = Workload.objects.get(name="ui-submitted")
    assert response["Location"] == reverse("scheduler:workload", args=[w.pk])
    assert (w.owner, w.budget, w.gpus, w.min_runtime, w.resumable) == (
        lab.alice, lab.a1, 2, 60, True)

    wait_for(lambda: Workload.objects.get(pk=w.pk).state == "RUNNING",
             what="the worker to start the run")
    run = Run.objects.get(workload=w)
    assert run.assigned_gpus.filter(held=True).count() == 2 and run.allocated
    assert list(Event.objects.filter(workload=w).values_list("kind", flat=True)[:2]) == [
        "submitted", "started"]
    page = browser.get(reverse("scheduler:workload", args=[w.pk])).content.decode()
    host = run.assigned_gpus.first().host.name
    assert "Running" in page and "Started</strong>" in page and host in page
