"""The workload list in a real Chromium: typing a search, choosing a class and clicking a
column header swap the table in place (htmx), keep each other, and put the query in the
address; times show in the browser's zone, labelled. Every test fails on any page error.
Workloads: tests/fixtures_scheduler.py (run, wait, a2, b, done; hosts of 5 GPUs)."""

from zoneinfo import ZoneInfo

import pytest
from fixtures_browser import Watch

from scheduler.models import Workload

pytestmark = pytest.mark.browser


@pytest.fixture
def workloads_page(browser, live_server, fleet, password):
    """The ceo on /workloads/, in a browser set to Tokyo time."""
    context = browser.new_context(timezone_id="Asia/Tokyo")
    page = context.new_page()
    page.set_default_timeout(15_000)
    watch = Watch(page)
    page.goto(f"{live_server.url}/login/?next=/workloads/")
    page.fill("#id_username", "ceo")
    page.fill("#id_password", password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/workloads/")
    yield page
    assert watch.problems == []


def names(page) -> list[str]:
    return page.locator("#workloads tbody tr td:nth-child(2)").all_inner_texts()


def test_typing_a_search_narrows_the_table_in_place(workloads_page):
    page = workloads_page
    page.evaluate("window.notReloaded = true")
    page.get_by_placeholder("name, owner or budget").fill("lead")
    page.wait_for_url("**/workloads/?**q=lead**")
    page.locator("#workloads p.count", has_text="2 workloads").wait_for()
    assert sorted(names(page)) == ["a2", "wait"]
    assert page.evaluate("window.notReloaded") is True


def test_a_column_header_sorts_and_a_filter_keeps_the_sort(workloads_page):
    page = workloads_page
    page.get_by_role("link", name="GPUs").click()
    page.wait_for_url("**sort=gpus**")
    page.locator("th[aria-sort=ascending]", has_text="GPUs").wait_for()
    assert names(page)[-1] == "wait"  # 4 GPUs, the most
    page.get_by_label("State").select_option("PENDING")
    page.wait_for_url("**state=PENDING**")
    page.locator("#workloads p.count", has_text="3 workloads").wait_for()
    assert names(page) == ["b", "a2", "wait"]  # 1, 1 (newest first), then 4 GPUs
    assert "sort=gpus" in page.url


def test_the_class_filter(workloads_page, fleet):
    page = workloads_page
    page.get_by_label("Class").select_option("unallocated")
    page.locator("#workloads p.count", has_text="1 workload").wait_for()
    assert names(page) == ["a2"]


def test_numbered_pages(workloads_page, fleet, live_server):
    template = fleet.wait
    Workload.objects.bulk_create([
        Workload(name=f"bulk-{i:03}", owner=template.owner, budget=template.budget,
                 cluster=template.cluster, gpus=1, min_runtime=0, command="x")
        for i in range(120)
    ])
    page = workloads_page
    page.goto(f"{live_server.url}/workloads/")
    assert page.locator("#workloads p.count").inner_text() == "125 workloads, 1–50 shown"
    page.get_by_role("navigation", name="pages").get_by_role("link", name="3").click()
    page.wait_for_url("**page=3**")
    assert page.locator("#workloads p.count").inner_text() == "125 workloads, 101–125 shown"
    assert page.locator("[aria-current=page]").inner_text() == "3"


def test_times_are_in_the_browser_zone(workloads_page, fleet):
    row = workloads_page.locator(f"#workload-{fleet.run_w.pk}")
    tokyo = fleet.run_w.submitted.astimezone(ZoneInfo("Asia/Tokyo"))
    assert row.locator("time").inner_text() == f"{tokyo:%Y-%m-%d %H:%M} JST"
    assert row.locator(".ago").inner_text() == "· 3 h ago"
