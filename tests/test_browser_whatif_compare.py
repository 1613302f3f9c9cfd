"""The what-if comparison in a real Chromium: a manager opens it from the what-if page, fills
three parameter sets, watches a progress bar per set advance by htmx polling (no reload) and
sees one table of the sets next to what actually happened (`tiny` in tests/fixtures_reports.py:
W2 waits 90 min for W1, so the median wait is 45 min in every line).

The view's ``queue_comparison`` (the Celery group) is intercepted and the test plays the
workers, replaying set after set in its own thread while the page polls.
"""

import pytest
from fixtures_browser import Watch, log_in

from reports import tasks
from reports.models import WhatIf

pytestmark = pytest.mark.browser


@pytest.fixture
def pi_page(browser, live_server, tiny):
    page = log_in(browser, live_server, "pi", "x", "/reports/what-if/")
    # every console error, uncaught exception or failed request fails the test at its end
    page.watch = Watch(page)
    return page


def cells(locator):
    return locator.evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))")


def test_a_manager_compares_three_parameter_sets_and_sees_one_table(
        pi_page, live_server, tiny, monkeypatch):
    page = pi_page
    queued: list[list[int]] = []
    monkeypatch.setattr(tasks, "queue_comparison", queued.append)  # the broker's queue

    page.get_by_role("link", name="Compare two or three parameter sets").click()
    page.wait_for_url(f"{live_server.url}/reports/what-if/tiny/compare/")
    page.fill("#id_days", "2")
    page.fill("#id_set-1-hysteresis", "0.5")
    page.fill("#id_set-2-grace_minutes", "1")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url(f"{live_server.url}/reports/what-if-comparisons/*/")
    sets = list(WhatIf.objects.order_by("pk"))
    assert queued == [[one.pk for one in sets]]  # one group of three tasks
    for number in (1, 2, 3):
        assert page.locator(f"#set-{number}-progress").get_attribute("value") == "0"
    assert page.locator("#comparison-status").inner_text().count("Waiting for a worker") == 3
    page.evaluate("window.loadedOnce = true")

    assert tasks.run_what_if(sets[0].pk) == "done"
    # the first set is replayed, the others still wait: the page says so without a reload
    page.locator("#set-1", has_text="the figures come when every set is").wait_for()
    assert page.locator("#set-2-progress").count() == 1
    for one in sets[1:]:
        assert tasks.run_what_if(one.pk) == "done"

    table = page.locator("#comparison-table")
    page.locator("#as-is").wait_for()
    assert page.evaluate("window.loadedOnce") is True  # swapped in place, never reloaded
    assert page.locator("progress").count() == 0  # polling stopped
    rows = {row[0]: row[1:] for row in cells(table.locator("tbody tr"))}
    # window (days), max. min_runtime (h), grace (min), hysteresis, then the median wait
    assert rows["Replayed as is"][:5] == ["7", "8", "5", "0.1", "45"]
    assert rows["Set 1"][:5] == ["7", "8", "5", "0.1", "45"]
    assert rows["Set 2"][:5] == ["7", "8", "5", "0.5", "45"]
    assert rows["Set 3"][:5] == ["7", "8", "1", "0.1", "45"]
    assert rows["Actually"][4] == "45"
    budgets = {row[0]: row[1:] for row in cells(page.locator("#comparison-budgets tbody tr"))}
    assert "org/other" not in budgets  # outside the PI's subtree
    assert budgets["org/prog/a"] == ["8.0"] * 5  # actually, as is and each set: W1's 8 GPU-h
    assert page.watch.problems == []
