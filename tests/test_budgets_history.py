"""Allocation history, per node and for the whole tree: managers their subtree, members their
budgets, nobody else."""

import pytest
from django.urls import reverse

from budgets import services


def node_history(client, node, **params):
    return client.get(reverse("budgets:node_history", kwargs={"pk": node.pk}), params)


@pytest.mark.parametrize(
    ("persona", "readable"),
    [
        ("ceo", {"root", "prog_a", "proj_a1", "exp_1", "proj_a2", "prog_b", "proj_b1"}),
        ("pi", {"prog_a", "proj_a1", "exp_1", "proj_a2"}),
        ("lead", {"proj_a1", "exp_1"}),
        ("researcher", {"proj_a1"}),
        ("operator", set()),
        ("outsider", set()),
    ],
)
def test_node_history_readable_per_persona(org, client_for, persona, readable):
    client = client_for(persona)
    for name in ["root", "prog_a", "proj_a1", "exp_1", "proj_a2", "prog_b", "proj_b1"]:
        expected = 200 if name in readable else 404
        assert node_history(client, getattr(org, name)).status_code == expected, name


def test_node_history_lists_the_subtree_newest_first(org, client_for):
    services.set_shares(org.pi, org.proj_a1, org.cluster, 60, reason="later")
    response = node_history(client_for("pi"), org.proj_a1)
    entries = [(e.node.slug, e.old_shares, e.new_shares, e.reason)
               for e in response.context["page"]]
    assert entries == [
        ("proj-a1", 50, 60, "later"),
        ("exp-1", None, 100, "initial budget"),
        ("proj-a1", None, 50, "initial budget"),
    ]
    html = response.content.decode()
    assert "later" in html and ">pi<" in html


def test_node_history_links_the_request(org, client_for):
    change_request = services.request_change(org.lead, org.proj_a1, org.cluster, shares=75,
                                              reason="hires")
    services.decide(org.pi, change_request, approve=True)
    response = node_history(client_for("lead"), org.proj_a1)
    assert response.context["page"][0].request == change_request
    assert reverse("budgets:request", kwargs={"pk": change_request.pk}) in \
        response.content.decode()


def test_node_history_filters_by_cluster(org, client_for):
    response = node_history(client_for("ceo"), org.proj_a1, cluster="b200")
    assert list(response.context["page"]) == []


@pytest.mark.parametrize(
    ("persona", "visible"),
    [
        ("ceo", {"org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1",
                 "org/prog-a/proj-a2", "org/prog-b", "org/prog-b/proj-b1"}),
        ("pi", {"org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1",
                "org/prog-a/proj-a2"}),
        ("lead", {"org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1"}),
        ("researcher", {"org/prog-a/proj-a1"}),
        ("operator", set()),
    ],
)
def test_tree_history_shows_only_what_you_may_read(org, client_for, persona, visible):
    response = client_for(persona).get(reverse("budgets:history"))
    assert response.status_code == 200
    assert {entry.node.path for entry in response.context["page"]} == visible


def test_tree_history_refuses_the_outsider(org, client_for):
    assert client_for("outsider").get(reverse("budgets:history")).status_code == 403


def test_tree_history_htmx_filter_returns_the_table_fragment(org, client_for, htmx):
    response = client_for("ceo").get(reverse("budgets:history"), {"cluster": "h100"}, **htmx)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.startswith('<div id="history">') and "<html" not in html
