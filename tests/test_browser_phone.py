"""The main pages on a phone: Chromium at 390 px wide (an iPhone 12 to 15), with the demo
institute behind them. No page scrolls sideways (a table wider than the screen scrolls in its
own box), the navigation stays on screen, and nothing goes wrong in the page. Each page's
screenshot is kept in the test's temporary directory, for a human to look at."""

import contextlib

import pytest
from django.contrib.auth.models import User
from fixtures_browser import Watch

from budgets.models import BudgetNode, ChangeRequest
from fleet.models import Host
from portal import demo
from scheduler.models import Workload
from scheduler.permissions import restrict_workloads

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def main_pages(persona: str) -> list[str]:
    """The pages a persona opens most: the navigation's, and one of each main detail page."""
    visible = restrict_workloads(Workload.objects.all(), User.objects.get(username=persona))
    pages = ["/", "/workloads/", f"/workloads/{visible.order_by('-pk')[0].pk}/",
             "/budgets/", f"/budgets/nodes/{BudgetNode.objects.get(parent=None).pk}/",
             "/budgets/requests/", "/budgets/history/", "/reports/", "/reports/dashboards/",
             "/reports/dashboards/h100/", "/hosts/", f"/hosts/{Host.objects.first().pk}/",
             "/notifications/", "/settings/"]
    if persona == "ceo":
        pages.append(f"/budgets/requests/{ChangeRequest.objects.first().pk}/")
    return pages


def phone(browser, live_server, persona):
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.set_default_navigation_timeout(60_000)  # report pages on a busy 2-core machine
    watch = Watch(page)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", persona)
    page.fill("#id_password", demo.DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
    return page, watch


def sideways(page) -> int:
    """How many px the page scrolls sideways."""
    return page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


@pytest.mark.parametrize("persona", ["ceo", "researcher"])
def test_main_pages_fit_a_phone(institute, live_server, browser, tmp_path, persona):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page, watch = phone(browser, live_server, persona)
    too_wide, nav_off_screen = {}, {}
    for path in main_pages(persona):
        page.goto(f"{live_server.url}{path}")
        with contextlib.suppress(PlaywrightTimeout):  # pages that poll are never idle
            page.wait_for_load_state("networkidle", timeout=5_000)
        page.screenshot(path=tmp_path / f"{persona}{path.replace('/', '_')}.png",
                        full_page=True)
        if sideways(page) > 0:
            too_wide[path] = sideways(page)
        outside = page.locator("header nav a").evaluate_all(
            f"links => links.filter(a => a.getBoundingClientRect().right > {PHONE['width']})"
            ".map(a => a.textContent)")
        if outside:
            nav_off_screen[path] = outside
    assert too_wide == {}
    assert nav_off_screen == {}
    assert watch.problems == []


def test_a_wide_table_scrolls_in_its_own_box(institute, live_server, browser):
    page, watch = phone(browser, live_server, "ceo")
    page.goto(f"{live_server.url}/reports/")
    table = page.locator("#review-table")
    box = table.evaluate("t => ({scroll: t.scrollWidth, shown: t.clientWidth})")
    assert box["scroll"] > box["shown"]  # 15 columns do not fit 390 px...
    assert sideways(page) == 0  # ...yet the page itself stays put
    table.evaluate("t => { t.scrollLeft = t.scrollWidth; }")
    assert table.get_by_role("button", name="Utilization %").is_visible()
    assert watch.problems == []
