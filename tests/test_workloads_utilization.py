"""The workload page's utilization: overall busy fraction, a busy column per run and an
hourly sparkline (plotly figure data), from the utilization rollups; and the idle flag."""

import json
import re
from datetime import timedelta

import plotly.graph_objects as go
import pytest
from django.urls import reverse
from django.utils import timezone
from fixtures_scheduler import T0

from scheduler.models import Event, UtilizationRollup


def url(workload):
    return reverse("scheduler:workload", kwargs={"pk": workload.pk})


@pytest.fixture
def busy_run(fleet):
    """The running workload's run: 90% busy in its first hour, 5% in the next two."""
    run, w = fleet.run, fleet.run_w
    hour = T0.replace(minute=0)
    for k, (measured, busy) in enumerate([(7200, 6480), (7200, 360), (7200, 360)]):
        UtilizationRollup.objects.create(
            run=run, cluster=w.cluster, budget=w.budget, owner=w.owner, allocated=run.allocated,
            hour=hour + timedelta(hours=k), gpu_seconds=measured, busy_gpu_seconds=busy,
        )
    return fleet


def figure(body):
    match = re.search(r'<script id="fig-utilization" type="application/json">(.*?)</script>',
                      body, re.S)
    assert match, "no utilization sparkline"
    return json.loads(match.group(1))


def test_overall_busy_is_busy_over_measured_of_all_hours(busy_run, client_for):
    # (6480 + 360 + 360) / 21600 = 33%
    response = client_for("researcher").get(url(busy_run.run_w))
    assert response.context["utilization"]["busy"] == pytest.approx(1 / 3)
    assert "33% busy" in response.content.decode()


def test_sparkline_has_one_point_per_hour_in_percent(busy_run, client_for):
    body = client_for("researcher").get(url(busy_run.run_w)).content.decode()
    spark = figure(body)
    go.Figure(spark)  # a valid plotly figure
    assert spark["data"][0]["y"] == [90.0, 5.0, 5.0]
    assert spark["layout"]["shapes"][0]["y0"] == pytest.approx(10)  # the idle threshold


def test_each_run_shows_its_busy_percent(busy_run, client_for):
    response = client_for("researcher").get(url(busy_run.run_w))
    assert [run.busy for run in response.context["runs"]] == [pytest.approx(1 / 3)]


def test_a_run_flagged_idle_says_so_on_the_page_and_its_timeline(busy_run, client_for):
    run = busy_run.run
    run.idle_flagged_at = timezone.now()
    run.save()
    Event.objects.create(workload=busy_run.run_w, run=run, kind=Event.Kind.IDLE,
                         reason="GPUs idle: below 10% busy since ...")
    body = client_for("researcher").get(url(busy_run.run_w)).content.decode()
    assert "state-idle" in body
    assert "GPUs idle" in body


def test_no_telemetry_no_sparkline(fleet, client_for):
    response = client_for("researcher").get(url(fleet.run_w))
    assert response.context["utilization"] is None
    assert "fig-utilization" not in response.content.decode()


def test_the_peak_memory_used_on_one_gpu_is_shown_where_known(busy_run, client_for):
    # 40 GiB in the first hour, 60 GiB in the second, unknown in the third: the peak is 60
    first, second, _ = UtilizationRollup.objects.filter(run=busy_run.run).order_by("hour")
    for rollup, mib in [(first, 40 * 1024), (second, 60 * 1024)]:
        rollup.memory_mib_max = mib
        rollup.save()
    response = client_for("researcher").get(url(busy_run.run_w))
    assert response.context["utilization"]["memory_gib"] == pytest.approx(60.0)
    assert [run.memory_gib for run in response.context["runs"]] == [pytest.approx(60.0)]
    assert '<span id="memory-used">60.0 GiB</span>' in response.content.decode()


def test_without_memory_telemetry_no_memory_is_shown(busy_run, client_for):
    response = client_for("researcher").get(url(busy_run.run_w))
    assert response.context["utilization"]["memory_gib"] is None
    assert "memory-used" not in response.content.decode()
