"""Reading the budget tree: everybody with a role, nobody else; the numbers are DESIGN.md's."""

import pytest
from django.urls import reverse

READERS = ["ceo", "pi", "lead", "researcher", "operator"]


def tree_url(org):
    return reverse("budgets:tree", kwargs={"cluster": org.cluster.name})


@pytest.mark.parametrize("persona", READERS)
def test_every_role_reads_the_tree(org, client_for, persona):
    response = client_for(persona).get(tree_url(org))
    assert response.status_code == 200
    assert [row.node.path for row in response.context["rows"]] == [
        "org", "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1",
        "org/prog-a/proj-a2", "org/prog-b", "org/prog-b/proj-b1",
    ]


@pytest.mark.parametrize("persona", READERS)
def test_default_tree_url_shows_the_first_cluster(org, client_for, persona):
    response = client_for(persona).get(reverse("budgets:tree_default"))
    assert response.status_code == 200
    assert response.context["cluster"] == org.cluster


def test_outsider_is_refused(org, client_for):
    assert client_for("outsider").get(tree_url(org)).status_code == 403


def test_anonymous_is_sent_to_login(org, client_for):
    response = client_for(None).get(tree_url(org))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_unknown_cluster_is_404(org, client_for):
    response = client_for("ceo").get(reverse("budgets:tree", kwargs={"cluster": "nope"}))
    assert response.status_code == 404


def test_row_of_project_a1_shows_35_percent_and_588_gpu_hours(org, client_for):
    # 70/(70+30) x 50/(50+50) = 0.35; 0.35 x 10 GPUs x 168 h = 588 GPU-h per week.
    response = client_for("researcher").get(tree_url(org))
    row = next(r for r in response.context["rows"] if r.node == org.proj_a1)
    assert row.shares == 50
    assert row.percent_of_parent == pytest.approx(50.0)
    assert row.percent_of_cluster == pytest.approx(35.0)
    assert row.gpu_hours_per_week == pytest.approx(588.0)
    html = response.content.decode()
    cells = html.split(f'id="node-{org.proj_a1.pk}"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num pct-parent">50.0%</td>' in cells
    assert '<td class="num pct-cluster">35.0%</td>' in cells
    assert "588" in cells


@pytest.mark.parametrize(
    ("persona", "editable"),
    [
        ("ceo", {"prog-a", "proj-a1", "exp-1", "proj-a2", "prog-b", "proj-b1"}),
        ("pi", {"proj-a1", "exp-1", "proj-a2"}),
        ("lead", {"exp-1"}),
        ("researcher", set()),
        ("operator", set()),
    ],
)
def test_edit_buttons_only_below_what_you_manage(org, client_for, persona, editable):
    response = client_for(persona).get(tree_url(org))
    assert {row.node.slug for row in response.context["rows"] if row.can_edit} == editable
    assert response.content.decode().count("Edit shares") == len(editable)


@pytest.mark.parametrize(
    ("persona", "requestable"),
    [("ceo", set()), ("pi", {"prog-a"}), ("lead", {"proj-a1"}), ("researcher", {"proj-a1"}),
     ("operator", set())],
)
def test_request_buttons_only_on_what_you_manage_directly_or_belong_to(
    org, client_for, persona, requestable
):
    response = client_for(persona).get(tree_url(org))
    assert {row.node.slug for row in response.context["rows"] if row.can_request} == requestable
