"""The workload API mirrors the portal: who sees what (scheduler.permissions), the list's
filters (scheduler.filters, the same definition), detail with runs and timeline, submit and
cancel through scheduler.services, and JSON errors that leave nothing written.
Workloads and personas: tests/fixtures_scheduler.py."""

from datetime import UTC, datetime

import pytest

from scheduler.models import Claim, Event, Workload

LIST = "/api/workloads/"

VISIBLE = {
    "ceo": {"run", "wait", "a2", "b", "done"},
    "operator": {"run", "wait", "a2", "b", "done"},
    "pi": {"run", "wait", "a2", "done"},
    "lead": {"run", "wait", "a2", "done"},
    "researcher": {"run", "wait", "done"},
    "bob": {"b"},
    "outsider": set(),
}


def names(response):
    assert response.status_code == 200, response.content
    return {w["name"] for w in response.json()["results"]}


def submission(**overrides):
    data = {
        "name": "llama-debug",
        "budget": "org/prog-a/proj-a1/exp-1",
        "cluster": "h100",
        "gpus": 2,
        "min_runtime": 5400,
        "resumable": True,
        "command": "torchrun train.py --debug",
        "expected_duration": 7200,
    }
    data.update(overrides)
    return {key: value for key, value in data.items() if value is not None}


@pytest.mark.parametrize("persona", sorted(VISIBLE))
def test_each_persona_lists_what_the_portal_shows(fleet, api_for, persona):
    assert names(api_for(persona).get(LIST)) == VISIBLE[persona]


@pytest.mark.parametrize("persona", sorted(VISIBLE))
def test_detail_only_for_what_one_may_see(fleet, api_for, persona):
    for name, workload in fleet.workloads.items():
        response = api_for(persona).get(f"{LIST}{workload.pk}/")
        expected = 200 if name in VISIBLE[persona] else 404
        assert response.status_code == expected, (persona, name)


def test_anonymous_gets_401_json(fleet, api_for):
    response = api_for(None).get(LIST)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["detail"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"state": "PENDING"}, {"wait", "a2", "b"}),
        ({"state": "active"}, {"run", "wait", "a2", "b"}),
        ({"state": "finished"}, {"done"}),
        ({"budget": "org/prog-a"}, {"run", "wait", "a2", "done"}),
        ({"budget": "org/prog-a/proj-a1/exp-1", "state": "PENDING"}, {"wait"}),
        ({"cluster": "h100"}, {"run", "wait", "a2", "b", "done"}),
        ({"cluster": "b200"}, set()),
    ],
)
def test_filters_are_the_portals(fleet, api_for, query, expected):
    assert names(api_for("ceo").get(LIST, query)) == expected


@pytest.mark.parametrize(
    ("persona", "scope", "expected"),
    [
        ("researcher", "mine", {"run", "done"}),
        ("lead", "mine", {"wait", "a2"}),
        ("pi", "projects", {"run", "wait", "a2", "done"}),
        ("operator", "projects", set()),
    ],
)
def test_scopes(fleet, api_for, persona, scope, expected):
    assert names(api_for(persona).get(LIST, {"scope": scope})) == expected


def test_filters_never_widen_what_one_may_see(fleet, api_for):
    response = api_for("researcher").get(LIST, {"budget": "org/prog-b/proj-b1"})
    assert response.status_code == 400
    assert "not one whose workloads you may see" in str(response.json())


@pytest.mark.parametrize(
    ("query", "field"),
    [({"state": "SLEEPING"}, "state"), ({"cluster": "nope"}, "cluster"),
     ({"budget": "org/none"}, "budget"), ({"scope": "everyone"}, "scope"),
     ({"budget": "org\x00"}, "query")],  # PostgreSQL cannot even compare a NUL
)
def test_invalid_filter_is_a_400_that_says_which(fleet, api_for, query, field):
    response = api_for("ceo").get(LIST, query)
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field
    assert body["detail"].startswith(f"{field}: ")


def test_pagination(fleet, api_for):
    template = fleet.wait
    Workload.objects.bulk_create([
        Workload(name=f"bulk-{i}", owner=template.owner, budget=template.budget,
                 cluster=template.cluster, gpus=1, min_runtime=0, command="x")
        for i in range(55)
    ])
    first = api_for("ceo").get(LIST).json()
    assert first["count"] == 60
    assert len(first["results"]) == 50
    assert first["next"].endswith("?page=2")
    second = api_for("ceo").get(first["next"]).json()
    assert len(second["results"]) == 10
    assert len(api_for("ceo").get(LIST, {"page_size": 7}).json()["results"]) == 7
    assert api_for("ceo").get(LIST, {"page": 9}).status_code == 404


def test_detail_has_runs_with_hosts_and_gpus_and_the_timeline(fleet, api_for):
    body = api_for("researcher").get(f"{LIST}{fleet.run_w.pk}/").json()
    assert body["state"] == "RUNNING"
    assert body["budget"] == "org/prog-a/proj-a1/exp-1"
    assert body["can_cancel"] is True
    assert body["explanation"].startswith("running on h100-0 since")
    [run] = body["runs"]
    assert run["number"] == 1
    assert run["placement"] == [{"host": "h100-0", "gpus": [0, 1]}]
    assert [e["kind"] for e in body["events"]] == ["submitted", "started"]
    assert body["events"][1]["reason"] == "proj-a1 is at 20% of its entitlement, first in rank"
    assert body["events"][1]["run"] == 1


def test_pending_detail_says_why_it_waits(fleet, api_for):
    body = api_for("lead").get(f"{LIST}{fleet.wait.pk}/").json()
    assert body["queue_position"] == 1
    assert body["explanation"] == "#1 in the queue of h100: needs 4 GPUs, 3 free on one host"
    assert body["can_cancel"] is True


def test_pending_detail_names_the_gpus_claimed_for_it(fleet, api_for):
    since = datetime(2026, 3, 2, 9, 15, 30, tzinfo=UTC)
    Claim.objects.create(workload=fleet.wait, host=fleet.h100_1, gpus=3,
                         displaced=["org/prog-b"], since=since)
    body = api_for("lead").get(f"{LIST}{fleet.wait.pk}/").json()
    assert body["explanation"] == (
        "#1 in the queue of h100: needs 4 GPUs, 3 free on one host; GPUs (3 on h100-1) "
        "claimed for it since 09:15:30 after preempting runs of org/prog-b"
    )


def test_submit(fleet, api_for):
    response = api_for("researcher").post(LIST, submission(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    workload = Workload.objects.get(pk=body["id"])
    assert (workload.owner, workload.budget, workload.gpus, workload.min_runtime) == (
        fleet.org.researcher, fleet.org.exp_1, 2, 5400
    )
    assert workload.resumable and workload.expected_duration == 7200
    assert body["state"] == "PENDING"
    assert [e["kind"] for e in body["events"]] == ["submitted"]
    assert "protected for 90 min once started" in body["events"][0]["reason"]


def test_submit_unallocated(fleet, api_for):
    response = api_for("lead").post(
        LIST, submission(budget="org/prog-a/proj-a2", min_runtime=0, resumable=None),
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["allocated"] is False
    assert response.json()["resumable"] is False


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"gpus": 11}, "gpus", "11 GPUs can never be placed: the cluster has 10 GPUs"),
        ({"gpus": 0}, "gpus", "greater than or equal to 1"),
        ({"gpus": "two"}, "gpus", "valid integer"),
        ({"gpus": 1.5}, "gpus", "valid integer"),
        ({"min_runtime": 8 * 3600 + 60}, "min_runtime", "between 0 and 8 h"),
        ({"min_runtime": -5}, "min_runtime", "greater than or equal to 0"),
        ({"min_runtime": None}, "min_runtime", "required"),
        ({"expected_duration": 0}, "expected_duration", "greater than or equal to 1"),
        ({"name": ""}, "name", "may not be blank"),
        ({"name": "x" * 101}, "name", "no more than 100 characters"),
        ({"command": "   "}, "command", "may not be blank"),
        ({"command": "a\x00b"}, "body", "NUL characters are not allowed"),
        ({"cluster": "nope"}, "cluster", "does not exist"),
        ({"cluster": "h1\x0000"}, "body", "NUL characters are not allowed"),
        ({"budget": "org/nowhere"}, "budget", "does not exist"),
        # proj-a1 has a child: work is charged to exp-1.
        ({"budget": "org/prog-a/proj-a1"}, "budget", "is not a leaf budget"),
        # exp-1 holds no shares on b200: protected time there is refused, never downgraded.
        ({"cluster": "b200", "min_runtime": 1800}, "min_runtime", "has no allocation"),
    ],
)
def test_bad_submission_is_a_400_on_that_field_and_writes_nothing(
    fleet, api_for, nothing_written, overrides, field, words
):
    with nothing_written():
        response = api_for("researcher").post(LIST, submission(**overrides), format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field
    assert words in body["detail"]


def test_not_json_is_a_400(fleet, api_for, nothing_written):
    with nothing_written():
        response = api_for("researcher").post(
            LIST, "{not json", content_type="application/json"
        )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


def test_budget_you_are_not_a_member_of_is_403(fleet, api_for, nothing_written):
    with nothing_written():
        response = api_for("researcher").post(
            LIST, submission(budget="org/prog-b/proj-b1"), format="json"
        )
    assert response.status_code == 403
    assert response.json()["detail"] == "You are not a member of org/prog-b/proj-b1."


def test_outsider_cannot_even_name_a_budget(fleet, api_for, nothing_written):
    with nothing_written():
        response = api_for("outsider").post(LIST, submission(), format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "budget"


@pytest.mark.parametrize("persona", ["pi", "ceo", "operator"])
def test_managers_and_operators_without_a_leaf_cannot_submit(
    fleet, api_for, nothing_written, persona
):
    with nothing_written():
        response = api_for(persona).post(LIST, submission(), format="json")
    assert response.status_code == 403


@pytest.mark.parametrize("persona", ["researcher", "lead", "pi", "ceo", "operator"])
def test_cancel_by_owner_manager_or_operator(fleet, api_for, persona):
    response = api_for(persona).post(f"{LIST}{fleet.run_w.pk}/cancel/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "CANCELLED"
    assert body["runs"][0]["end_reason"] == "cancelled"
    assert body["events"][-1]["reason"].startswith(f"cancelled by {persona}")
    assert fleet.run.assigned_gpus.filter(held=True).count() == 0


def test_researcher_cannot_cancel_a_colleagues_workload(fleet, api_for, nothing_written):
    """The researcher sees `wait` (a member of exp-1) but it is the lead's."""
    with nothing_written():
        response = api_for("researcher").post(f"{LIST}{fleet.wait.pk}/cancel/")
    assert response.status_code == 403
    assert "Only the owner" in response.json()["detail"]


@pytest.mark.parametrize("persona", ["bob", "outsider"])
def test_cancel_what_one_cannot_see_is_404(fleet, api_for, nothing_written, persona):
    with nothing_written():
        response = api_for(persona).post(f"{LIST}{fleet.run_w.pk}/cancel/")
    assert response.status_code == 404


def test_cancel_a_finished_workload_is_a_400(fleet, api_for, nothing_written):
    with nothing_written():
        response = api_for("researcher").post(f"{LIST}{fleet.done.pk}/cancel/")
    assert response.status_code == 400
    assert response.json()["detail"] == "done is already completed."


def test_session_auth_needs_csrf(fleet, client_for):
    """The browser's session works too, with Django's CSRF protection on writes."""
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(fleet.org.researcher)
    assert client.get(LIST).status_code == 200
    response = client.post(f"{LIST}{fleet.run_w.pk}/cancel/")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert Workload.objects.get(pk=fleet.run_w.pk).state == "RUNNING"
    assert not Event.objects.filter(workload=fleet.run_w, kind="cancelled").exists()


def test_list_query_count_does_not_grow_with_rows(fleet, api_for, django_assert_max_num_queries):
    template = fleet.wait
    Workload.objects.bulk_create([
        Workload(name=f"bulk-{i}", owner=template.owner, budget=template.budget,
                 cluster=template.cluster, gpus=1, min_runtime=0, command="x")
        for i in range(40)
    ])
    client = api_for("pi")
    client.get(LIST)  # token last_used, roles
    with django_assert_max_num_queries(8):
        assert len(client.get(LIST).json()["results"]) == 44
