"""Withdrawing a change request: only the requester, only while it is pending."""

import pytest
from django.urls import reverse

from budgets import services


@pytest.fixture
def lead_request(org):
    return services.request_change(org.lead, org.proj_a1, org.cluster, shares=75, reason="x")


def withdraw(client, change_request):
    return client.post(reverse("budgets:request_withdraw", kwargs={"pk": change_request.pk}))


def test_requester_withdraws_its_pending_request(org, client_for, lead_request, shares_of):
    response = withdraw(client_for("lead"), lead_request)
    assert response.status_code == 302
    lead_request.refresh_from_db()
    assert lead_request.state == "withdrawn"
    assert shares_of(org.proj_a1) == 50


def test_approver_cannot_withdraw_someone_elses_request(org, client_for, lead_request,
                                                        unchanged):
    with unchanged():
        assert withdraw(client_for("pi"), lead_request).status_code == 403


@pytest.mark.parametrize("persona", ["researcher", "operator", "outsider"])
def test_who_cannot_see_the_request_gets_404(org, client_for, lead_request, unchanged, persona):
    with unchanged():
        assert withdraw(client_for(persona), lead_request).status_code == 404


def test_withdrawing_a_decided_request_changes_nothing(org, client_for, lead_request, unchanged):
    services.decide(org.pi, lead_request, approve=False, comment="no")
    with unchanged():
        response = withdraw(client_for("lead"), lead_request)
    assert response.status_code == 302
    page = client_for("lead").get(response["Location"])
    assert "Only a pending request can be withdrawn." in page.content.decode()


def test_withdraw_needs_post(org, client_for, lead_request, unchanged):
    with unchanged():
        url = reverse("budgets:request_withdraw", kwargs={"pk": lead_request.pk})
        assert client_for("lead").get(url).status_code == 405
