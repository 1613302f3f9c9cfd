"""People on the budget page: managers at or above a node add and remove its managers,
members and reviewers (htmx swaps the #people card); every change is in the membership log."""

import pytest
from django.urls import reverse

from budgets.models import MembershipChange


def add(client, node, person, role="member", reason="", **headers):
    return client.post(
        reverse("budgets:node_people_add", kwargs={"pk": node.pk}),
        {"person": person, "role": role, "reason": reason}, **headers,
    )


def remove(client, node, person, role="member", reason="", move_to="", **headers):
    return client.post(
        reverse("budgets:node_people_remove", kwargs={"pk": node.pk}),
        {"person": person, "role": role, "reason": reason, "move_to": move_to}, **headers,
    )


@pytest.mark.parametrize(
    ("persona", "node"),
    [("ceo", "proj_b1"), ("ceo", "root"), ("pi", "prog_a"), ("pi", "exp_1"),
     ("lead", "proj_a1"), ("lead", "exp_1")],
)
def test_managers_add_members_at_or_below_their_node(org, client_for, persona, node):
    target = getattr(org, node)
    response = add(client_for(persona), target, "outsider", reason="joins the team")
    assert response.status_code == 302
    assert target.members.filter(username="outsider").exists()


@pytest.mark.parametrize(
    ("persona", "node"),
    [("pi", "prog_b"), ("pi", "root"), ("lead", "prog_a"), ("lead", "proj_a2"),
     ("researcher", "proj_a1"), ("operator", "exp_1"), ("outsider", "exp_1")],
)
def test_nobody_manages_people_outside_their_subtree(org, client_for, unchanged, persona, node):
    with unchanged():
        response = add(client_for(persona), getattr(org, node), "outsider")
    assert response.status_code == 403


def test_an_addition_is_logged_with_who_when_and_why(org, client_for):
    add(client_for("pi"), org.proj_a2, "outsider", role="manager", reason="new project lead")
    entry = MembershipChange.objects.get()
    assert (entry.node, entry.person_name, entry.role, entry.action) == (
        org.proj_a2, "outsider", "manager", "added"
    )
    assert (entry.changed_by_name, entry.reason) == ("pi", "new project lead")


def test_a_new_manager_manages_at_once(org, client_for):
    add(client_for("pi"), org.proj_a2, "outsider", role="manager")
    response = add(client_for("outsider"), org.proj_a2, "researcher")
    assert response.status_code == 302
    assert org.proj_a2.members.filter(username="researcher").exists()


def test_people_are_found_by_email(org, client_for):
    org.outsider.email = "Sam.Outsider@example.org"
    org.outsider.save()
    add(client_for("lead"), org.exp_1, "sam.outsider@EXAMPLE.org")
    assert list(org.exp_1.members.values_list("username", flat=True)) == ["outsider"]


def test_htmx_answers_the_people_card_with_the_new_member(org, client_for, htmx):
    response = add(client_for("lead"), org.exp_1, "outsider", **htmx)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section class="card" id="people">')
    assert "(outsider)" in body and "added as member" in body


def test_the_budget_page_offers_the_people_form_only_to_managers(org, client_for):
    url = reverse("budgets:node", kwargs={"pk": org.exp_1.pk})
    assert 'name="person"' in client_for("lead").get(url).content.decode()
    assert 'name="person"' not in client_for("researcher").get(url).content.decode()


def test_removing_a_manager_is_logged(org, client_for):
    org.proj_a1.managers.add(org.researcher)
    response = remove(client_for("pi"), org.proj_a1, "lead", role="manager", reason="left")
    assert response.status_code == 302
    assert list(org.proj_a1.managers.values_list("username", flat=True)) == ["researcher"]
    entry = MembershipChange.objects.get()
    assert (entry.person_name, entry.role, entry.action, entry.reason) == (
        "lead", "manager", "removed", "left"
    )


def test_the_search_suggests_people_to_managers_only(org, client_for):
    org.outsider.email = "sam@example.org"
    org.outsider.save()
    url = reverse("budgets:people_search")
    found = client_for("lead").get(url, {"person": "sam@"}).content.decode()
    assert 'value="outsider"' in found
    assert client_for("researcher").get(url, {"person": "sam@"}).content.decode().strip() == ""
