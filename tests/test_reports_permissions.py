"""Who sees which rows of the review report and which dashboards (STYLE.md personas)."""

import csv
import io

import pytest
from django.urls import reverse

WEEK = "?period=week&date=2025-03-05"


def csv_paths(client, url):
    response = client.get(url + WEEK)
    assert response.status_code == 200
    return [row[0] for row in csv.reader(io.StringIO(response.content.decode()))][1:]


@pytest.mark.parametrize("persona, paths", [
    ("ceo", ["org", "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a2", "org/prog-b",
             "org/prog-b/proj-b1"]),
    ("pi", ["org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a2"]),
    ("lead", ["org/prog-a/proj-a1"]),
    ("researcher", ["org/prog-a/proj-a1"]),
])
def test_report_rows_each_persona_sees(history, persona, paths):
    client = history.client_for(persona)
    assert csv_paths(client, reverse("reports:review_csv", args=["h100"])) == paths
    page = client.get(reverse("reports:review", args=["h100"]) + WEEK).content.decode()
    assert page.count("<tr class=\"depth-") == len(paths)


@pytest.mark.parametrize("persona", ["outsider", "operator"])
def test_no_budget_no_report(history, persona):
    client = history.client_for(persona)
    assert client.get(reverse("reports:review", args=["h100"])).status_code == 403
    assert client.get(reverse("reports:review_csv", args=["h100"])).status_code == 403


def test_anonymous_is_sent_to_login(history, client):
    response = client.get(reverse("reports:review", args=["h100"]))
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.parametrize("persona, node, status", [
    ("lead", "proj_a1", 200), ("researcher", "proj_a1", 200), ("lead", "proj_a2", 403),
    ("pi", "proj_a2", 200), ("pi", "prog_b", 403), ("ceo", "proj_b1", 200),
    ("researcher", "prog_a", 403), ("outsider", "proj_a1", 403),
])
def test_per_project_view(history, persona, node, status):
    pk = getattr(history, node).pk
    client = history.client_for(persona)
    assert client.get(reverse("reports:node_review", args=["h100", pk])).status_code == status
    assert client.get(reverse("reports:node_review_csv", args=["h100", pk])).status_code == status


def test_lead_brings_the_project_page(history):
    body = history.client_for("lead").get(
        reverse("reports:node_review", args=["h100", history.proj_a1.pk]) + WEEK
    ).content.decode()
    assert "Budget review: Proj A1" in body
    assert "org/prog-a/proj-a1" in body and "org/prog-a/proj-a2" not in body


@pytest.mark.parametrize("persona, status", [
    ("ceo", 200), ("pi", 200), ("researcher", 200), ("operator", 200), ("outsider", 403),
])
def test_dashboards_need_a_role(history, persona, status):
    client = history.client_for(persona)
    assert client.get(reverse("reports:dashboards")).status_code == status
    assert client.get(reverse("reports:cluster", args=["h100"])).status_code == status


def test_budget_drill_down_is_restricted(history):
    url = reverse("reports:cluster", args=["h100"])
    lead = history.client_for("lead")
    assert lead.get(url, {"node": history.proj_a1.pk}).status_code == 200
    assert lead.get(url, {"node": history.prog_a.pk}).status_code == 403
    assert history.client_for("pi").get(url, {"node": history.prog_b.pk}).status_code == 403
    operator_page = history.client_for("operator").get(url).content.decode()
    assert "You neither manage nor belong to a budget." in operator_page
