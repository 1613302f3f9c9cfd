"""Dashboards: the pyramid now and over the last week, the cluster charts and their htmx
fragments, against a hand-built recent history."""

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from budgets.models import BudgetNode
from reports import accounting, pyramid
from scheduler.models import Workload


def figure(body, figure_id):
    match = re.search(rf'<script id="{figure_id}" type="application/json">(.*?)</script>',
                      body, re.S)
    assert match, f"no figure {figure_id}"
    return json.loads(match.group(1))


def test_pyramid_now_and_last_week(recent):
    tree = accounting.Tree()
    now, _ = pyramid.latest_pyramid(recent.cluster, tree)
    assert now.availability == pytest.approx(0.5)
    assert now.occupancy_allocated == pytest.approx(3 / 5)
    assert now.occupancy_unallocated == pytest.approx(1 / 5)
    assert now.impact == pytest.approx(0.75)
    assert now.utilization is None
    end = timezone.now()
    week = pyramid.pyramid(recent.cluster, end - timedelta(days=7), end, tree)
    healthy = 144 * 10 + 24 * 5
    assert week.availability == pytest.approx(healthy / 1680)
    assert week.occupancy_allocated == pytest.approx((144 * 4 + 24 * 3) / healthy)
    assert week.occupancy_unallocated == pytest.approx((144 * 2 + 24 * 1) / healthy)
    assert week.impact == pytest.approx(0.75)


def test_dashboards_page(recent):
    body = recent.client_for("ceo").get(reverse("reports:dashboards")).content.decode()
    assert "not reported by this fleet" in body
    assert "plotly/plotly.min.js" in body
    trend = figure(body, "trend-h100")
    assert [t["name"] for t in trend["data"]] == [
        "Availability", "Occupancy: allocated", "Occupancy: unallocated", "Impact",
    ]
    availability = trend["data"][0]["y"]
    assert len(availability) == 14
    assert availability[-1] == pytest.approx(50)  # today: one host down
    assert availability[-8] == pytest.approx(100)


def test_range_selector_answers_a_fragment(recent):
    client = recent.client_for("ceo")
    url = reverse("reports:cluster", args=["h100"])
    page = client.get(url).content.decode()
    assert 'hx-get="/reports/dashboards/h100/"' in page and "<html" in page
    fragment = client.get(url, {"range": "day"}, HTTP_HX_REQUEST="true",
                          HTTP_HX_TARGET="charts").content.decode()
    assert "<html" not in fragment
    occupancy = figure(fragment, "fig-occupancy")
    names = [t["name"] for t in occupancy["data"]]
    assert names == ["Allocated", "Unallocated", "Idle", "Unavailable"]
    assert occupancy["data"][0]["y"] == [3] * 24
    assert occupancy["data"][2]["y"] == [1] * 24  # idle: 5 healthy - 3 - 1
    assert occupancy["data"][3]["y"] == [5] * 24
    week = figure(client.get(url, {"range": "week"}, HTTP_HX_REQUEST="true").content.decode(),
                  "fig-occupancy")
    assert len(week["data"][0]["y"]) == 7  # daily buckets: the last 7 complete days


def test_budget_drill_down(recent):
    client = recent.client_for("ceo")
    url = reverse("reports:cluster", args=["h100"])
    top = client.get(url, {"range": "week"}).content.decode()
    names = {t["name"] for t in figure(top, "fig-budgets")["data"]}
    assert names == {"Prog A delivered", "Prog A entitlement", "Prog B delivered",
                     "Prog B entitlement"}
    # the usage was 3 h ago: in the last day (the week holds complete days only)
    card = client.get(url, {"range": "day", "node": recent.prog_a.pk}, HTTP_HX_REQUEST="true",
                      HTTP_HX_TARGET="budget-card").content.decode()
    assert "fig-occupancy" not in card
    # each series: its line over the complete hours, then the hour still filling ("so far")
    series = {}
    for trace in figure(card, "fig-budgets")["data"]:
        name = trace["name"].removesuffix(", so far")
        series[name] = series.get(name, 0) + sum(y for y in trace["y"] if y is not None)
    assert series["Proj A1 delivered"] == pytest.approx(6)
    assert series["Proj A2 delivered"] == 0
    # entitlement: 52.5% of the healthy GPU-h of the day so far
    assert series["Proj A1 entitlement"] > series["Proj A2 entitlement"]


def test_queue_and_fleet_figures(recent):
    fragment = recent.client_for("pi").get(
        reverse("reports:cluster", args=["h100"]), {"range": "day"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    waits = figure(fragment, "fig-waits")
    assert waits["data"][0]["x"] == ["debug (0)", "small (1)", "large (0)", "unallocated (0)"]
    assert waits["data"][0]["y"][1] == pytest.approx(60)  # minutes
    assert "no repairs" in fragment


def test_query_counts_do_not_grow_with_the_tree(recent):
    client = recent.client_for("ceo")
    # The CEO manages the root: the operator permission (two queries) is never asked.
    pages = {
        # the report, its final part kept once computed (reports.final_periods: one query for
        # when periods are final), and the users who charged the budgets: each reads the runs
        # and the utilization rollups (a first request: nothing kept yet)
        reverse("reports:review", args=["h100"]) + "?period=week&date=2025-03-05": 19,
        reverse("reports:review_csv", args=["h100"]) + "?period=week&date=2025-03-05": 13,
        # the week's pyramid reads its first hour, only partly inside the week, from that
        # hour's samples (2 on each page below);
        # per cluster: one budget report, the last hours' utilization, a trend and the unusable
        # shares check (3)
        reverse("reports:dashboards"): 29,
        # the budget card's utilization and the repair figure: one query each
        reverse("reports:cluster", args=["h100"]): 26,
        reverse("reports:cluster", args=["h100"]) + "?range=day": 26,
    }

    def counts():
        seen = {}
        for url in pages:
            with CaptureQueriesContext(connection) as queries:
                assert client.get(url).status_code == 200
            seen[url] = len(queries)
        return seen

    before = counts()
    assert before == pages
    # more budgets and workloads, same number of queries
    for index in range(5):
        leaf = BudgetNode.objects.create(parent=recent.prog_b, slug=f"extra-{index}",
                                         name=f"Extra {index}", kind="project")
        Workload.objects.create(name="x", owner=recent.users["ceo"], budget=leaf,
                                cluster=recent.cluster, gpus=1, min_runtime=60, command="x",
                                submitted=recent.now - timedelta(hours=2))
    assert counts() == before


def test_every_chart_is_a_valid_plotly_figure(recent):
    """The figures are written as plain dicts (no plotly validation per request): plotly's
    own Figure class checks every property name and value here."""
    import plotly.graph_objects as go

    client = recent.client_for("ceo")
    bodies = [
        client.get(reverse("reports:dashboards")).content.decode(),
        client.get(reverse("reports:cluster", args=["h100"]), {"range": "day"}).content.decode(),
        client.get(reverse("reports:cluster", args=["h100"])).content.decode(),
    ]
    ids = [figure_id for body in bodies for figure_id in
           re.findall(r'<script id="([\w-]+)" type="application/json">', body)]
    assert {"trend-h100", "fig-occupancy", "fig-budgets", "fig-waits", "fig-pending",
            "fig-preemptions", "fig-fleet"} <= set(ids)
    for body in bodies:
        for figure_id in re.findall(r'<script id="([\w-]+)" type="application/json">', body):
            go.Figure(figure(body, figure_id))  # raises on an unknown or invalid property
