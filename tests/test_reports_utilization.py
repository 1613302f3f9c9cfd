"""Utilization in the review report, the pyramid, the dashboards and /metrics, against the
hand-computed week of tests/fixtures_reports.py plus utilization rollups written by hand:

  w1 proj-a1 (4 GPUs, Mon 08:30-11:00): Mon 08h 7200 measured / 3600 busy, 09h 14400 / 10800,
     10h 14400 / 3600: 36000 / 18000 GPU-s, 50%.
  w3 proj-a2 (8 GPUs, Thu 02:00-05:05): Thu 02h 28800 / 25920 (90%).
  w6 proj-a2 unallocated (2 GPUs): Sun 22h 7200 / 0; Mon 10 March 00h 7200 / 7200 (after the
     week, not counted).
  w5 proj-b1 unallocated: Sun 2 March 22h 10800 / 10800 (before the week, not counted).

In the week: proj-a1 50%; proj-a2 25920 / 36000 = 72%; prog-a and org 43920 / 72000 = 61%;
proj-b1 and prog-b nothing measured (empty).
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from reports import accounting, pyramid, review_report
from scheduler.models import Run, UtilizationRollup

WEEK_START = datetime(2025, 3, 3, tzinfo=UTC)
WEEK_END = datetime(2025, 3, 10, tzinfo=UTC)


def at(day, hour=0):
    return datetime(2025, 3, day, hour, tzinfo=UTC)


def roll_up(run, hour, measured, busy):
    w = run.workload
    return UtilizationRollup.objects.create(
        run=run, cluster=w.cluster, budget=w.budget, owner=w.owner, allocated=run.allocated,
        hour=hour, gpu_seconds=measured, busy_gpu_seconds=busy,
    )


@pytest.fixture
def busy_history(history):
    runs = {r.workload.name: r for r in Run.objects.select_related("workload")}
    for name, hour, measured, busy in [
        ("w1", at(3, 8), 7200, 3600), ("w1", at(3, 9), 14400, 10800),
        ("w1", at(3, 10), 14400, 3600), ("w3", at(6, 2), 28800, 25920),
        ("w6", at(9, 22), 7200, 0), ("w6", at(10, 0), 7200, 7200),
        ("w5", at(2, 22), 10800, 10800),
    ]:
        roll_up(runs[name], hour, measured, busy)
    return history


def rows(history):
    report = review_report.budget_report(history.cluster, WEEK_START, WEEK_END)
    return report, {row.node.path: row for row in report.rows}


def test_each_budget_s_utilization_is_busy_over_measured_in_its_subtree(busy_history):
    _, row = rows(busy_history)
    assert row["org/prog-a/proj-a1"].utilization == pytest.approx(0.50)
    assert row["org/prog-a/proj-a2"].utilization == pytest.approx(0.72)
    assert row["org/prog-a"].utilization == pytest.approx(0.61)
    assert row["org"].utilization == pytest.approx(0.61)


def test_a_budget_without_telemetry_has_no_utilization(busy_history):
    _, row = rows(busy_history)
    assert row["org/prog-b/proj-b1"].utilization is None
    assert row["org/prog-b"].utilization is None


def test_the_table_and_csv_print_utilization_in_percent(busy_history):
    report, _ = rows(busy_history)
    column = [key for key, _ in review_report.COLUMNS].index("utilization")
    cells = {r[0]: r[column] for r in review_report.table(report.rows)}
    assert (cells["org/prog-a/proj-a2"], cells["org/prog-b"]) == ("72.0", "")

    csv = busy_history.client_for("ceo").get(
        reverse("reports:review_csv", args=["h100"]) + "?period=week&date=2025-03-05"
    ).content.decode()
    assert "Utilization %" in csv.splitlines()[0]
    assert ",61.0" in next(line for line in csv.splitlines() if line.startswith("org/prog-a,"))


def test_pyramid_top_is_busy_fraction_and_useful_gpu_hours(busy_history):
    # delivered in the week: proj-a1 10 + 20, proj-a2 4, proj-b1 5 = 39 GPU-h; x 61% = 23.79
    week = pyramid.pyramid(busy_history.cluster, WEEK_START, WEEK_END, accounting.Tree())
    assert week.utilization == pytest.approx(0.61)
    assert week.useful_gpu_hours == pytest.approx(23.79)


def test_pyramid_without_telemetry_reports_no_utilization(history):
    week = pyramid.pyramid(history.cluster, WEEK_START, WEEK_END, accounting.Tree())
    assert week.utilization is None and week.useful_gpu_hours is None


@pytest.fixture
def busy_now(recent):
    """The recent run at 40% busy over the previous clock hour, 80% over the current one."""
    run = Run.objects.get(workload__name="recent")
    base = timezone.now().replace(minute=0, second=0, microsecond=0)
    roll_up(run, base - timedelta(hours=1), 7200, 2880)
    roll_up(run, base, 1200, 960)
    roll_up(run, base - timedelta(hours=2), 7200, 0)  # older: not "now"
    return recent


def test_pyramid_now_is_the_last_two_clock_hours(busy_now):
    now, _ = pyramid.latest_pyramid(busy_now.cluster, accounting.Tree())
    assert now.utilization == pytest.approx((2880 + 960) / (7200 + 1200))


def test_dashboards_print_utilization_instead_of_not_reported(busy_now):
    body = busy_now.client_for("ceo").get(reverse("reports:dashboards")).content.decode()
    assert "not reported by this fleet" not in body
    assert "46%" in body  # 3840 / 8400 now


def test_dashboards_trend_charts_daily_utilization(busy_now):
    trend = pyramid.pyramid_trend(busy_now.cluster, accounting.Tree(), timezone.now(), 14)
    today = trend["utilization"][-1]
    earlier = [v for v in trend["utilization"][:-2] if v is not None]
    assert today is not None and not earlier


def metric(body, name, cluster):
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("cluster") == cluster:
                return sample.value
    return None


def test_metrics_gauge_per_cluster_is_the_busy_fraction_now(busy_now):
    busy_now.cluster.telemetry = "simulated"
    busy_now.cluster.save()
    Run.objects.filter(workload__name="recent").update(idle_flagged_at=timezone.now())

    body = busy_now.client_for("operator").get("/metrics").content.decode()

    assert metric(body, "timeshare_gpu_utilization", "h100") == pytest.approx(3840 / 8400)
    assert metric(body, "timeshare_idle_runs", "h100") == 1


def test_metrics_leave_out_clusters_without_telemetry(busy_now):
    body = busy_now.client_for("operator").get("/metrics").content.decode()
    assert metric(body, "timeshare_gpu_utilization", "h100") is None


def test_the_cluster_dashboard_budget_card_has_utilization(busy_now):
    # proj-a1's recent run over the last day (its three hours): (0 + 2880 + 960) /
    # (7200 + 7200 + 1200); "last week" would end at this midnight, before them
    response = busy_now.client_for("ceo").get(
        reverse("reports:cluster", args=["h100"]) + f"?node={busy_now.proj_a1.pk}&range=day"
    )
    [row] = response.context["budget_nodes"]
    assert row["utilization"] == pytest.approx(3840 / 15600)
