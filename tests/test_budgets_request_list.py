"""The request list: a queue of what awaits you, your own requests, the rest of your subtree."""

import pytest
from django.urls import reverse

from budgets import services


@pytest.fixture
def requests_(org):
    return {
        "a1": services.request_change(org.lead, org.proj_a1, org.cluster, shares=75,
                                      reason="new hires"),
        "prog_a": services.request_change(org.pi, org.prog_a, org.cluster, shares=90,
                                          reason="bigger models"),
    }


def listing(client):
    response = client.get(reverse("budgets:requests"))
    assert response.status_code == 200
    context = response.context
    return (
        [r.node.slug for r in context["to_decide"]],
        [r.node.slug for r in context["mine"]],
        [r.node.slug for r in context["others"]],
    )


def test_pi_decides_the_project_request_and_sees_its_own(org, client_for, requests_):
    assert listing(client_for("pi")) == (["proj-a1"], ["prog-a"], ["proj-a1"])


def test_ceo_decides_the_program_request_and_reads_everything(org, client_for, requests_):
    to_decide, mine, others = listing(client_for("ceo"))
    assert (to_decide, mine, sorted(others)) == (["prog-a"], [], ["prog-a", "proj-a1"])


def test_lead_decides_nothing_and_sees_its_own(org, client_for, requests_):
    assert listing(client_for("lead")) == ([], ["proj-a1"], [])


@pytest.mark.parametrize("persona", ["researcher", "operator"])
def test_roles_without_management_see_no_requests(org, client_for, requests_, persona):
    assert listing(client_for(persona)) == ([], [], [])


def test_outsider_is_refused(org, client_for, requests_):
    assert client_for("outsider").get(reverse("budgets:requests")).status_code == 403


def test_queue_shows_the_effect_on_every_sibling(org, client_for, requests_):
    response = client_for("ceo").get(reverse("budgets:requests"))
    (program_request,) = response.context["to_decide"]
    effects = {e.node.slug: (e.before, e.after) for e in program_request.effects}
    # Program A 70 -> 90 of 120: 70% -> 75%; Program B 30 of 120: 30% -> 25%.
    assert effects == {"prog-a": pytest.approx((70.0, 75.0)),
                       "prog-b": pytest.approx((30.0, 25.0))}
    html = response.content.decode()
    assert "+5.0 pt" in html and "-5.0 pt" in html


def test_navigation_badge_counts_pending_decisions(org, client_for, requests_):
    response = client_for("pi").get(reverse("budgets:requests"))
    assert response.context["pending_decisions"] == 1
