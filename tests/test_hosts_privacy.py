"""Hosts pages and the hosts API name only the workloads the viewer may see: another
budget's run shows as "a workload of another budget", with no name, owner or link.

On top of fixtures_scheduler's fleet, bob's workload `b` (proj-b1, program B) runs on
h100-1 GPU 0; `run` (researcher, exp-1) runs on h100-0."""

from datetime import timedelta

import pytest
from django.urls import reverse
from fixtures_scheduler import T0

from scheduler.models import Run, RunGPU, Workload

ANOTHER = "a workload of another budget"


@pytest.fixture
def b_running(fleet):
    fleet.b.state = Workload.State.RUNNING
    fleet.b.save()
    run = Run.objects.create(workload=fleet.b, number=1, allocated=True, gpus=1, started=T0,
                             protected_until=T0 + timedelta(hours=1), accounted_until=T0)
    RunGPU.objects.create(run=run, host=fleet.h100_1, index=0)
    return fleet


def host_page(client, host):
    return client.get(reverse("scheduler:host", args=[host.pk])).content.decode()


def hosts_page(client):
    return client.get(reverse("scheduler:hosts", args=["h100"])).content.decode()


@pytest.mark.parametrize("persona", ["pi", "lead", "researcher"])
def test_program_a_does_not_see_bobs_workload_on_the_host_page(b_running, client_for, persona):
    body = host_page(client_for(persona), b_running.h100_1)
    assert ANOTHER in body
    assert "bob" not in body
    assert reverse("scheduler:workload", args=[b_running.b.pk]) not in body


@pytest.mark.parametrize("persona", ["pi", "lead", "researcher"])
def test_program_a_does_not_see_bobs_workload_on_the_cluster_page(b_running, client_for,
                                                                   persona):
    body = hosts_page(client_for(persona))
    assert ANOTHER in body
    assert reverse("scheduler:workload", args=[b_running.b.pk]) not in body
    assert "proj-b1" not in body


@pytest.mark.parametrize("persona", ["ceo", "operator"])
def test_those_who_see_every_workload_see_it_named(b_running, client_for, persona):
    body = host_page(client_for(persona), b_running.h100_1)
    assert ANOTHER not in body
    assert reverse("scheduler:workload", args=[b_running.b.pk]) in body
    assert "bob" in body


def test_the_researcher_sees_her_own_run_named(b_running, client_for):
    body = host_page(client_for("researcher"), b_running.h100_0)
    assert reverse("scheduler:workload", args=[b_running.run_w.pk]) in body
    assert ANOTHER not in body


def test_the_hosts_api_hides_another_budgets_workload(b_running, api_for):
    body = api_for("researcher").get(f"/api/hosts/{b_running.h100_1.pk}/").json()
    (holder,) = body["holders"]
    assert holder == {"workload": None, "name": None, "owner": None, "budget": None,
                      "allocated": True, "gpus": [0]}


def test_the_hosts_api_names_it_for_its_owner(b_running, api_for):
    body = api_for("bob").get(f"/api/hosts/{b_running.h100_1.pk}/").json()
    (holder,) = body["holders"]
    assert (holder["name"], holder["owner"], holder["budget"]) == ("b", "bob", "org/prog-b/proj-b1")
