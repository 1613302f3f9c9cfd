"""Inline edit of shares on the tree page: managers strictly above a node, nobody else."""

import pytest
from django.urls import reverse

from budgets.models import Allocation, AllocationChange


def tree_url(org):
    return reverse("budgets:tree", kwargs={"cluster": org.cluster.name})


def post_shares(client, org, node, shares, *, version=None, reason="more work", headers=None):
    if version is None:
        version = Allocation.objects.get(node=node, cluster=org.cluster).version
    data = {"node": node.pk, "version": version, "shares": shares, "reason": reason}
    return client.post(tree_url(org), data, **(headers or {}))


def test_htmx_get_edit_returns_the_row_form_fragment(org, client_for, htmx):
    response = client_for("pi").get(tree_url(org), {"edit": org.proj_a1.pk}, **htmx)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith('<tbody id="tree-body">')
    assert "<html" not in html
    assert 'name="shares"' in html and f'value="{org.proj_a1.pk}"' in html


@pytest.mark.parametrize("persona", ["lead", "researcher", "operator"])
def test_edit_form_is_not_offered_to_who_may_not_edit(org, client_for, htmx, persona):
    response = client_for(persona).get(tree_url(org), {"edit": org.proj_a1.pk}, **htmx)
    assert response.status_code == 200
    assert 'name="shares"' not in response.content.decode()


def test_outsider_cannot_even_open_the_edit_form(org, client_for, htmx):
    response = client_for("outsider").get(tree_url(org), {"edit": org.proj_a1.pk}, **htmx)
    assert response.status_code == 403


def test_pi_edits_its_project_with_htmx_and_gets_new_percentages(org, client_for, htmx,
                                                                 shares_of):
    response = post_shares(client_for("pi"), org, org.proj_a1, 150, headers=htmx)
    assert response.status_code == 200
    assert shares_of(org.proj_a1) == 150
    # A1 now 150/(150+50) = 75% of A, 0.7 x 0.75 = 52.5% of the cluster; A2 0.7 x 0.25 = 17.5%.
    rows = {row.node.slug: row for row in response.context["rows"]}
    assert rows["proj-a1"].percent_of_parent == pytest.approx(75.0)
    assert rows["proj-a1"].percent_of_cluster == pytest.approx(52.5)
    assert rows["proj-a2"].percent_of_cluster == pytest.approx(17.5)
    assert rows["exp-1"].percent_of_cluster == pytest.approx(52.5)
    html = response.content.decode()
    assert html.startswith('<tbody id="tree-body">')
    assert "52.5%" in html and "17.5%" in html


def test_edit_without_htmx_redirects_back_to_the_tree(org, client_for, shares_of):
    response = post_shares(client_for("pi"), org, org.proj_a2, 25)
    assert response.status_code == 302
    assert response["Location"] == tree_url(org)
    assert shares_of(org.proj_a2) == 25


def test_pi_edits_deeper_than_its_children(org, client_for, shares_of):
    assert post_shares(client_for("pi"), org, org.exp_1, 7).status_code == 302
    assert shares_of(org.exp_1) == 7


def test_ceo_edits_a_program(org, client_for, shares_of):
    assert post_shares(client_for("ceo"), org, org.prog_b, 45).status_code == 302
    assert shares_of(org.prog_b) == 45


def test_lead_edits_the_leaf_below_its_project(org, client_for, shares_of):
    assert post_shares(client_for("lead"), org, org.exp_1, 3).status_code == 302
    assert shares_of(org.exp_1) == 3


def test_edit_writes_one_audit_entry(org, client_for):
    before = AllocationChange.objects.count()
    post_shares(client_for("pi"), org, org.proj_a1, 80, reason="  new hires  ")
    assert AllocationChange.objects.count() == before + 1
    entry = AllocationChange.objects.first()
    assert (entry.node, entry.cluster, entry.changed_by, entry.changed_by_name) == (
        org.proj_a1, org.cluster, org.pi, "pi"
    )
    assert (entry.old_shares, entry.new_shares, entry.reason, entry.request) == (
        50, 80, "new hires", None
    )


def test_edit_bumps_the_version(org, client_for):
    post_shares(client_for("pi"), org, org.proj_a1, 80)
    assert Allocation.objects.get(node=org.proj_a1, cluster=org.cluster).version == 2


def test_same_shares_again_writes_nothing(org, client_for, unchanged):
    with unchanged():
        assert post_shares(client_for("pi"), org, org.proj_a1, 50).status_code == 302


@pytest.mark.parametrize(
    ("persona", "node"),
    [
        ("lead", "proj_a1"),  # its own project: a change request, not an edit
        ("pi", "prog_a"),  # its own program
        ("pi", "proj_b1"),  # outside its subtree
        ("ceo", "root"),  # the root holds the whole cluster
        ("researcher", "proj_a1"),
        ("researcher", "exp_1"),
        ("operator", "proj_a1"),
        ("outsider", "proj_a1"),
    ],
)
def test_edit_refused_with_403_and_nothing_changes(org, client_for, htmx, unchanged, persona,
                                                   node):
    target = getattr(org, node)
    with unchanged():
        response = post_shares(client_for(persona), org, target, 60, version=1, headers=htmx)
    assert response.status_code == 403


def test_anonymous_edit_goes_to_login_and_nothing_changes(org, client_for, unchanged):
    with unchanged():
        response = post_shares(client_for(None), org, org.proj_a1, 60)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_first_allocation_of_a_new_node_is_recorded_with_no_old_shares(org, client_for,
                                                                       shares_of):
    from budgets import services

    new = services.add_child(org.pi, org.prog_a, name="Project A3", slug="proj-a3",
                             kind="project")
    response = post_shares(client_for("pi"), org, new, 100, version=0)
    assert response.status_code == 302
    assert shares_of(new) == 100
    entry = AllocationChange.objects.get(node=new)
    assert (entry.old_shares, entry.new_shares) == (None, 100)
