"""A budget's own page: allocations on every cluster and what the reader may do with it."""

import pytest
from django.urls import reverse


def detail(client, node):
    return client.get(reverse("budgets:node", kwargs={"pk": node.pk}))


@pytest.mark.parametrize("persona", ["ceo", "pi", "lead", "researcher", "operator"])
def test_every_role_reads_a_node(org, client_for, persona):
    response = detail(client_for(persona), org.proj_a1)
    assert response.status_code == 200
    ((cluster, row),) = response.context["allocations"]
    assert cluster == org.cluster
    assert row.percent_of_cluster == pytest.approx(35.0)


def test_outsider_is_refused(org, client_for):
    assert detail(client_for("outsider"), org.proj_a1).status_code == 403


def test_unknown_node_is_404(org, client_for):
    assert client_for("ceo").get(reverse("budgets:node", kwargs={"pk": 99999})).status_code \
        == 404


@pytest.mark.parametrize(
    ("persona", "request_", "move", "add_child", "history"),
    [
        ("ceo", False, True, True, True),
        ("pi", False, True, True, True),
        ("lead", True, False, True, True),
        ("researcher", True, False, False, True),  # a member asks for more too
        ("operator", False, False, False, False),
    ],
)
def test_actions_offered_on_project_a1(org, client_for, persona, request_, move, add_child,
                                       history):
    context = detail(client_for(persona), org.proj_a1).context
    assert (context["can_request"], context["can_move"], context["can_add_child"],
            context["can_read_history"]) == (request_, move, add_child, history)
