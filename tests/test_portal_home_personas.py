"""The home page: every logged-in persona gets it, showing the budgets they manage or charge."""

import pytest
from django.urls import reverse


@pytest.mark.parametrize(
    ("persona", "mine"),
    [
        ("ceo", {"org"}),
        ("pi", {"org/prog-a"}),
        ("lead", {"org/prog-a/proj-a1"}),
        ("researcher", {"org/prog-a/proj-a1"}),
        ("operator", set()),
        ("outsider", set()),
    ],
)
def test_home_shows_your_own_budgets(org, client_for, persona, mine):
    response = client_for(persona).get(reverse("home"))
    assert response.status_code == 200
    ((cluster, rows),) = response.context["clusters"]
    assert {row.node.path for row in rows} == mine


def test_home_needs_a_login(org, client_for):
    response = client_for(None).get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
