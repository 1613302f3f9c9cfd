"""A reviewer reads the tree, and the history and reports of the subtree they review; they
change nothing."""

import csv
import io

import pytest
from django.urls import reverse

from budgets import people


@pytest.fixture
def reviewer(org):
    people.add_person(org.ceo, org.prog_a, "outsider", "reviewer", reason="finance")
    return org.outsider


def test_a_reviewer_reads_the_tree(org, reviewer, client_for):
    assert client_for("outsider").get(reverse("budgets:tree_default")).status_code == 200


def test_a_reviewer_reads_the_history_of_the_reviewed_subtree(org, reviewer, client_for):
    url = reverse("budgets:node_history", kwargs={"pk": org.proj_a1.pk})
    assert client_for("outsider").get(url).status_code == 200


def test_a_reviewer_does_not_read_the_history_outside(org, reviewer, client_for):
    url = reverse("budgets:node_history", kwargs={"pk": org.prog_b.pk})
    assert client_for("outsider").get(url).status_code == 404


def test_a_reviewer_reads_the_review_report_of_the_subtree(org, reviewer, client_for):
    response = client_for("outsider").get(reverse("reports:review_csv", args=["h100"]))
    rows = list(csv.reader(io.StringIO(response.content.decode())))[1:]
    assert [row[0] for row in rows] == [
        "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1", "org/prog-a/proj-a2"
    ]


def test_a_reviewer_changes_no_share(org, reviewer, client_for, unchanged):
    url = reverse("budgets:tree", kwargs={"cluster": org.cluster.name})
    with unchanged():
        response = client_for("outsider").post(url, {"node": org.proj_a1.pk, "shares": 99})
    assert response.status_code == 403


def test_a_reviewer_adds_nobody(org, reviewer, client_for, unchanged):
    from test_budgets_people import add

    with unchanged():
        assert add(client_for("outsider"), org.proj_a1, "operator").status_code == 403
