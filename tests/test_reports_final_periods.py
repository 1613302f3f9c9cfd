"""Final periods' reports kept in the cache (reports.final_periods), on the hand-computed
history of tests/fixtures_reports.py: the loop's last occupancy sample is Sun 9 March 2025,
so with a settle time of 7 days the weeks ending by Sun 2 March are final and the two
after it (24 Feb - 3 Mar, 3 - 10 Mar) are not; the first of those is final but for its last
day."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from fixtures_reports import figures_of
from query_counts import count_queries, get_counting

from budgets.models import Allocation, AllocationChange, BudgetNode
from reports import accounting, final_periods, review_report, trends
from scheduler import retention
from scheduler.models import OccupancySample, TelemetryCursor, UsageRollup


def day(m, d):
    return datetime(2025, m, d, tzinfo=UTC)


THIS_WEEK = (day(3, 3), day(3, 10))  # not final: ends after the last sample
WEEK_OF_FEB_3 = (day(2, 3), day(2, 10))  # final, and so are the seven before it


def weeks(cluster, week):
    return trends.period_over_period(cluster, *week, "week", accounting.Tree())


def delivered(history, week, node) -> list[float]:
    return [f.rows[node.pk].delivered_h for f in weeks(history.cluster, week)]


def tick(history, at):
    """The live loop's sample of a tick at ``at``: all is accounted for up to there."""
    OccupancySample.objects.create(cluster=history.cluster, at=at, total=10, available=10,
                                   allocated=0, unallocated=0, pending_workloads=0,
                                   pending_gpus=0)


def test_settle_time_outlasts_the_samples_compaction():
    assert final_periods.SETTLE >= retention.FULL_RESOLUTION + retention.LOOKBACK


def test_periods_are_final_up_to_the_last_sample_less_the_settle_time(history):
    until, stamp = final_periods.final_until(history.cluster)
    assert until == datetime(2025, 3, 9, tzinfo=UTC) - final_periods.SETTLE
    assert stamp


def test_a_cluster_reading_telemetry_is_final_only_up_to_its_cursor(history):
    history.cluster.telemetry = "simulated"
    history.cluster.save(update_fields=["telemetry"])
    assert final_periods.final_until(history.cluster)[0] is None  # nothing read yet
    TelemetryCursor.objects.create(cluster=history.cluster, until=day(2, 20))
    assert final_periods.final_until(history.cluster)[0] == day(2, 13)


def test_read_twice_the_figures_are_the_same(history):
    first, second = weeks(history.cluster, THIS_WEEK), weeks(history.cluster, THIS_WEEK)
    for before, after in zip(first, second, strict=True):
        assert figures_of(after.report) == pytest.approx(figures_of(before.report))


def test_a_page_of_final_periods_read_again_reads_no_data(history):
    url = reverse("reports:review_trends", args=["h100"]) + "?period=week&date=2025-02-05"
    client = history.client_for("ceo")
    cold = count_queries(client, url)
    # The page's own 9 (test_reports_trends) and which periods are final (1): all eight
    # weeks are, so none of the periods' data is read again.
    assert count_queries(client, url) == 9 + 1 < cold


def test_the_review_page_of_a_final_period_shows_the_same_table_from_what_is_kept(history):
    url = reverse("reports:review", args=["h100"]) + "?period=week&date=2025-02-05"
    client = history.client_for("ceo")
    (computed, cold), (kept, warm) = get_counting(client, url), get_counting(client, url)
    assert kept.context["lines"] == computed.context["lines"]
    assert warm < cold  # the budget report's data is not read again; the users' rows are


def test_a_write_into_a_period_not_yet_final_is_reflected(history):
    before = delivered(history, THIS_WEEK, history.proj_a2)
    UsageRollup.objects.create(cluster=history.cluster, budget=history.proj_a2,
                               hour=day(3, 5), gpu_seconds=6 * 3600)
    after = delivered(history, THIS_WEEK, history.proj_a2)
    assert after == [*before[:-1], pytest.approx(before[-1] + 6)]


def test_a_final_period_is_kept_once_computed(history):
    before = delivered(history, WEEK_OF_FEB_3, history.proj_a2)
    # written behind the loop's back (the loop never writes this far into the past)
    UsageRollup.objects.create(cluster=history.cluster, budget=history.proj_a2,
                               hour=day(2, 5), gpu_seconds=6 * 3600)
    assert delivered(history, WEEK_OF_FEB_3, history.proj_a2) == before


def test_a_period_is_kept_only_once_the_loop_has_passed_its_end_by_the_settle_time(history):
    def last_week():  # 24 Feb - 3 Mar
        return delivered(history, THIS_WEEK, history.proj_b1)[-2]

    def charge(hour):  # on Sunday 2 March: its part after the last final midnight
        UsageRollup.objects.create(cluster=history.cluster, budget=history.proj_b1,
                                   hour=day(3, 2) + timedelta(hours=hour), gpu_seconds=6 * 3600)

    before = last_week()
    charge(0)
    assert last_week() == pytest.approx(before + 6)  # not final: computed afresh
    tick(history, day(3, 10))
    assert last_week() == pytest.approx(before + 6)  # final now: kept
    charge(1)  # behind the loop's back
    assert last_week() == pytest.approx(before + 6)


def test_a_period_not_final_yet_is_computed_only_after_its_last_final_midnight(history):
    tick(history, day(3, 13) + timedelta(hours=12))  # final up to Thu 6 March 12:00
    before = delivered(history, THIS_WEEK, history.proj_a2)[-1]
    UsageRollup.objects.create(cluster=history.cluster, budget=history.proj_a2,
                               hour=day(3, 5), gpu_seconds=6 * 3600)  # before that midnight
    assert delivered(history, THIS_WEEK, history.proj_a2)[-1] == before
    UsageRollup.objects.create(cluster=history.cluster, budget=history.proj_a2,
                               hour=day(3, 6) + timedelta(hours=1), gpu_seconds=3 * 3600)
    assert delivered(history, THIS_WEEK, history.proj_a2)[-1] == pytest.approx(before + 3)


def test_a_period_joined_from_its_final_part_and_the_rest_is_its_report_computed_alone(
        history):
    tick(history, day(3, 13) + timedelta(hours=12))  # split at Thu 6 March 00:00
    joined = weeks(history.cluster, THIS_WEEK)[-1].report
    alone = review_report.budget_report(history.cluster, *THIS_WEEK, tree=accounting.Tree())
    assert figures_of(joined) == pytest.approx(figures_of(alone))


def test_an_allocation_change_renews_the_kept_figures(history):
    def shares():
        return weeks(history.cluster, WEEK_OF_FEB_3)[-1].rows[history.proj_b1.pk].shares

    assert shares() == pytest.approx(100)
    # a scheduled change applied late: the log back-dated, the allocation renews the stamp
    AllocationChange.objects.create(
        node=history.proj_b1, cluster=history.cluster, changed_by=history.users["ceo"],
        changed_by_name="ceo", at=WEEK_OF_FEB_3[0], old_shares=100, new_shares=80,
        reason="scheduled")
    Allocation.objects.filter(node=history.proj_b1, cluster=history.cluster).update(shares=80)
    assert shares() == pytest.approx(80)


def test_a_new_budget_node_shows_in_the_kept_periods(history):
    weeks(history.cluster, WEEK_OF_FEB_3)
    extra = BudgetNode.objects.create(parent=history.prog_b, slug="extra", name="Extra",
                                      kind="project")
    assert all(f.rows[extra.pk].delivered_h == 0 for f in weeks(history.cluster, WEEK_OF_FEB_3))


def test_an_unreachable_cache_costs_speed_never_figures(history, settings):
    expected = [figures_of(f.report) for f in weeks(history.cluster, THIS_WEEK)]
    settings.CACHES = {"default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
    }}
    for figures, report in zip(expected, weeks(history.cluster, THIS_WEEK), strict=True):
        assert figures_of(report.report) == pytest.approx(figures)


def test_a_period_in_progress_is_never_kept(history):
    now = day(3, 6) + timedelta(hours=15, minutes=30)
    tick(history, day(3, 31))
    in_progress = trends.period_over_period(history.cluster, *THIS_WEEK, "week",
                                            accounting.Tree(), now=now)[-1]
    finished = trends.period_over_period(history.cluster, *THIS_WEEK, "week",
                                         accounting.Tree())[-1]
    assert in_progress.report.until == now
    assert finished.report.until == THIS_WEEK[1]
