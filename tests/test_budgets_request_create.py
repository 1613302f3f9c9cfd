"""Asking for a different share of your own budget: only its direct managers may ask."""

from decimal import Decimal

import pytest
from django.urls import reverse

from budgets.models import ChangeRequest


def create_url(node):
    return reverse("budgets:request_create", kwargs={"pk": node.pk})


def ask(client, org, node, **fields):
    data = {"cluster": org.cluster.pk, "reason": "a new hire", **fields}
    return client.post(create_url(node), {k: v for k, v in data.items() if v is not None})


def test_lead_opens_the_form_for_its_project(org, client_for):
    response = client_for("lead").get(create_url(org.proj_a1), {"cluster": org.cluster.pk})
    assert response.status_code == 200
    assert 'name="percent"' in response.content.decode()


def test_lead_asks_for_shares_and_sees_its_request(org, client_for):
    response = ask(client_for("lead"), org, org.proj_a1, shares=75)
    request = ChangeRequest.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("budgets:request", kwargs={"pk": request.pk})
    assert (request.node, request.cluster, request.requested_by) == (
        org.proj_a1, org.cluster, org.lead
    )
    assert (request.shares_before, request.requested_shares, request.requested_percent) == (
        50, 75, None
    )
    assert (request.state, request.reason) == ("pending", "a new hire")
    page = client_for("lead").get(response["Location"])
    assert page.status_code == 200 and "pending" in page.content.decode()


def test_lead_asks_for_a_percentage_which_becomes_shares(org, client_for):
    # 60% of Program A with sibling A2 unchanged at 50: s / (s + 50) = 0.6 -> s = 75.
    ask(client_for("lead"), org, org.proj_a1, percent="60")
    request = ChangeRequest.objects.get()
    assert request.requested_shares == 75
    assert request.requested_percent == Decimal("60.00")


def test_pi_asks_for_its_program(org, client_for):
    assert ask(client_for("pi"), org, org.prog_a, shares=90).status_code == 302
    assert ChangeRequest.objects.get().node == org.prog_a


def test_asking_does_not_change_the_shares_yet(org, client_for, shares_of):
    ask(client_for("lead"), org, org.proj_a1, shares=75)
    assert shares_of(org.proj_a1) == 50


@pytest.mark.parametrize(
    ("persona", "node"),
    [
        ("researcher", "proj_a2"),  # a member of proj-a1 only
        ("pi", "proj_a1"),  # the PI edits it directly instead
        ("ceo", "prog_a"),
        ("ceo", "root"),  # the root holds the whole cluster, nobody above it
        ("lead", "prog_a"),
        ("operator", "proj_a1"),
        ("outsider", "proj_a1"),
    ],
)
def test_who_neither_manages_nor_belongs_to_the_node_gets_403(
    org, client_for, unchanged, persona, node
):
    client = client_for(persona)
    assert client.get(create_url(getattr(org, node))).status_code == 403
    with unchanged():
        assert ask(client, org, getattr(org, node), shares=75).status_code == 403


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"shares": 0}, "shares", "greater than or equal to 1"),
        ({"shares": -3}, "shares", "greater than or equal to 1"),
        ({"shares": "many"}, "shares", "Enter a whole number"),
        ({"shares": 1_000_001}, "shares", "less than or equal to 1000000"),
        ({"shares": 50}, "shares", "Project A1 already has 50 shares."),
        ({"percent": "0"}, "percent", "greater than or equal to 0.01"),
        ({"percent": "100"}, "percent", "less than or equal to 99.99"),
        ({"percent": "abc"}, "percent", "Enter a number"),
        ({"percent": "-10"}, "percent", "greater than or equal to 0.01"),
        ({"shares": 75, "reason": ""}, "reason", "This field is required"),
        ({"shares": 75, "reason": "   "}, "reason", "This field is required"),
        ({}, "__all__", "Ask for either shares or a percentage of the parent."),
        ({"shares": 75, "percent": "60"}, "__all__",
         "Ask for either shares or a percentage of the parent."),
    ],
)
def test_bad_request_answers_422_with_a_field_error(org, client_for, unchanged, fields, field,
                                                    message):
    with unchanged():
        response = ask(client_for("lead"), org, org.proj_a1, **fields)
    assert response.status_code == 422
    assert any(message in error for error in response.context["form"].errors[field])


def test_percent_without_siblings_is_a_field_error(org, client_for, unchanged):
    from budgets import services

    services.set_shares(org.ceo, org.exp_1, org.cluster, 100)  # exp-1 is an only child
    org.exp_1.managers.add(org.researcher)
    with unchanged():
        response = ask(client_for("researcher"), org, org.exp_1, percent="50")
    assert response.status_code == 422
    assert "no siblings" in response.context["form"].errors["percent"][0]


def test_second_pending_request_for_the_same_allocation_is_refused(org, client_for, unchanged):
    lead = client_for("lead")
    ask(lead, org, org.proj_a1, shares=75)
    with unchanged():
        response = ask(lead, org, org.proj_a1, shares=80)
    assert response.status_code == 422
    assert "already has a pending request" in response.content.decode()
