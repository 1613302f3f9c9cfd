"""Adding a child budget: managers of the parent or above."""

import pytest
from django.urls import reverse

from budgets.models import BudgetNode


def add(client, parent, **fields):
    data = {"name": "New", "slug": "new", "kind": "project", "description": "", **fields}
    return client.post(reverse("budgets:node_add_child", kwargs={"pk": parent.pk}), data)


@pytest.mark.parametrize(
    ("persona", "parent"),
    [("ceo", "root"), ("ceo", "proj_a1"), ("pi", "prog_a"), ("pi", "proj_a1"),
     ("lead", "proj_a1")],
)
def test_managers_add_a_child(org, client_for, persona, parent):
    parent_node = getattr(org, parent)
    response = add(client_for(persona), parent_node, name="Sam's runs", slug="sam",
                   kind="researcher", description="one person")
    child = BudgetNode.objects.get(parent=parent_node, slug="sam")
    assert response.status_code == 302
    assert response["Location"] == reverse("budgets:node", kwargs={"pk": child.pk})
    assert (child.name, child.kind, child.path) == (
        "Sam's runs", "researcher", f"{parent_node.path}/sam"
    )
    assert child.description == "one person"


def test_new_child_has_no_allocation_yet(org, client_for):
    add(client_for("pi"), org.prog_a)
    child = BudgetNode.objects.get(slug="new")
    assert not child.allocations.exists()


@pytest.mark.parametrize(
    ("persona", "parent"),
    [("pi", "prog_b"), ("lead", "prog_a"), ("researcher", "proj_a1"), ("operator", "proj_a1"),
     ("outsider", "proj_a1")],
)
def test_others_get_403_and_nothing_is_created(org, client_for, unchanged, persona, parent):
    client = client_for(persona)
    url = reverse("budgets:node_add_child", kwargs={"pk": getattr(org, parent).pk})
    assert client.get(url).status_code == 403
    with unchanged():
        assert add(client, getattr(org, parent)).status_code == 403


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"slug": "proj-a1"}, "slug"), ({"slug": "not a slug"}, "slug"), ({"name": ""}, "name"),
     ({"kind": "galaxy"}, "kind")],
)
def test_bad_child_is_a_field_error(org, client_for, unchanged, fields, field):
    with unchanged():
        response = add(client_for("pi"), org.prog_a, **fields)
    assert response.status_code == 422
    assert response.context["form"].errors[field]
