"""Pinned query counts (STYLE.md item 13): the tree page and the request list cost the same
number of queries for 7 budgets as for 7 + 3 x 40, and the request list as many for one
pending decision as for forty."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from query_counts import count_queries

from budgets import services
from budgets.models import Allocation, BudgetNode

TREE_PAGE_QUERIES = 12
TREE_EDIT_QUERIES = 18
REQUEST_LIST_QUERIES = 12


def grow(org, programs=3, projects=40):
    """Add `programs` programs of `projects` projects, each with shares and a manager."""
    for p in range(programs):
        program = BudgetNode.objects.create(parent=org.root, slug=f"p{p}", name=f"P{p}",
                                            kind="program")
        program.managers.add(org.pi)
        Allocation.objects.create(node=program, cluster=org.cluster, shares=10)
        for q in range(projects):
            project = BudgetNode.objects.create(parent=program, slug=f"q{q}", name=f"Q{q}",
                                                kind="project")
            project.managers.add(org.lead)
            project.members.add(org.researcher)
            Allocation.objects.create(node=project, cluster=org.cluster, shares=q + 1)


@pytest.mark.parametrize("persona", ["ceo", "pi", "lead", "researcher", "operator"])
def test_tree_page_queries_do_not_grow_with_the_tree(org, client_for, persona):
    url = reverse("budgets:tree", kwargs={"cluster": org.cluster.name})
    client = client_for(persona)
    small = count_queries(client, url)
    grow(org)
    assert count_queries(client, url) == small
    assert small <= TREE_PAGE_QUERIES


def test_tree_page_is_pinned(org, client_for, django_assert_max_num_queries):
    grow(org)
    client = client_for("ceo")
    with django_assert_max_num_queries(TREE_PAGE_QUERIES):
        client.get(reverse("budgets:tree", kwargs={"cluster": org.cluster.name}))


def test_htmx_edit_fragment_is_pinned(org, client_for, htmx, django_assert_max_num_queries):
    grow(org)
    url = reverse("budgets:tree", kwargs={"cluster": org.cluster.name})
    client = client_for("pi")
    with django_assert_max_num_queries(TREE_EDIT_QUERIES):
        client.post(url, {"node": org.proj_a1.pk, "version": 1, "shares": 60}, **htmx)


@pytest.mark.parametrize("persona", ["ceo", "pi", "lead"])
def test_request_list_queries_do_not_grow_with_the_tree(org, client_for, persona):
    services.request_change(org.lead, org.proj_a1, org.cluster, shares=75, reason="x")
    services.request_change(org.pi, org.prog_a, org.cluster, shares=90, reason="y")
    url = reverse("budgets:requests")
    client = client_for(persona)
    small = count_queries(client, url)
    grow(org)
    assert count_queries(client, url) == small
    assert small <= REQUEST_LIST_QUERIES


def test_request_list_is_pinned(org, client_for, django_assert_max_num_queries):
    grow(org)
    services.request_change(org.lead, org.proj_a1, org.cluster, shares=75, reason="x")
    services.request_change(org.pi, org.prog_a, org.cluster, shares=90, reason="y")
    client = client_for("pi")
    with django_assert_max_num_queries(REQUEST_LIST_QUERIES):
        client.get(reverse("budgets:requests"))


def test_request_list_queries_do_not_grow_with_pending_decisions(org, client_for):
    grow(org, programs=1)  # forty projects managed by the lead, under P0 managed by the PI
    url = reverse("budgets:requests")
    projects = list(BudgetNode.objects.filter(parent__slug="p0").order_by("pk"))
    lead = User.objects.get(pk=org.lead.pk)
    services.request_change(lead, projects[0], org.cluster, shares=99, reason="x")
    client = client_for("pi")
    one = count_queries(client, url)
    for project in projects[1:]:
        services.request_change(lead, project, org.cluster, shares=99, reason="x")
    response = client.get(url)
    assert len(response.context["to_decide"]) == 40
    assert count_queries(client, url) == one
