"""The reports in a real Chromium: the plotly charts draw with data, the range selector swaps
them without a reload, and the review table's CSV downloads and parses."""

import csv
import io
from pathlib import Path

import pytest

WEEK = "?period=week&date=2025-03-05"

pytestmark = pytest.mark.browser


@pytest.fixture
def ceo_page(browser, live_server, recent):
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/login/?next=/reports/dashboards/")
    page.fill("#id_username", "ceo")
    page.fill("#id_password", "x")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/reports/dashboards/")
    return page


def drawn(page, figure_id: str) -> dict:
    """What plotly drew in the chart of `figure_id`: traces in the SVG and the data it holds."""
    chart = page.locator(f'div[data-figure="{figure_id}"][data-drawn="1"]')
    chart.locator("svg.main-svg").first.wait_for()
    return chart.evaluate(
        """div => ({
            svgTraces: div.querySelectorAll('g.trace').length,
            names: div.data.map(t => t.name),
            points: div.data.map(t => (t.y || []).length),
            y: div.data.map(t => t.y),
        })"""
    )


def test_charts_draw_and_the_range_selector_swaps_them_in_place(ceo_page, live_server):
    page = ceo_page
    trend = drawn(page, "trend-h100")
    assert trend["svgTraces"] >= 4
    assert trend["names"] == ["Availability", "Occupancy: allocated", "Occupancy: unallocated",
                              "Impact"]
    assert trend["points"] == [14] * 4
    assert trend["y"][0][-1] == pytest.approx(50)  # today: one of two hosts down

    page.goto(f"{live_server.url}/reports/dashboards/h100/?range=week")
    week = drawn(page, "fig-occupancy")
    assert week["names"] == ["Allocated", "Unallocated", "Idle", "Unavailable"]
    assert week["svgTraces"] >= 4 and week["points"][0] in (7, 8)
    assert drawn(page, "fig-budgets")["svgTraces"] >= 4
    page.evaluate("window.rangeMarker = 'loaded once'")

    with page.expect_response(lambda r: "range=day" in r.url and r.status == 200):
        page.get_by_label("Last day").check()
    page.wait_for_function(
        """() => {
            const div = document.querySelector('div[data-figure="fig-occupancy"]');
            return div && div.data && div.data[0].y.length === 24;
        }"""
    )
    day = drawn(page, "fig-occupancy")
    assert day["y"][0] == [3] * 24  # allocated GPUs, hour by hour
    assert day["y"][3] == [5] * 24  # unavailable: one host of 5 GPUs down
    assert page.evaluate("window.rangeMarker") == "loaded once"  # no reload
    assert "range=day" in page.url  # the address follows, for a bookmark or a reload
    assert drawn(page, "fig-waits")["svgTraces"] >= 2
    assert drawn(page, "fig-ratio-waits")["svgTraces"] >= 2
    states = drawn(page, "fig-host-states")
    assert states["names"][0] == "Available" and states["points"][0] == 24


def test_csv_download_parses_to_the_table(ceo_page, live_server):
    page = ceo_page
    page.goto(f"{live_server.url}/reports/review/h100/{WEEK}")
    shown = page.locator("#review-table tbody tr").count()
    with page.expect_download() as info:
        page.get_by_role("link", name="CSV").click()
    download = info.value
    assert download.suggested_filename == "timeshare-h100-2025-03-03-to-2025-03-09.csv"
    rows = list(csv.reader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    header, *body = rows
    assert len(body) == shown == 6
    root = dict(zip(header, body[0], strict=True))
    assert root["Budget"] == "org"
    assert root["Entitlement GPU-h"] == "1560.0"
    assert root["Delivered GPU-h"] == "39.0"
