"""Utilization from a real Prometheus: DCGM series in, run utilization and the idle rule out.

The history is backfilled exactly (fixtures_prometheus): samples every 15 s, 7.5 s off the
60 s step grid, so every step averages four samples of one value. H is a clock hour four
hours ago; the lab's runs are written straight into the database and the cursor is set to H,
so one collection at H + 1 h reads exactly that hour.
"""

from datetime import timedelta

import pytest
from django.utils import timezone
from fixtures_loop import make_workload
from fixtures_prometheus import needs_prometheus

from fleet.telemetry import PrometheusTelemetry, TelemetryUnavailable
from scheduler.models import Event, Run, RunGPU, TelemetryCursor, UtilizationRollup
from scheduler.signals import run_idle
from scheduler.utilization import collect

pytestmark = needs_prometheus
H = (timezone.now() - timedelta(hours=4)).replace(minute=0, second=0, microsecond=0)
BUSY = "DCGM_FI_DEV_GPU_UTIL"


def minutes(m: float):
    return H + timedelta(minutes=m)


def samples(host, gpu, segments):
    """``segments``: (from minute, to minute, percent busy); a sample every 15 s."""
    out = []
    for first, last, percent in segments:
        t = minutes(first).timestamp() + 7.5
        while t < minutes(last).timestamp():
            out.append((BUSY, host, gpu, t, percent))
            t += 15
    return out


def hold(lab, hosts_gpus, *, start=0, end=None, budget=None, owner=None):
    budget = budget or lab.a1
    workload = make_workload(lab, budget, gpus=len(hosts_gpus), submitted=minutes(start),
                             owner=owner)
    run = Run.objects.create(
        workload=workload, number=1, allocated=True, gpus=len(hosts_gpus),
        started=minutes(start), protected_until=minutes(start + 60),
        accounted_until=minutes(start), ended=None if end is None else minutes(end),
    )
    hosts = {h.name: h for h in lab.hosts}
    RunGPU.objects.bulk_create([
        RunGPU(run=run, host=hosts[name], index=index, held=end is None)
        for name, index in hosts_gpus
    ])
    return run


@pytest.fixture
def prometheus_lab(lab, prometheus_history):
    def serve(*series):
        url = prometheus_history([s for part in series for s in part])
        lab.cluster.telemetry = "prometheus"
        lab.cluster.backend_config = {**lab.cluster.backend_config, "prometheus_url": url}
        lab.cluster.save()
        TelemetryCursor.objects.create(cluster=lab.cluster, until=H)
        return url

    return serve


def utilization(run):
    rows = UtilizationRollup.objects.filter(run=run)
    measured = sum(r.gpu_seconds for r in rows)
    busy = sum(r.busy_gpu_seconds for r in rows)
    return measured, busy


def test_a_host_failing_mid_hour_counts_only_the_time_it_reported(lab, prometheus_lab):
    # lab-0 GPU 0 at 80% all hour; lab-1 GPU 0 at 40% until its host dies at :30.
    # Measured 3600 + 1800 = 5400 GPU-s, busy 0.8 x 3600 + 0.4 x 1800 = 3600: 66.7%.
    prometheus_lab(samples("lab-0", 0, [(0, 60, 80)]), samples("lab-1", 0, [(0, 30, 40)]))
    run = hold(lab, [("lab-0", 0), ("lab-1", 0)], end=60)

    collect(lab.cluster, minutes(60))

    measured, busy = utilization(run)
    assert measured == pytest.approx(5400)
    assert busy == pytest.approx(3600)


def test_a_run_is_charged_only_for_the_steps_it_held_the_gpu(lab, prometheus_lab):
    # The GPU is 90% busy all hour but the run held it from :20 to :50: 1800 GPU-s, 1620 busy.
    prometheus_lab(samples("lab-0", 1, [(0, 60, 90)]))
    run = hold(lab, [("lab-0", 1)], start=20, end=50)

    collect(lab.cluster, minutes(60))

    assert utilization(run) == (pytest.approx(1800), pytest.approx(1620))


def test_rollups_keep_budget_owner_and_clock_hour(lab, prometheus_lab):
    prometheus_lab(samples("lab-0", 2, [(0, 60, 50)]))
    run = hold(lab, [("lab-0", 2)], end=60, budget=lab.b1, owner=lab.bob)

    collect(lab.cluster, minutes(60))

    row = UtilizationRollup.objects.get(run=run)
    assert (row.budget, row.owner, row.cluster, row.hour) == (lab.b1, lab.bob, lab.cluster, H)


def test_a_second_collection_of_the_same_moment_charges_nothing(lab, prometheus_lab):
    prometheus_lab(samples("lab-0", 0, [(0, 60, 80)]))
    run = hold(lab, [("lab-0", 0)], end=60)

    collect(lab.cluster, minutes(60))
    collect(lab.cluster, minutes(60))

    assert utilization(run) == (pytest.approx(3600), pytest.approx(2880))


def test_idle_below_threshold_for_the_idle_period_is_flagged_on_the_timeline(lab, prometheus_lab):
    # 50% for 10 min, then 5%: idle since :10, flagged at :40 (30 min, threshold 10%).
    prometheus_lab(samples("lab-0", 3, [(0, 10, 50), (10, 60, 5)]))
    run = hold(lab, [("lab-0", 3)])

    collect(lab.cluster, minutes(45))

    run.refresh_from_db()
    assert (run.idle_since, run.idle_flagged_at) == (minutes(10), minutes(40))
    event = Event.objects.get(run=run, kind=Event.Kind.IDLE)
    assert event.at == minutes(40)
    assert "below 10% busy" in event.reason and "30 min" in event.reason


def test_idle_for_less_than_the_idle_period_is_not_flagged(lab, prometheus_lab):
    prometheus_lab(samples("lab-0", 3, [(0, 10, 50), (10, 60, 5)]))
    run = hold(lab, [("lab-0", 3)])

    collect(lab.cluster, minutes(39))

    run.refresh_from_db()
    assert (run.idle_since, run.idle_flagged_at) == (minutes(10), None)
    assert not Event.objects.filter(run=run, kind=Event.Kind.IDLE).exists()


def test_a_mean_exactly_at_the_threshold_is_not_idle(lab, prometheus_lab):
    # 5% on one GPU and 15% on the other: the run's mean is 10%, not below 10%.
    prometheus_lab(samples("lab-1", 0, [(0, 60, 5)]), samples("lab-1", 1, [(0, 60, 15)]))
    run = hold(lab, [("lab-1", 0), ("lab-1", 1)])

    collect(lab.cluster, minutes(60))

    run.refresh_from_db()
    assert run.idle_since is None and run.idle_flagged_at is None


def test_busy_again_clears_the_flag_but_keeps_the_timeline(lab, prometheus_lab):
    prometheus_lab(samples("lab-0", 3, [(0, 10, 50), (10, 50, 5), (50, 60, 70)]))
    run = hold(lab, [("lab-0", 3)])

    collect(lab.cluster, minutes(60))

    run.refresh_from_db()
    assert (run.idle_since, run.idle_flagged_at) == (None, None)
    assert Event.objects.filter(run=run, kind=Event.Kind.IDLE).count() == 1


def test_the_owner_notification_hook_hears_of_each_flagged_run(lab, prometheus_lab,
                                                             django_capture_on_commit_callbacks):
    prometheus_lab(samples("lab-0", 3, [(0, 60, 2)]))
    run = hold(lab, [("lab-0", 3)])
    heard = []

    def receiver(sender, **kwargs):
        heard.append((kwargs["run_id"], kwargs["owner_id"], kwargs["idle_since"]))

    run_idle.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            collect(lab.cluster, minutes(60))
    finally:
        run_idle.disconnect(receiver)

    assert heard == [(run.pk, lab.alice.pk, H)]


def test_a_bad_query_is_a_clear_telemetry_error(lab, prometheus_lab):
    url = prometheus_lab(samples("lab-0", 0, [(0, 60, 80)]))
    source = PrometheusTelemetry(lab.cluster, url=url)

    with pytest.raises(TelemetryUnavailable, match="parse error"):
        source.query_range("DCGM_FI_DEV_GPU_UTIL{", H.timestamp(), minutes(60).timestamp())


def test_an_unreachable_prometheus_writes_nothing_and_keeps_the_cursor(lab):
    lab.cluster.telemetry = "prometheus"
    lab.cluster.backend_config = {**lab.cluster.backend_config,
                                  "prometheus_url": "http://127.0.0.1:9"}
    lab.cluster.save()
    TelemetryCursor.objects.create(cluster=lab.cluster, until=H)
    hold(lab, [("lab-0", 0)], end=60)

    done = collect(lab.cluster, minutes(60))

    assert "unreachable" in done.error
    assert not UtilizationRollup.objects.exists()
    assert TelemetryCursor.objects.get(cluster=lab.cluster).until == H
