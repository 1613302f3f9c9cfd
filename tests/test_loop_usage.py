"""Usage rollups are exact against the run records, never charge unallocated work, never
charge twice; the window's usage is exact at its edge; capacity counts healthy hosts over the
part of the window the cluster existed."""

from collections import defaultdict
from datetime import timedelta

import pytest
from fixtures_loop import at, make_workload

from fleet import services as host_services
from fleet.models import CapacityRollup
from scheduler import loop, services
from scheduler.engine import window_usage as engine_window_usage
from scheduler.models import Run, UsageRollup


def tick(lab, seconds):
    return loop.tick(lab.cluster.pk, at(seconds))


def charged_by_runs():
    """Allocated GPU-seconds per (budget, hour) computed from the run records alone."""
    out = defaultdict(float)
    for run in Run.objects.select_related("workload"):
        if run.allocated:
            for hour, seconds in loop.split_hours(run.started, run.accounted_until):
                out[(run.workload.budget_id, hour)] += run.gpus * seconds
    return dict(out)


def rollups():
    return {(r.budget_id, r.hour): r.gpu_seconds for r in UsageRollup.objects.all()}


def test_rollups_are_exact_against_run_records_and_never_charge_twice(lab):
    make_workload(lab, lab.a1, gpus=2, expected_duration=5000)
    make_workload(lab, lab.a2, gpus=1, min_runtime=600, expected_duration=9000)
    make_workload(lab, lab.b1, gpus=4, min_runtime=0, expected_duration=7000)  # unallocated
    cancelled = make_workload(lab, lab.a2, gpus=1)
    for t in (0, 1800, 1800, 3599, 3600, 4000):
        tick(lab, t)
    services.cancel(lab.alice, cancelled)
    for t in (5000, 7777, 7777, 12345):
        tick(lab, t)
    expected = charged_by_runs()
    got = rollups()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-9)
    assert not UsageRollup.objects.filter(budget=lab.b1).exists()  # unallocated: free
    a1 = sum(v for (b, _), v in got.items() if b == lab.a1.pk)
    assert a1 == pytest.approx(2 * 5000)
    assert all(r.accounted_until == (r.ended or at(12345)) for r in Run.objects.all())


def test_window_usage_is_exact_at_the_window_edge(lab):
    lab.cluster.window = 3600
    lab.cluster.save()
    make_workload(lab, lab.a1, gpus=2, submitted=at(-10))  # runs on and on
    make_workload(lab, lab.a2, gpus=1, expected_duration=4000, submitted=at(-5))
    for t in range(0, 7000, 700):
        tick(lab, t)
    now = at(7321.5)
    tick(lab, 7321.5)
    paths = {lab.a1.pk: lab.a1.path, lab.a2.pk: lab.a2.path}
    usage = loop.window_usage(lab.cluster, now, paths)
    # [now - 1 h, now]: a1 ran throughout, a2 ended at 4000 s, inside the window by 278.5 s
    assert usage[lab.a1.path] == pytest.approx(2 * 3600)
    assert usage[lab.a2.path] == pytest.approx(1 * (4000 - (7321.5 - 3600)))
    intervals = [
        (r.workload.budget.path, r.started.timestamp(), r.accounted_until.timestamp(), r.gpus)
        for r in Run.objects.select_related("workload__budget") if r.allocated
    ]
    reference = engine_window_usage(intervals, now.timestamp(), 3600)
    assert usage == pytest.approx(reference)


def test_capacity_counts_healthy_hosts_over_the_part_of_the_window_the_cluster_existed(lab):
    lab.cluster.created = at(-1800)
    lab.cluster.save()
    tick(lab, 0)
    assert loop.window_capacity(lab.cluster, at(0)) == pytest.approx(8 * 1800)
    host_services.drain(lab.operator, lab.hosts[0], "test")
    tick(lab, 600)  # DRAINING still counts, DRAINED does not
    tick(lab, 1200)  # lab-0 DRAINED at 600 -> REPAIRING at 1200
    assert loop.window_capacity(lab.cluster, at(1200)) == pytest.approx(
        8 * 1800 + 8 * 600 + 4 * 600
    )
    total = sum(CapacityRollup.objects.values_list("gpu_seconds", flat=True))
    assert total == pytest.approx(8 * 2400 + 4 * 600)
    # a week later, only the window counts (the hour cut by its start pro rata)
    week = lab.cluster.window
    tick(lab, week + 3600)
    capacity = loop.window_capacity(lab.cluster, at(week + 3600))
    # lab-0 stayed in repair all along; the hour cut by the window start counts pro rata
    assert capacity == pytest.approx(4 * week, rel=1e-3)


def test_usage_feeds_the_rank(lab):
    """The budget that used more waits behind the one that used less."""
    for h in range(1, 4):
        UsageRollup.objects.create(cluster=lab.cluster, budget=lab.a1,
                                   hour=loop.floor_hour(at(0)) - timedelta(hours=h),
                                   gpu_seconds=8 * 3600)
    first = make_workload(lab, lab.a1, gpus=8, submitted=at(-100))
    second = make_workload(lab, lab.a2, gpus=8, submitted=at(-50))
    report = tick(lab, 0)
    assert report.passes[0].order[:2] == [str(second.pk), str(first.pk)]
