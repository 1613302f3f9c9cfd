"""The workload page's utilization sparkline in a real Chromium: plotly.js from static/ draws
the figure the page built in Python, one point per clock hour."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Run, UtilizationRollup

pytestmark = pytest.mark.browser


def test_the_sparkline_draws_each_hour_s_busy_percent(browser, live_server, recent):
    run = Run.objects.select_related("workload").get(workload__name="recent")
    w = run.workload
    base = timezone.now().replace(minute=0, second=0, microsecond=0)
    for hours_ago, busy in [(2, 0.9), (1, 0.05)]:
        UtilizationRollup.objects.create(
            run=run, cluster=w.cluster, budget=w.budget, owner=w.owner, allocated=True,
            hour=base - timedelta(hours=hours_ago), gpu_seconds=7200, busy_gpu_seconds=7200 * busy,
        )
    page = browser.new_context().new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/login/?next=/workloads/{w.pk}/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", "x")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/workloads/{w.pk}/")

    chart = page.locator('div[data-figure="fig-utilization"][data-drawn="1"]')
    chart.locator("svg.main-svg").first.wait_for()
    y = chart.evaluate("div => div.data[0].y")

    assert y == [90.0, 5.0]
