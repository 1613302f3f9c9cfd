"""Deciding a change request: the managers of the parent node, never the requester."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from budgets import services
from budgets.models import AllocationChange, ChangeRequest


@pytest.fixture
def lead_request(org):
    """Lead asks Program A's managers (the PI) for 75 shares for Project A1."""
    return services.request_change(org.lead, org.proj_a1, org.cluster, shares=75,
                                   reason="new hires")


@pytest.fixture
def pi_request(org):
    """The PI asks the root's managers (the CEO) for 90 shares for Program A."""
    return services.request_change(org.pi, org.prog_a, org.cluster, shares=90,
                                   reason="bigger models")


def decide(client, change_request, decision, comment=""):
    url = reverse("budgets:request", kwargs={"pk": change_request.pk})
    return client.post(url, {"decision": decision, "comment": comment})


def test_pi_sees_the_decision_form_with_the_effect(org, client_for, lead_request):
    response = client_for("pi").get(reverse("budgets:request", kwargs={"pk": lead_request.pk}))
    assert response.status_code == 200
    assert response.context["form"] is not None
    # A1 50 -> 75 of 125: 35% -> 42% of the cluster; A2 35% -> 28%.
    html = response.content.decode()
    assert "35.0%" in html and "42.0%" in html and "28.0%" in html and "+7.0 pt" in html


def test_pi_approves_and_the_shares_change_at_once(org, client_for, lead_request, shares_of):
    response = decide(client_for("pi"), lead_request, "approve", "fine")
    assert response.status_code == 302
    assert response["Location"] == reverse("budgets:requests")
    lead_request.refresh_from_db()
    assert (lead_request.state, lead_request.decided_by, lead_request.decision_comment) == (
        "approved", org.pi, "fine"
    )
    assert lead_request.decided_at is not None
    assert shares_of(org.proj_a1) == 75


def test_approval_writes_an_audit_entry_linked_to_the_request(org, client_for, lead_request):
    before = AllocationChange.objects.count()
    decide(client_for("pi"), lead_request, "approve")
    assert AllocationChange.objects.count() == before + 1
    entry = AllocationChange.objects.first()
    assert (entry.node, entry.changed_by, entry.old_shares, entry.new_shares, entry.request) == (
        org.proj_a1, org.pi, 50, 75, lead_request
    )
    assert entry.reason == f"request #{lead_request.pk} approved: new hires"


def test_ceo_approves_a_program_request(org, client_for, pi_request, shares_of):
    assert decide(client_for("ceo"), pi_request, "approve").status_code == 302
    assert shares_of(org.prog_a) == 90


def test_rejection_with_a_comment_changes_no_shares(org, client_for, lead_request, shares_of):
    changes = AllocationChange.objects.count()
    response = decide(client_for("pi"), lead_request, "reject", "not this quarter")
    assert response.status_code == 302
    lead_request.refresh_from_db()
    assert (lead_request.state, lead_request.decision_comment) == ("rejected", "not this quarter")
    assert shares_of(org.proj_a1) == 50
    assert AllocationChange.objects.count() == changes


@pytest.mark.parametrize("comment", ["", "   "])
def test_rejection_requires_a_comment(org, client_for, lead_request, unchanged, comment):
    with unchanged():
        response = decide(client_for("pi"), lead_request, "reject", comment)
    assert response.status_code == 422
    assert response.context["form"].errors["comment"] == ["Say why the request is rejected."]


def test_unknown_decision_is_a_field_error(org, client_for, lead_request, unchanged):
    with unchanged():
        response = decide(client_for("pi"), lead_request, "maybe")
    assert response.status_code == 422
    assert response.context["form"].errors["decision"]


def test_lead_cannot_approve_its_own_request(org, client_for, lead_request, unchanged):
    with unchanged():
        assert decide(client_for("lead"), lead_request, "approve").status_code == 403


def test_nobody_approves_their_own_request_even_as_a_parent_manager(org, client_for, unchanged):
    org.prog_a.managers.add(org.ceo)  # the CEO now manages both Program A and its parent
    ceo = User.objects.get(pk=org.ceo.pk)  # roles are cached per user object
    own = services.request_change(ceo, org.prog_a, org.cluster, shares=90, reason="mine")
    page = client_for("ceo").get(reverse("budgets:request", kwargs={"pk": own.pk}))
    assert page.context["form"] is None
    with unchanged():
        assert decide(client_for("ceo"), own, "approve").status_code == 403
    with pytest.raises(services.PermissionDenied, match="Nobody approves their own request"):
        services.decide(ceo, own, approve=True)


def test_ceo_does_not_decide_for_program_a_managers(org, client_for, lead_request, unchanged):
    # The CEO reads the request (it is in the CEO's subtree) but only the PI decides it.
    page = client_for("ceo").get(reverse("budgets:request", kwargs={"pk": lead_request.pk}))
    assert page.status_code == 200 and page.context["form"] is None
    with unchanged():
        assert decide(client_for("ceo"), lead_request, "approve").status_code == 403


def test_pi_cannot_decide_its_own_program_request(org, client_for, pi_request, unchanged):
    with unchanged():
        assert decide(client_for("pi"), pi_request, "approve").status_code == 403


@pytest.mark.parametrize("persona", ["researcher", "operator", "outsider"])
def test_who_cannot_see_the_request_gets_404(org, client_for, lead_request, unchanged, persona):
    client = client_for(persona)
    assert client.get(reverse("budgets:request", kwargs={"pk": lead_request.pk})).status_code \
        == 404
    with unchanged():
        assert decide(client, lead_request, "approve").status_code == 404


@pytest.mark.parametrize(("first", "state"), [("approve", "approved"), ("reject", "rejected")])
def test_deciding_an_already_decided_request_is_409(org, client_for, lead_request, unchanged,
                                                    first, state):
    decide(client_for("pi"), lead_request, first, "reason")
    with unchanged():
        response = decide(client_for("pi"), lead_request, "approve")
    assert response.status_code == 409
    assert f"This request was already {state} by pi." in response.content.decode()


def test_deciding_a_withdrawn_request_is_409(org, client_for, lead_request, unchanged):
    services.withdraw(org.lead, lead_request)
    with unchanged():
        assert decide(client_for("pi"), lead_request, "approve").status_code == 409


def test_service_refuses_a_stale_decision_object(org, lead_request, shares_of):
    stale = ChangeRequest.objects.get(pk=lead_request.pk)
    services.decide(org.pi, lead_request, approve=False, comment="no")
    with pytest.raises(services.BudgetError, match="already rejected"):
        services.decide(org.pi, stale, approve=True)
    assert shares_of(org.proj_a1) == 50
