"""Period over period, demand against supply and the institute roll-up, against the
hand-computed week of tests/fixtures_reports.py (Mon 3 March 2025) and the weeks before it.

The week: capacity 1560 GPU-h; requested = allocated demand 34.333 (proj-a1) + 20 (proj-a2)
+ 26 (proj-b1) + 10 unallocated = 90.333 GPU-h. The week before (24 Feb - 3 Mar): capacity
168 h x 10 = 1680; proj-b1 delivered 10 (Sun 23:00), W7 pending Sun 22:00-24:00 (1 GPU, 2 h),
W5 unallocated 3 GPUs 22:00-24:00 (6): 18 GPU-h requested.
A second cluster, b200 (4 GPUs, 672 GPU-h in the week), delivered 8 GPU-h to proj-a1.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from fixtures_reports import figures_of

from budgets.models import AllocationChange
from fleet.models import Cluster, Host
from reports import accounting, review_report, trends
from scheduler.models import UsageRollup

WEEK_START = datetime(2025, 3, 3, tzinfo=UTC)
WEEK_END = datetime(2025, 3, 10, tzinfo=UTC)


def day(y, m, d):
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(("start", "end", "period", "expected"), [
    (day(2025, 3, 3), day(2025, 3, 10), "week", (day(2025, 2, 24), day(2025, 3, 3))),
    (day(2025, 3, 1), day(2025, 4, 1), "month", (day(2025, 2, 1), day(2025, 3, 1))),
    (day(2025, 1, 1), day(2025, 2, 1), "month", (day(2024, 12, 1), day(2025, 1, 1))),
    (day(2025, 1, 1), day(2025, 4, 1), "quarter", (day(2024, 10, 1), day(2025, 1, 1))),
    (day(2025, 3, 5), day(2025, 3, 8), "custom", (day(2025, 3, 2), day(2025, 3, 5))),
])
def test_previous_period(start, end, period, expected):
    assert trends.previous_period(start, end, period) == expected


def test_eight_periods_oldest_first_the_chosen_one_last(db):
    weeks = trends.periods(WEEK_START, WEEK_END, "week")
    assert len(weeks) == 8
    assert weeks[0] == (day(2025, 1, 13), day(2025, 1, 20))
    assert weeks[-1] == (WEEK_START, WEEK_END)


@pytest.fixture
def history_of_weeks(history):
    return trends.period_over_period(history.cluster, WEEK_START, WEEK_END, "week",
                                     accounting.Tree())


def test_demand_over_supply_this_week_and_the_one_before(history_of_weeks):
    this, before = history_of_weeks[-1], history_of_weeks[-2]
    assert this.demand_h == pytest.approx(90 + 1 / 3)
    assert this.demand_over_supply == pytest.approx((90 + 1 / 3) / 1560)
    assert before.demand_over_supply == pytest.approx(18 / 1680)


def test_delivered_trend_per_budget(history, history_of_weeks):
    delivered = trends.node_trends(history_of_weeks, history.proj_b1.pk)[0]
    assert delivered.values == pytest.approx([0, 0, 0, 0, 0, 0, 10, 5])
    assert (delivered.this, delivered.previous) == (pytest.approx(5), pytest.approx(10))


def test_attainment_trend_is_empty_where_nothing_was_asked(history, history_of_weeks):
    attainment = trends.node_trends(history_of_weeks, history.proj_a1.pk)[1]
    assert attainment.values[:7] == [None] * 7
    assert attainment.this == pytest.approx(100 * 30 / (34 + 1 / 3))


@pytest.fixture
def two_clusters(history, capacity_rollups):
    b200 = Cluster.objects.create(name="b200", gpu_type="B200", created=day(2025, 1, 1))
    Host.objects.create(cluster=b200, name="b200-0", gpus=4)
    for node, shares in [(history.prog_a, 1), (history.proj_a1, 1)]:
        AllocationChange.objects.create(node=node, cluster=b200, changed_by=history.users["ceo"],
                                        changed_by_name="ceo", at=day(2025, 2, 1),
                                        old_shares=None, new_shares=shares, reason="test")
    capacity_rollups(b200, b200.created, day(2025, 4, 1))
    UsageRollup.objects.create(cluster=b200, budget=history.proj_a1,
                               hour=WEEK_START + timedelta(hours=30), gpu_seconds=8 * 3600)
    return history, b200


def test_institute_normalises_each_cluster_by_its_size(two_clusters):
    history, b200 = two_clusters
    clusters = list(Cluster.objects.with_gpu_count())
    tree = accounting.Tree()
    rows = {r.node.path: r for r in trends.institute(
        clusters, WEEK_START, WEEK_END, tree, {n.pk for n in tree.nodes})}
    a1 = rows["org/prog-a/proj-a1"]
    assert [c.name for c in clusters] == ["b200", "h100"]
    assert a1.per_cluster == [(pytest.approx(8), pytest.approx(8 / 672)),
                              (pytest.approx(30), pytest.approx(30 / 1560))]
    assert a1.total_delivered_h == pytest.approx(38)
    assert a1.total_share == pytest.approx(38 / (672 + 1560))


def test_the_trends_page_shows_only_the_persona_s_budgets(two_clusters):
    history, _ = two_clusters
    url = reverse("reports:review_trends", args=["h100"]) + "?period=week&date=2025-03-05"
    response = history.client_for("pi").get(url)
    assert response.status_code == 200
    assert [node.path for node, _ in response.context["nodes"]] == [
        "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a2"]
    assert [r.node.path for r in response.context["institute"]] == [
        "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a2"]
    body = response.content.decode()
    assert 'id="demand-supply"' in body and "<polyline" in body


def test_an_outsider_sees_no_trends(history):
    url = reverse("reports:review_trends", args=["h100"])
    assert history.client_for("outsider").get(url).status_code == 403


def test_trends_page_query_count_does_not_grow_with_the_tree(two_clusters):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from budgets.models import BudgetNode

    history, _ = two_clusters
    client = history.client_for("ceo")
    url = reverse("reports:review_trends", args=["h100"]) + "?period=week&date=2025-03-05"

    def count():
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return len(queries)

    before = count()
    for index in range(5):
        BudgetNode.objects.create(parent=history.prog_b, slug=f"extra-{index}",
                                  name=f"Extra {index}", kind="project")
    assert count() == before


@pytest.mark.parametrize(("start", "end", "period", "now"), [
    # the week and the seven before it
    (WEEK_START, WEEK_END, "week", None),
    # a day at a time over the week: stays, runs and the share change cross the midnights
    (day(2025, 3, 9), day(2025, 3, 10), "custom", None),
    # a day in progress, mid-hour, right after the share change
    (day(2025, 3, 6), day(2025, 3, 7), "custom", datetime(2025, 3, 6, 15, 30, tzinfo=UTC)),
])
def test_each_period_s_figures_are_its_review_report_computed_alone(history, start, end,
                                                                    period, now):
    tree = accounting.Tree()
    together = trends.period_over_period(history.cluster, start, end, period, tree, now=now)
    alone = [review_report.budget_report(history.cluster, a, b, now=now, tree=tree)
             for a, b in trends.periods(start, end, period)]
    assert sum(1 for report in alone if report.rows[0].demand_h) >= 2  # data in several
    for figures, report in zip(together, alone, strict=True):
        assert (figures.report.start, figures.report.end) == (report.start, report.end)
        assert figures_of(figures.report) == pytest.approx(figures_of(report))


def test_trends_page_reads_each_kind_of_data_once_whatever_the_number_of_periods(history):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # The page: the session and its user, the persona's visible budgets (2 queries), the
    # cluster, the budget tree, the cluster tabs, and the base template's two badges.
    page = 9
    # Which periods are final, and the stamp their kept figures are under: one statement
    # (reports.final_periods); on this first request none is kept yet.
    final = 1
    # The periods' data, each read once over their whole span: the allocation log; capacity
    # (hourly rollups, the samples inside the hours a cut splits and the one before each);
    # usage rollups; runs; utilization rollups; queue stays (submissions, requeues).
    data = 9
    # a share change at half past an hour, weeks before: capacity reads its samples too
    AllocationChange.objects.create(
        node=history.proj_b1, cluster=history.cluster, changed_by=history.users["ceo"],
        changed_by_name="ceo", at=datetime(2025, 2, 12, 9, 30, tzinfo=UTC), old_shares=100,
        new_shares=80, reason="test")
    url = reverse("reports:review_trends", args=["h100"]) + "?period=week&date=2025-03-05"
    client = history.client_for("ceo")
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    assert len(queries) <= page + final + data
