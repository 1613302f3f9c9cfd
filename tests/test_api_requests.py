"""Change requests over the API: the parent's managers decide, never the requester; a
decided request is a 409; everyone sees only what budgets.permissions lets them see."""

import pytest

from budgets import services
from budgets.models import ChangeRequest

LIST = "/api/requests/"


@pytest.fixture
def lead_request(org):
    """The lead asks Program A's managers (the PI) for 75 shares for Project A1."""
    return services.request_change(org.lead, org.proj_a1, org.cluster, shares=75,
                                   reason="new hires")


def ask(client, **data):
    body = {"node": "org/prog-a/proj-a1", "cluster": "h100", "reason": "new hires", **data}
    return client.post(LIST, body, format="json")


def test_lead_asks_and_sees_the_effect(org, api_for, unchanged, shares_of):
    response = ask(api_for("lead"), shares=75)
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["node"], body["requested_shares"], body["shares_before"], body["state"]) == (
        "org/prog-a/proj-a1", 75, 50, "pending"
    )
    assert body["can_withdraw"] is True and body["can_decide"] is False
    effects = {e["budget"]: (round(e["before"], 1), round(e["after"], 1))
               for e in body["effects"]}
    assert effects == {"org/prog-a/proj-a1": (35.0, 42.0), "org/prog-a/proj-a2": (35.0, 28.0)}
    assert shares_of(org.proj_a1) == 50  # nothing changes before a decision


def test_ask_in_percent_of_the_parent(org, api_for):
    response = ask(api_for("lead"), percent=60)
    assert response.status_code == 201, response.content
    assert response.json()["requested_shares"] == 75  # 60% of A1+A2 with A2 at 50


@pytest.mark.parametrize(
    ("data", "field", "status"),
    [
        ({"shares": 75, "percent": 60}, "shares", 400),
        ({}, "shares", 400),
        ({"shares": 50}, "shares", 400),  # already 50
        ({"shares": 0}, "shares", 400),
        ({"percent": 100}, "percent", 400),
        ({"percent": 101}, "percent", 400),
        ({"shares": 75, "reason": " "}, "reason", 400),
        ({"shares": 75, "node": "org/nowhere"}, "node", 400),
        ({"shares": 75, "cluster": "nope"}, "cluster", 400),
    ],
)
def test_bad_requests_are_400_and_write_nothing(org, api_for, unchanged, data, field, status):
    with unchanged():
        response = ask(api_for("lead"), **data)
    assert response.status_code == status
    assert response.json()["field"] == field


@pytest.mark.parametrize("persona", ["pi", "ceo", "operator"])
def test_only_the_nodes_managers_and_members_ask(org, api_for, unchanged, persona):
    with unchanged():
        response = ask(api_for(persona), shares=75)
    assert response.status_code == 403
    assert response.json()["detail"] == (
        "Only the managers and members of org/prog-a/proj-a1 may ask for more for it."
    )


def test_a_second_pending_request_is_refused(org, api_for, lead_request, unchanged):
    with unchanged():
        response = ask(api_for("lead"), shares=80)
    assert response.status_code == 400
    assert "already has a pending request" in response.json()["detail"]


@pytest.mark.parametrize(
    ("persona", "sees"),
    [("lead", True), ("pi", True), ("ceo", True), ("researcher", False), ("outsider", False),
     ("operator", False)],
)
def test_who_sees_a_request(org, api_for, lead_request, persona, sees):
    listed = api_for(persona).get(LIST).json()["results"]
    assert [r["id"] for r in listed] == ([lead_request.pk] if sees else [])
    detail = api_for(persona).get(f"{LIST}{lead_request.pk}/")
    assert detail.status_code == (200 if sees else 404)


def test_to_decide_and_state_filters(org, api_for, lead_request):
    mine = api_for("pi").get(LIST, {"to_decide": "true"}).json()["results"]
    assert [r["id"] for r in mine] == [lead_request.pk]
    assert mine[0]["can_decide"] is True
    assert api_for("lead").get(LIST, {"to_decide": "true"}).json()["results"] == []
    assert api_for("ceo").get(LIST, {"to_decide": "true"}).json()["results"] == []
    assert api_for("pi").get(LIST, {"state": "approved"}).json()["results"] == []
    response = api_for("pi").get(LIST, {"state": "maybe"})
    assert response.status_code == 400 and response.json()["field"] == "state"


def test_pi_approves_and_the_shares_change(org, api_for, lead_request, shares_of):
    response = api_for("pi").post(f"{LIST}{lead_request.pk}/approve/", {"comment": "fine"},
                                  format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["state"], body["decided_by"], body["decision_comment"]) == (
        "approved", "pi", "fine"
    )
    assert shares_of(org.proj_a1) == 75


def test_pi_rejects_with_a_comment(org, api_for, lead_request, shares_of):
    response = api_for("pi").post(f"{LIST}{lead_request.pk}/reject/",
                                  {"comment": "not this quarter"}, format="json")
    assert response.status_code == 200
    assert response.json()["state"] == "rejected"
    assert shares_of(org.proj_a1) == 50


def test_reject_without_a_comment_is_a_400(org, api_for, lead_request, unchanged):
    with unchanged():
        response = api_for("pi").post(f"{LIST}{lead_request.pk}/reject/")
    assert response.status_code == 400
    assert response.json() == {"detail": "Say why the request is rejected.", "field": "comment"}


@pytest.mark.parametrize(
    ("persona", "status"),
    [("lead", 403), ("ceo", 403), ("researcher", 404), ("outsider", 404), ("operator", 404)],
)
def test_nobody_else_decides(org, api_for, lead_request, unchanged, persona, status):
    for verb in ("approve", "reject"):
        with unchanged():
            response = api_for(persona).post(f"{LIST}{lead_request.pk}/{verb}/",
                                             {"comment": "x"}, format="json")
        assert response.status_code == status
        assert response.json()["detail"]


def test_the_requester_never_approves_their_own(org, api_for, lead_request):
    response = api_for("lead").post(f"{LIST}{lead_request.pk}/approve/")
    assert response.json()["detail"] == "Nobody approves their own request."


def test_deciding_twice_is_a_409(org, api_for, lead_request, unchanged):
    api_for("pi").post(f"{LIST}{lead_request.pk}/approve/")
    with unchanged():
        response = api_for("pi").post(f"{LIST}{lead_request.pk}/reject/", {"comment": "oops"},
                                      format="json")
    assert response.status_code == 409
    assert response.json()["detail"] == "This request was already approved by pi."


def test_withdraw(org, api_for, lead_request):
    response = api_for("lead").post(f"{LIST}{lead_request.pk}/withdraw/")
    assert response.status_code == 200
    assert response.json()["state"] == "withdrawn"
    again = api_for("lead").post(f"{LIST}{lead_request.pk}/withdraw/")
    assert again.status_code == 409


def test_only_the_requester_withdraws(org, api_for, lead_request, unchanged):
    with unchanged():
        response = api_for("pi").post(f"{LIST}{lead_request.pk}/withdraw/")
    assert response.status_code == 403
    assert ChangeRequest.objects.get(pk=lead_request.pk).state == "pending"


def test_a_member_asks_for_a_boost(org, api_for):
    response = api_for("researcher").post(LIST, {
        "node": "org/prog-a/proj-a1", "cluster": "h100", "kind": "boost", "shares": 70,
        "boost_until": "2099-01-01T00:00:00Z", "reason": "deadline",
    }, format="json")
    assert response.status_code == 201
    body = response.json()
    assert (body["kind"], body["deciding_node"], body["boost_until"]) == (
        "boost", "org/prog-a", "2099-01-01T00:00:00Z"
    )
    assert [e["kind"] for e in body["entries"]] == ["filed"]


def test_an_unknown_kind_is_400(org, api_for, unchanged):
    with unchanged():
        response = api_for("lead").post(LIST, {
            "node": "org/prog-a/proj-a1", "cluster": "h100", "kind": "gift", "shares": 70,
            "reason": "x",
        }, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "kind"


def test_comment_and_pass_up(org, api_for, lead_request):
    url = f"{LIST}{lead_request.pk}/"
    response = api_for("lead").post(url + "comment/", {"text": "any news?"}, format="json")
    assert response.status_code == 201
    response = api_for("pi").post(url + "pass-up/", {"comment": "above me"}, format="json")
    assert response.json()["deciding_node"] == "org"
    assert [(e["kind"], e["author"]) for e in response.json()["entries"]] == [
        ("filed", "lead"), ("comment", "lead"), ("passed_up", "pi")
    ]
    assert api_for("ceo").get(url).json()["can_decide"] is True
