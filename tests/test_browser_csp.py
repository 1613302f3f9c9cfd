"""The Content-Security-Policy leaves every page working in a real Chromium: htmx, plotly's
charts, the workload cancel confirmation and the API docs run with no policy violation and
no console error."""

import pytest

pytestmark = pytest.mark.browser

PAGES = [
    "/reports/dashboards/",
    "/reports/dashboards/h100/?range=week",
    "/reports/review/h100/",
    "/budgets/",
    "/workloads/",
    "/workloads/new/",
    "/api/docs/",
]


@pytest.fixture
def ceo_page(browser, live_server, recent):
    page = browser.new_context().new_page()
    page.set_default_timeout(60_000)  # plotly.js is large; the machine may be busy
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "ceo")
    page.fill("#id_password", "x")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
    page.problems = problems
    return page


@pytest.mark.parametrize("url", PAGES)
def test_page_runs_under_the_policy(ceo_page, live_server, url):
    ceo_page.goto(live_server.url + url)
    ceo_page.wait_for_load_state("networkidle")
    assert ceo_page.problems == []


def test_charts_draw_under_the_policy(ceo_page, live_server):
    ceo_page.goto(f"{live_server.url}/reports/dashboards/h100/?range=week")
    ceo_page.locator('div[data-drawn="1"] svg.main-svg').first.wait_for()
    assert ceo_page.problems == []


def test_api_docs_draw_under_the_policy(ceo_page, live_server):
    ceo_page.goto(f"{live_server.url}/api/docs/")
    ceo_page.locator(".swagger-ui .opblock").first.wait_for()
    assert ceo_page.problems == []
