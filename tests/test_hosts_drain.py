"""Drain, return to service and mark repaired: operators only, through scheduler.services;
everybody else gets 403 and nothing changes."""

import pytest
from django.urls import reverse

from fleet.models import Host, HostEvent

NOT_OPERATORS = ["ceo", "pi", "lead", "researcher", "bob", "outsider"]


def action_url(action, host):
    return reverse(f"scheduler:host_{action}", kwargs={"pk": host.pk})


def set_state(host, state):
    Host.objects.filter(pk=host.pk).update(state=state)


def test_operator_drains_with_a_reason(fleet, client_for):
    operator = fleet.org.operator
    response = client_for("operator").post(
        action_url("drain", fleet.h100_0), {"reason": "GPU 3 ECC errors"}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("scheduler:host", kwargs={"pk": fleet.h100_0.pk})
    host = Host.objects.get(pk=fleet.h100_0.pk)
    assert host.state == Host.State.DRAINING
    assert "GPU 3 ECC errors" in host.state_reason
    [event] = HostEvent.objects.filter(host=host)
    assert (event.kind, event.reason, event.by) == ("drain_requested", "GPU 3 ECC errors", operator)
    # The running workload is not touched by the view: the next tick moves it by the contract.
    assert fleet.run_w.runs.get().ended is None


def test_drain_without_a_reason_is_refused(fleet, client_for, nothing_written):
    with nothing_written():
        response = client_for("operator").post(action_url("drain", fleet.h100_0), {"reason": " "})
    assert response.status_code == 422
    assert list(response.context["drain_form"].errors) == ["reason"]


def test_draining_a_host_twice_says_why_not(fleet, client_for, nothing_written):
    set_state(fleet.h100_0, Host.State.DRAINING)
    with nothing_written():
        response = client_for("operator").post(
            action_url("drain", fleet.h100_0), {"reason": "again"}, follow=True
        )
    assert [str(m) for m in response.context["messages"]] == [
        "h100-0 is DRAINING: only an AVAILABLE host can be drained."
    ]


@pytest.mark.parametrize("state", [Host.State.DRAINING, Host.State.DRAINED])
def test_operator_returns_a_drained_host(fleet, client_for, state):
    set_state(fleet.h100_1, state)
    response = client_for("operator").post(action_url("return", fleet.h100_1))
    assert response.status_code == 302
    assert Host.objects.get(pk=fleet.h100_1.pk).state == Host.State.AVAILABLE
    assert HostEvent.objects.get(host=fleet.h100_1).kind == HostEvent.Kind.RETURNED


def test_operator_marks_an_escalated_host_repaired(fleet, client_for):
    set_state(fleet.h100_1, Host.State.ESCALATED)
    client_for("operator").post(action_url("repair", fleet.h100_1))
    assert Host.objects.get(pk=fleet.h100_1.pk).state == Host.State.AVAILABLE
    repaired = HostEvent.objects.get(host=fleet.h100_1, kind=HostEvent.Kind.REPAIR_SUCCEEDED)
    assert repaired.needed_human
    page = client_for("operator").get(reverse("scheduler:hosts", kwargs={"cluster": "h100"}))
    assert (page.context["repairs"]["repairs"], page.context["repairs"]["needed_human"]) == (1, 1)


@pytest.mark.parametrize(("action", "state"), [("return", "AVAILABLE"), ("repair", "AVAILABLE"),
                                               ("repair", "DRAINING")])
def test_action_that_does_not_fit_the_state(fleet, client_for, nothing_written, action, state):
    set_state(fleet.h100_1, state)
    with nothing_written():
        response = client_for("operator").post(action_url(action, fleet.h100_1), follow=True)
    [message] = response.context["messages"]
    assert message.level_tag == "error"
    assert f"h100-1 is {state}" in str(message)


@pytest.mark.parametrize("persona", NOT_OPERATORS)
@pytest.mark.parametrize(("action", "state"), [("drain", "AVAILABLE"), ("return", "DRAINED"),
                                               ("repair", "ESCALATED")])
def test_nobody_else_operates_hosts(fleet, client_for, nothing_written, persona, action, state):
    set_state(fleet.h100_1, state)
    with nothing_written():
        response = client_for(persona).post(action_url(action, fleet.h100_1), {"reason": "x"})
    assert response.status_code == 403


@pytest.mark.parametrize("action", ["drain", "return", "repair"])
def test_actions_need_post(fleet, client_for, nothing_written, action):
    with nothing_written():
        assert client_for("operator").get(action_url(action, fleet.h100_1)).status_code == 405


def test_unknown_host_is_404_for_operators(fleet, client_for):
    url = reverse("scheduler:host_drain", kwargs={"pk": 999})
    assert client_for("operator").post(url, {"reason": "x"}).status_code == 404


def test_returning_a_host_in_its_automatic_repair_says_to_mark_it_repaired(
        fleet, client_for, nothing_written):
    set_state(fleet.h100_1, Host.State.REPAIRING)
    with nothing_written():
        response = client_for("operator").post(action_url("return", fleet.h100_1), follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "h100-1 is REPAIRING: its automatic repair is under way and returns it when the health "
        "check passes; to put it back now, mark it repaired (hosts repair h100-1)."
    ]
