"""Clusters and hosts over the API: anyone with a role reads them, operators drain, return
and repair (through scheduler.services), everyone else gets 403 and nothing changes."""

import pytest

from fleet.models import Host, HostEvent

READERS = ["ceo", "pi", "lead", "researcher", "operator", "bob"]


@pytest.mark.parametrize("persona", READERS)
def test_everyone_with_a_role_reads_clusters_and_hosts(fleet, api_for, persona):
    clusters = api_for(persona).get("/api/clusters/")
    assert clusters.status_code == 200
    assert [c["name"] for c in clusters.json()] == ["b200", "h100"]
    hosts = api_for(persona).get("/api/hosts/", {"cluster": "h100"})
    assert [h["name"] for h in hosts.json()["results"]] == ["h100-0", "h100-1"]


def test_outsider_reads_no_fleet(fleet, api_for):
    for url in ["/api/clusters/", "/api/clusters/h100/", "/api/hosts/",
                f"/api/hosts/{fleet.h100_0.pk}/"]:
        response = api_for("outsider").get(url)
        assert response.status_code == 403, url
        assert response.json()["detail"] == "You have no role in this organisation."


def test_cluster_gpus_and_queue(fleet, api_for):
    h100 = api_for("pi").get("/api/clusters/h100/").json()
    assert h100["gpus"] == 10
    assert h100["gpu_states"] == {"allocated": 2, "unallocated": 0, "free": 8, "unavailable": 0}
    assert h100["host_states"]["AVAILABLE"] == 2
    assert (h100["pending_workloads"], h100["pending_gpus"]) == (3, 6)
    assert api_for("pi").get("/api/clusters/nope/").status_code == 404


def test_host_detail_shows_who_holds_its_gpus(fleet, api_for):
    body = api_for("researcher").get(f"/api/hosts/{fleet.h100_0.pk}/").json()
    assert body["busy_gpus"] == 2
    assert body["holders"] == [{
        "workload": fleet.run_w.pk, "name": "run", "owner": "researcher",
        "budget": "org/prog-a/proj-a1/exp-1", "allocated": True, "gpus": [0, 1],
    }]


@pytest.mark.parametrize(("query", "field"), [({"state": "ASLEEP"}, "state"),
                                              ({"cluster": "nope"}, "cluster")])
def test_bad_host_filter_is_a_400(fleet, api_for, query, field):
    response = api_for("ceo").get("/api/hosts/", query)
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_state_filter(fleet, api_for):
    Host.objects.filter(pk=fleet.h100_1.pk).update(state="DOWN")
    hosts = api_for("ceo").get("/api/hosts/", {"state": "DOWN"}).json()["results"]
    assert [h["name"] for h in hosts] == ["h100-1"]


def test_operator_drains_and_returns_a_host(fleet, api_for):
    url = f"/api/hosts/{fleet.h100_1.pk}/"
    response = api_for("operator").post(url + "drain/", {"reason": "GPU 3 ECC errors"},
                                        format="json")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "DRAINING"
    assert response.json()["events"][0]["kind"] == "drain_requested"
    assert response.json()["events"][0]["by"] == "operator"
    back = api_for("operator").post(url + "return/", {"reason": "false alarm"}, format="json")
    assert back.status_code == 200
    assert back.json()["state"] == "AVAILABLE"


def test_drain_needs_a_reason(fleet, api_for, nothing_written):
    with nothing_written():
        response = api_for("operator").post(f"/api/hosts/{fleet.h100_1.pk}/drain/")
    assert response.status_code == 400
    assert response.json() == {"detail": "Say why the host is drained.", "field": "reason"}


def test_actions_the_state_does_not_allow_are_400(fleet, api_for, nothing_written):
    url = f"/api/hosts/{fleet.h100_1.pk}/"
    with nothing_written():
        returned = api_for("operator").post(url + "return/")
        repaired = api_for("operator").post(url + "repair/")
    assert returned.status_code == 400
    assert "only a draining or drained host returns" in returned.json()["detail"]
    assert repaired.status_code == 400


def test_operator_repairs_an_escalated_host(fleet, api_for):
    Host.objects.filter(pk=fleet.h100_1.pk).update(state="ESCALATED")
    response = api_for("operator").post(f"/api/hosts/{fleet.h100_1.pk}/repair/",
                                        {"reason": "reseated GPU 2"}, format="json")
    assert response.status_code == 200
    assert response.json()["state"] == "AVAILABLE"
    assert HostEvent.objects.filter(kind="repair_succeeded", needed_human=True).count() == 1


@pytest.mark.parametrize("persona", ["ceo", "pi", "lead", "researcher", "outsider"])
def test_only_operators_act_on_hosts(fleet, api_for, nothing_written, persona):
    for verb in ("drain", "return", "repair"):
        with nothing_written():
            response = api_for(persona).post(f"/api/hosts/{fleet.h100_1.pk}/{verb}/",
                                             {"reason": "x"}, format="json")
        assert response.status_code == 403
        assert response.json()["detail"]
