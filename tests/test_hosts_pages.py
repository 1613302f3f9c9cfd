"""Hosts pages: everybody with a role reads them (state, who holds which GPUs, health and
maintenance history, the share of repairs that needed a human); outsiders read nothing;
only operators see the Drain / Return / Mark repaired buttons."""

from datetime import timedelta

import pytest
from django.urls import reverse
from fixtures_scheduler import T0

from fleet.models import Host, HostEvent

READERS = ["ceo", "pi", "lead", "researcher", "operator", "bob"]


def cluster_url(name="h100"):
    return reverse("scheduler:hosts", kwargs={"cluster": name})


def host_url(host):
    return reverse("scheduler:host", kwargs={"pk": host.pk})


@pytest.mark.parametrize("persona", READERS)
def test_every_role_reads_the_cluster_page(fleet, client_for, persona):
    response = client_for(persona).get(cluster_url())
    assert response.status_code == 200
    hosts = response.context["hosts"]
    assert [(h.name, h.state, h.busy, h.gpus) for h in hosts] == [
        ("h100-0", "AVAILABLE", 2, 5), ("h100-1", "AVAILABLE", 0, 5),
    ]
    [holder] = hosts[0].holders
    assert (holder.workload.name, holder.workload.budget.path, holder.indices) == (
        "run", "org/prog-a/proj-a1/exp-1", [0, 1]
    )


@pytest.mark.parametrize("persona", READERS)
def test_every_role_reads_a_host(fleet, client_for, persona):
    response = client_for(persona).get(host_url(fleet.h100_0))
    assert response.status_code == 200
    assert [h.workload.name for h in response.context["holders"]] == ["run"]


def test_outsider_is_refused(fleet, client_for):
    assert client_for("outsider").get(cluster_url()).status_code == 403
    assert client_for("outsider").get(host_url(fleet.h100_0)).status_code == 403


def test_anonymous_is_sent_to_login(fleet, client_for):
    response = client_for(None).get(cluster_url())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_default_page_is_the_first_cluster(fleet, client_for):
    response = client_for("researcher").get(reverse("scheduler:hosts_default"))
    assert response.context["cluster"] == fleet.b200  # clusters are ordered by name


def test_unknown_cluster_and_host_are_404(fleet, client_for):
    assert client_for("researcher").get(cluster_url("nope")).status_code == 404
    response = client_for("researcher").get(reverse("scheduler:host", kwargs={"pk": 999}))
    assert response.status_code == 404


def test_htmx_poll_gets_only_the_table(fleet, client_for, htmx):
    response = client_for("researcher").get(cluster_url(), **htmx)
    assert [t.name for t in response.templates][0] == "scheduler/_host_rows.html"
    assert "<html" not in response.content.decode()


def add_history(host):
    """Three repairs: two automatic, one by a human after an escalation."""
    events = [
        (0, HostEvent.Kind.HEALTH_SIGNAL, "lost heartbeat", False),
        (1, HostEvent.Kind.DRAINED, "", False),
        (2, HostEvent.Kind.REPAIR_SUCCEEDED, "reboot", False),
        (3, HostEvent.Kind.DRAIN_REQUESTED, "GPU 3 ECC errors", False),
        (4, HostEvent.Kind.REPAIR_SUCCEEDED, "reset GPU", False),
        (5, HostEvent.Kind.REPAIR_FAILED, "still failing", False),
        (6, HostEvent.Kind.ESCALATED, "3 failed repairs", False),
        (7, HostEvent.Kind.REPAIR_SUCCEEDED, "replaced GPU 3", True),
    ]
    for minutes, kind, reason, human in events:
        HostEvent.objects.create(host=host, at=T0 + timedelta(minutes=minutes), kind=kind,
                                 reason=reason, needed_human=human)


def test_share_of_repairs_needing_a_human(fleet, client_for):
    add_history(fleet.h100_1)
    HostEvent.objects.create(host=fleet.b200.hosts.get(), kind=HostEvent.Kind.REPAIR_SUCCEEDED,
                             needed_human=True)  # another cluster: not counted
    response = client_for("researcher").get(cluster_url())
    repairs = response.context["repairs"]
    assert (repairs["repairs"], repairs["needed_human"]) == (3, 1)
    # the baseline, where every failure needs a human, makes 3 human repairs: 2 fewer, 67%
    assert "1 of 3 (33%); 67% fewer human repairs than if every failure needed one" in \
        response.content.decode()


def test_host_history_says_which_repair_needed_a_human(fleet, client_for):
    add_history(fleet.h100_1)
    response = client_for("pi").get(host_url(fleet.h100_1))
    history = [(e.kind, e.needed_human) for e in response.context["history"]]
    assert history[0] == ("repair_succeeded", True)  # newest first
    assert len(history) == 8
    assert "replaced GPU 3" in response.content.decode()


@pytest.mark.parametrize(
    ("state", "buttons"),
    [
        (Host.State.AVAILABLE, ["Drain"]),
        (Host.State.DRAINING, ["Return to service"]),
        (Host.State.DRAINED, ["Return to service"]),
        (Host.State.ESCALATED, ["Mark repaired"]),
        (Host.State.DOWN, ["Mark repaired"]),
    ],
)
def test_operator_sees_the_buttons_that_fit_the_state(fleet, client_for, state, buttons):
    Host.objects.filter(pk=fleet.h100_1.pk).update(state=state)
    body = client_for("operator").get(host_url(fleet.h100_1)).content.decode()
    for label in ["Drain", "Return to service", "Mark repaired"]:
        assert (f">{label}</button>" in body) is (label in buttons)


@pytest.mark.parametrize("persona", ["ceo", "pi", "lead", "researcher"])
@pytest.mark.parametrize("state", [Host.State.AVAILABLE, Host.State.DRAINED, Host.State.ESCALATED])
def test_nobody_else_sees_buttons(fleet, client_for, persona, state):
    Host.objects.filter(pk=fleet.h100_1.pk).update(state=state)
    body = client_for(persona).get(host_url(fleet.h100_1)).content.decode()
    assert "<button" not in body.split("<main>")[1]
