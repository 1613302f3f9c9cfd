"""Refused changes of people: a clear message, and nothing written."""

import pytest
from test_budgets_people import add, remove

from budgets import people


def test_an_unknown_user_is_refused(org, client_for, unchanged, htmx):
    with unchanged():
        response = add(client_for("lead"), org.exp_1, "nobody-here", **htmx)
    assert response.status_code == 422
    assert "Nobody has the username or email &#x27;nobody-here&#x27;" in response.content.decode()


def test_a_duplicate_member_is_refused(org, client_for, unchanged, htmx):
    with unchanged():
        response = add(client_for("pi"), org.proj_a1, "researcher", **htmx)
    assert response.status_code == 422
    assert "researcher is already a member of Project A1." in response.content.decode()


def test_removing_the_last_manager_is_refused(org, client_for, unchanged, htmx):
    with unchanged():
        response = remove(client_for("pi"), org.proj_a1, "lead", role="manager", **htmx)
    assert response.status_code == 422
    assert "lead is the last manager of Project A1: add another manager first." in (
        response.content.decode()
    )


def test_removing_someone_without_the_role_is_refused(org, client_for, unchanged, htmx):
    with unchanged():
        response = remove(client_for("pi"), org.proj_a1, "outsider", **htmx)
    assert response.status_code == 422
    assert "outsider is not a member of Project A1." in response.content.decode()


def test_an_unknown_role_is_refused(org, unchanged):
    with unchanged(), pytest.raises(people.PeopleError, match="The role must be one of"):
        people.add_person(org.ceo, org.exp_1, "outsider", "owner")


def test_an_email_shared_by_two_people_asks_for_the_username(org, unchanged):
    for user in (org.outsider, org.operator):
        user.email = "shared@example.org"
        user.save()
    with unchanged(), pytest.raises(people.PeopleError, match="give the username instead"):
        people.add_person(org.ceo, org.exp_1, "shared@example.org", "member")


def test_without_javascript_a_refusal_is_a_message_on_the_page(org, client_for, unchanged):
    with unchanged():
        response = add(client_for("lead"), org.exp_1, "nobody-here")
    assert response.status_code == 302
    page = client_for("lead").get(response["Location"]).content.decode()
    assert "Nobody has the username or email" in page
