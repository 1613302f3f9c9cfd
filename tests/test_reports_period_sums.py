"""Rollups summed per period (reports.sql.sums_by_period, one aggregate per period joined by
UNION ALL) against their definition, summed here row by row: on a generated history of hourly
rollups with rows before, between and after the periods, and periods of unequal lengths."""

import random
from datetime import UTC, datetime, timedelta

import pytest

from reports import accounting
from scheduler.models import Run, UsageRollup, UtilizationRollup

FIRST_HOUR = datetime(2024, 12, 20, tzinfo=UTC)
HOURS = 24 * 100  # to the end of March 2025

# January, then February and March with a gap between (not contiguous), then a custom day
PERIODS = [
    (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 2, 1, tzinfo=UTC)),
    (datetime(2025, 2, 1, tzinfo=UTC), datetime(2025, 3, 1, tzinfo=UTC)),
    (datetime(2025, 3, 3, tzinfo=UTC), datetime(2025, 3, 10, tzinfo=UTC)),
    (datetime(2025, 3, 10, tzinfo=UTC), datetime(2025, 3, 11, tzinfo=UTC)),
]


def index_of(hour):
    return next((i for i, (a, b) in enumerate(PERIODS) if a <= hour < b), None)


@pytest.fixture
def generated(history):
    """Random hourly usage and utilization rollups of every budget over 100 days."""
    rng = random.Random(13)
    budgets = [history.prog_a, history.proj_a1, history.proj_a2, history.proj_b1]
    run = Run.objects.filter(workload__cluster=history.cluster).first()
    owner = history.users["researcher"]
    # clear the hand-made week's rollups: every row below is known
    UsageRollup.objects.all().delete()
    UtilizationRollup.objects.all().delete()
    usage, utilization = [], []
    for step in range(HOURS):
        hour = FIRST_HOUR + timedelta(hours=step)
        for budget in budgets:
            if rng.random() < 0.6:
                usage.append(UsageRollup(cluster=history.cluster, budget=budget, hour=hour,
                                         gpu_seconds=rng.choice([0.0, 1.5, 3600.0 * 3.25])))
        if rng.random() < 0.7:
            measured = rng.uniform(0, 8 * 3600)
            utilization.append(UtilizationRollup(
                run=run, cluster=history.cluster, budget=rng.choice(budgets), owner=owner,
                allocated=rng.random() < 0.5, hour=hour, gpu_seconds=measured,
                busy_gpu_seconds=measured * rng.random()))
    UsageRollup.objects.bulk_create(usage)
    UtilizationRollup.objects.bulk_create(utilization)
    return history, usage, utilization


def test_delivered_per_period_is_the_sum_of_the_rollups_starting_in_it(generated):
    history, usage, _ = generated
    expected = [{} for _ in PERIODS]
    for row in usage:
        index = index_of(row.hour)
        if index is not None:
            expected[index][row.budget_id] = (expected[index].get(row.budget_id, 0.0)
                                              + row.gpu_seconds)
    assert accounting.delivered_by_period(history.cluster, PERIODS) == [
        pytest.approx(sums) for sums in expected]
    # a period alone (no UNION) gives the same
    assert accounting.delivered_by_period(history.cluster, PERIODS[1:2]) == [
        pytest.approx(expected[1])]


@pytest.mark.parametrize("allocated", [None, True, False])
def test_utilization_per_period_is_the_sum_of_the_rollups_starting_in_it(generated, allocated):
    history, _, utilization = generated
    expected = [{} for _ in PERIODS]
    for row in utilization:
        index = index_of(row.hour)
        if index is None or (allocated is not None and row.allocated != allocated):
            continue
        measured, busy = expected[index].get(row.budget_id, (0.0, 0.0))
        expected[index][row.budget_id] = (measured + row.gpu_seconds,
                                          busy + row.busy_gpu_seconds)
    got = accounting.utilization_by_period(history.cluster, PERIODS, allocated)
    assert [{pk: (b.measured, b.busy) for pk, b in sums.items()} for sums in got] == [
        {pk: pytest.approx(pair) for pk, pair in sums.items()} for sums in expected]
