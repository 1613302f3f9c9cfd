"""People over the API: the same rules and messages as the budget page."""

import pytest

from budgets.models import MembershipChange
from scheduler.models import Workload


def people_url(node, remove=False):
    return f"/api/budgets/{node.pk}/people/" + ("remove/" if remove else "")


def test_anyone_with_a_role_reads_the_people_of_a_budget(org, api_for):
    body = api_for("researcher").get(people_url(org.proj_a1)).json()
    assert [p["username"] for p in body["managers"]] == ["lead"]
    assert [p["username"] for p in body["members"]] == ["researcher"]
    assert (body["reviewers"], body["can_manage"]) == ([], False)


def test_a_manager_adds_a_member_by_email(org, api_for):
    org.outsider.email = "new@example.org"
    org.outsider.save()
    response = api_for("lead").post(
        people_url(org.exp_1), {"person": "new@example.org", "reason": "joins"}, format="json"
    )
    assert response.status_code == 201
    assert [p["username"] for p in response.json()["members"]] == ["outsider"]
    assert response.json()["changes"][0]["changed_by"] == "lead"


@pytest.mark.parametrize(("persona", "node"), [("pi", "prog_b"), ("lead", "proj_a2"),
                                               ("researcher", "exp_1"), ("operator", "exp_1")])
def test_nobody_adds_people_outside_their_subtree(org, api_for, unchanged, persona, node):
    with unchanged():
        response = api_for(persona).post(people_url(getattr(org, node)),
                                         {"person": "outsider"}, format="json")
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("body", "words"),
    [({"person": "ghost"}, "Nobody has the username or email 'ghost'."),
     ({"person": "researcher"}, "researcher is already a member of Project A1."),
     ({"person": "outsider", "role": "owner"}, "role: "),
     ({"person": ""}, "person: ")],
)
def test_bad_additions_are_400_with_a_message(org, api_for, unchanged, body, words):
    with unchanged():
        response = api_for("pi").post(people_url(org.proj_a1), body, format="json")
    assert response.status_code == 400
    assert words in response.json()["detail"]


def test_removing_the_last_manager_is_400(org, api_for, unchanged):
    with unchanged():
        response = api_for("ceo").post(people_url(org.prog_a, remove=True),
                                       {"person": "pi", "role": "manager"}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == (
        "pi is the last manager of Program A: add another manager first."
    )


def test_a_leaving_members_work_moves_by_path(fleet, api_for, monkeypatch):
    monkeypatch.setattr("scheduler.tasks.send_tick", lambda cluster_id: None)
    org = fleet.org
    response = api_for("pi").post(
        people_url(org.exp_1, remove=True),
        {"person": "lead", "move_to": "org/prog-a/proj-a2", "reason": "reorganised"},
        format="json",
    )
    assert response.status_code == 200
    assert Workload.objects.get(pk=fleet.wait.pk).budget == org.proj_a2
    assert MembershipChange.objects.get().outcome == (
        "1 pending workload(s) moved to org/prog-a/proj-a2"
    )


def test_people_search_is_for_managers(org, api_for):
    assert [p["username"] for p in api_for("pi").get("/api/people/?q=outs").json()] == [
        "outsider"
    ]
    assert api_for("researcher").get("/api/people/?q=outs").json() == []
