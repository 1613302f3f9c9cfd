"""Moving a budget: managers of both old and new place; never under its own descendant."""

import pytest
from django.urls import reverse

from budgets.models import AllocationChange, BudgetNode


def move(client, node, new_parent, reason="reorganisation"):
    url = reverse("budgets:node_move", kwargs={"pk": node.pk})
    return client.post(url, {"parent": new_parent.pk, "reason": reason})


def test_ceo_moves_a_project_to_another_program(org, client_for):
    response = move(client_for("ceo"), org.proj_a1, org.prog_b)
    assert response.status_code == 302
    moved = BudgetNode.objects.get(pk=org.proj_a1.pk)
    assert (moved.parent, moved.path) == (org.prog_b, "org/prog-b/proj-a1")
    assert BudgetNode.objects.get(pk=org.exp_1.pk).path == "org/prog-b/proj-a1/exp-1"


def test_move_keeps_shares_and_the_fraction_follows_the_new_parent(org, client_for):
    move(client_for("ceo"), org.proj_a1, org.prog_b)
    response = client_for("ceo").get(reverse("budgets:tree", kwargs={"cluster": "h100"}))
    rows = {row.node.slug: row for row in response.context["rows"]}
    # Program B (30%) now splits 50 (A1) : 100 (B1): A1 10%, B1 20%; A2 alone holds all of A.
    assert rows["proj-a1"].shares == 50
    assert rows["proj-a1"].percent_of_cluster == pytest.approx(10.0)
    assert rows["proj-b1"].percent_of_cluster == pytest.approx(20.0)
    assert rows["proj-a2"].percent_of_cluster == pytest.approx(70.0)


def test_move_is_recorded_in_the_audit_log(org, client_for):
    before = AllocationChange.objects.count()
    move(client_for("ceo"), org.proj_a1, org.prog_b, reason="B runs it now")
    assert AllocationChange.objects.count() == before + 1
    entry = AllocationChange.objects.first()
    assert (entry.node, entry.changed_by, entry.old_shares, entry.new_shares) == (
        org.proj_a1, org.ceo, 50, 50
    )
    assert entry.reason == "moved from org/prog-a/proj-a1 to org/prog-b/proj-a1: B runs it now"


def test_pi_moves_a_leaf_within_its_program(org, client_for):
    assert move(client_for("pi"), org.exp_1, org.proj_a2).status_code == 302
    assert BudgetNode.objects.get(pk=org.exp_1.pk).path == "org/prog-a/proj-a2/exp-1"


@pytest.mark.parametrize(("node", "target"), [("prog_a", "proj_a1"), ("prog_a", "exp_1"),
                                              ("proj_a1", "exp_1")])
def test_moving_under_its_own_descendant_is_a_field_error(org, client_for, unchanged, node,
                                                          target):
    with unchanged():
        response = move(client_for("ceo"), getattr(org, node), getattr(org, target))
    assert response.status_code == 422
    assert response.context["form"].errors["parent"] == [
        "A budget cannot move under itself or its own descendant."
    ]


def test_moving_under_itself_is_refused(org, client_for, unchanged):
    with unchanged():
        assert move(client_for("ceo"), org.prog_a, org.prog_a).status_code == 422


def test_moving_to_the_same_parent_is_a_field_error(org, client_for, unchanged):
    with unchanged():
        response = move(client_for("ceo"), org.proj_a1, org.prog_a)
    assert response.status_code == 422
    assert "already under Program A" in response.context["form"].errors["parent"][0]


def test_moving_next_to_a_budget_of_the_same_slug_is_refused(org, client_for, unchanged):
    BudgetNode.objects.create(parent=org.prog_b, slug="proj-a1", name="Clash", kind="project")
    with unchanged():
        response = move(client_for("ceo"), org.proj_a1, org.prog_b)
    assert response.status_code == 422


def test_pi_cannot_move_a_project_out_of_its_program(org, client_for, unchanged):
    with unchanged():
        response = move(client_for("pi"), org.proj_a1, org.prog_b)
    assert response.status_code == 422
    assert "valid choice" in response.context["form"].errors["parent"][0]


@pytest.mark.parametrize("persona", ["lead", "researcher", "operator", "outsider"])
def test_who_does_not_manage_above_the_node_gets_403(org, client_for, unchanged, persona):
    client = client_for(persona)
    assert client.get(reverse("budgets:node_move", kwargs={"pk": org.proj_a1.pk})).status_code \
        == 403
    with unchanged():
        assert move(client, org.proj_a1, org.prog_b).status_code == 403


def test_the_root_cannot_be_moved(org, client_for, unchanged):
    with unchanged():
        assert move(client_for("ceo"), org.root, org.prog_b).status_code == 403
