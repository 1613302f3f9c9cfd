"""Who used the time, against the hand-computed week of tests/fixtures_reports.py (every
workload there is the researcher's) plus the lead, who moved from proj-a1 to proj-a2:

  lead: proj-a1 2 GPUs Mon 10:00-13:00 (6 GPU-h), then proj-a2 1 GPU Tue 09:00-11:00 (2 GPU-h).
  researcher, proj-a1: w1 4 x 2.5 h = 10; w2 2 x 115 min + 2 x 55 min = 5.667; 3 starts.
  researcher, proj-a2: w3 8 x 3 h 05 = 24.667 delivered; w6 unallocated 2 x 2 h = 4 (in week).
  researcher, proj-b1: w7 1 x 3 h = 3 delivered; w5 unallocated 3 x 2 h = 6, started before
  the week (no start counted).
Top users: researcher 15.667 + 24.667 + 3 = 43.333, lead 8.
"""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from reports import accounting, review_report, users
from scheduler.models import Run, UtilizationRollup, Workload

WEEK_START = datetime(2025, 3, 3, tzinfo=UTC)
WEEK_END = datetime(2025, 3, 10, tzinfo=UTC)


def at(day, hour=0, minute=0):
    return datetime(2025, 3, day, hour, minute, tzinfo=UTC)


@pytest.fixture
def moved(history):
    lead = history.users["lead"]
    runs = []
    for budget, gpus, start, end in [(history.proj_a1, 2, at(3, 10), at(3, 13)),
                                     (history.proj_a2, 1, at(4, 9), at(4, 11))]:
        w = Workload.objects.create(name=f"lead-{budget.slug}", owner=lead, budget=budget,
                                    cluster=history.cluster, gpus=gpus, min_runtime=3600,
                                    command="x", submitted=start, state="COMPLETED",
                                    finished=end)
        runs.append(Run.objects.create(workload=w, number=1, allocated=True, gpus=gpus,
                                       started=start, protected_until=end, ended=end,
                                       end_reason="completed", accounted_until=end))
    # the lead's proj-a2 run was 25% busy
    UtilizationRollup.objects.create(run=runs[1], cluster=history.cluster,
                                     budget=history.proj_a2, owner=lead, allocated=True,
                                     hour=at(4, 9), gpu_seconds=7200, busy_gpu_seconds=1800)
    return history


def by_user(rows):
    return {r.username: r for r in rows}


def test_a_user_who_moved_has_a_row_in_each_budget(moved):
    rows = users.user_rows(moved.cluster, WEEK_START, WEEK_END)
    assert by_user(rows[moved.proj_a1.pk])["lead"].delivered_h == pytest.approx(6)
    assert by_user(rows[moved.proj_a2.pk])["lead"].delivered_h == pytest.approx(2)


def test_delivered_unallocated_and_starts_per_user_and_budget(moved):
    rows = users.user_rows(moved.cluster, WEEK_START, WEEK_END)
    a1 = by_user(rows[moved.proj_a1.pk])["researcher"]
    assert (a1.delivered_h, a1.starts) == (pytest.approx(10 + 17 / 3), 3)
    a2 = by_user(rows[moved.proj_a2.pk])["researcher"]
    assert (a2.delivered_h, a2.unallocated_h) == (pytest.approx(74 / 3), pytest.approx(4))
    b1 = by_user(rows[moved.proj_b1.pk])["researcher"]
    assert (b1.delivered_h, b1.unallocated_h, b1.starts) == (pytest.approx(3), pytest.approx(6), 1)


def test_users_in_a_budget_most_delivered_first(moved):
    rows = users.user_rows(moved.cluster, WEEK_START, WEEK_END)
    assert [r.username for r in rows[moved.proj_a1.pk]] == ["researcher", "lead"]


def test_user_utilization_comes_from_their_runs_rollups(moved):
    rows = users.user_rows(moved.cluster, WEEK_START, WEEK_END)
    assert by_user(rows[moved.proj_a2.pk])["lead"].utilization == pytest.approx(0.25)
    assert by_user(rows[moved.proj_a1.pk])["lead"].utilization is None


def test_top_users_sum_every_budget_they_charged(moved):
    rows = users.user_rows(moved.cluster, WEEK_START, WEEK_END)
    paths = {n.pk: n.path for n in (moved.proj_a1, moved.proj_a2, moved.proj_b1)}
    top = users.top_users(rows, paths)
    assert [(u.username, round(u.delivered_h, 3)) for u in top] == [
        ("researcher", 43.333), ("lead", 8.0)]
    assert top[1].budgets == ["org/prog-a/proj-a1", "org/prog-a/proj-a2"]


def test_top_users_only_count_the_budgets_shown(moved):
    rows = users.user_rows(moved.cluster, WEEK_START, WEEK_END)
    top = users.top_users(rows, {moved.proj_b1.pk: moved.proj_b1.path})
    assert [(u.username, u.delivered_h) for u in top] == [("researcher", pytest.approx(3))]


def test_the_report_read_with_its_users_is_the_same_as_each_computed_alone(moved):
    """The review page reads the runs and the utilization rollups once for the report and its
    users: the figures from them are those of each computed alone (a week in progress)."""
    tree, now = accounting.Tree(), at(6, 15, 30)
    report, rows = users.report_and_users(moved.cluster, WEEK_START, WEEK_END, tree, now=now)
    alone = review_report.budget_report(moved.cluster, WEEK_START, WEEK_END, now=now, tree=tree)

    def from_runs_and_rollups(report):
        return {f"{row.node.path} {name}": value for row in report.rows for name, value in [
            ("unallocated", row.unallocated_h), ("preemptions", row.preemptions),
            ("lost", row.lost_h), ("measured", row.busy.measured), ("busy", row.busy.busy)]}

    def per_user(rows):
        return {f"{budget_id} {r.username} {name}": value
                for budget_id, people in rows.items() for r in people
                for name, value in [("delivered", r.delivered_h), ("unallocated", r.unallocated_h),
                                    ("starts", r.starts), ("measured", r.busy.measured),
                                    ("busy", r.busy.busy)]}

    assert from_runs_and_rollups(report) == pytest.approx(from_runs_and_rollups(alone))
    assert per_user(rows) == pytest.approx(
        per_user(users.user_rows(moved.cluster, WEEK_START, WEEK_END, now=now)))
    assert report.rows[0].preemptions == 2 and report.rows[0].busy.measured == 7200


def test_the_review_page_lists_top_users_and_each_budget_s_users(moved):
    url = reverse("reports:review", args=["h100"]) + "?period=week&date=2025-03-05"
    response = moved.client_for("pi").get(url)
    assert [u.username for u in response.context["top_users"]] == ["researcher", "lead"]
    body = response.content.decode()
    assert 'id="top-users"' in body and 'id="budget-users"' in body
    # the PI of prog-a does not see proj-b1's people
    assert [node.path for node, _ in response.context["budget_users"]] == [
        "org/prog-a/proj-a1", "org/prog-a/proj-a2"]
