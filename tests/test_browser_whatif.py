"""The what-if in a real Chromium: a manager finds it in the navigation, asks for a replay
with a changed allocation, watches the progress bar advance by htmx polling (no reload) and
sees the result next to what actually happened (`tiny` in tests/fixtures_reports.py).

The Celery task is run the way tests/test_reports_whatif.py runs it: the view's
``run_what_if.delay`` is intercepted and the test plays the worker, calling the task in its
own thread. Halfway (the replay as is done, the what-if next), the task waits until the page
shows the bar at 50%; then it finishes and the page shows the comparison.
"""

import pytest
from fixtures_browser import Watch, log_in

from reports import tasks, whatif
from reports.models import WhatIf

pytestmark = pytest.mark.browser


@pytest.fixture
def pi_page(browser, live_server, tiny):
    page = log_in(browser, live_server, "pi", "x", "/reports/dashboards/")
    # every console error, uncaught exception or failed request fails the test at its end
    page.watch = Watch(page)
    return page


def test_a_manager_replays_a_changed_allocation_and_watches_it_run(
        pi_page, live_server, tiny, monkeypatch):
    page = pi_page
    sent: list[int] = []
    monkeypatch.setattr(tasks.run_what_if, "delay", sent.append)  # the broker's queue

    page.get_by_role("link", name="What-if").click()  # the navigation entry
    page.wait_for_url(f"{live_server.url}/reports/what-if/")
    page.fill("#id_days", "2")
    page.fill(f"#id_shares_{tiny.a.pk}", "3")
    page.get_by_role("button", name="Run the what-if").click()
    what_if = WhatIf.objects.get()
    page.wait_for_url(f"{live_server.url}/reports/what-ifs/{what_if.pk}/")
    assert sent == [what_if.pk]
    assert what_if.params["shares"] == {"org/prog/a": 3}
    assert page.locator("#what-if-progress").get_attribute("value") == "0"
    assert "Waiting for a worker" in page.locator("#what-if-status").inner_text()
    page.evaluate("window.loadedOnce = true")

    seen = {}
    real_run = whatif.run

    def run_watched(what_if, progress, **kwargs):
        def hook(fraction):
            progress(fraction)
            if fraction >= 0.5 and "halfway" not in seen:
                # the page polls every second: the bar reaches 50% without a reload
                page.locator('#what-if-progress[value="50"]').wait_for()
                seen["halfway"] = page.locator("#what-if-status").inner_text()
        return real_run(what_if, hook, **kwargs)

    monkeypatch.setattr(whatif, "run", run_watched)
    assert tasks.run_what_if(what_if.pk) == "done"
    assert "Replaying" in seen["halfway"] and "50%" in seen["halfway"]

    table = page.locator("#what-if-budgets")
    table.wait_for()
    assert page.evaluate("window.loadedOnce") is True  # swapped in place, never reloaded
    assert page.locator("#what-if-progress").count() == 0  # polling stopped
    rows = {
        cells[0]: cells[1:]
        for cells in table.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")
    }
    assert "org/other" not in rows  # outside the PI's subtree
    # % of cluster today / what-if; entitlement actually / as is / what-if; delivered the same
    assert rows["org/prog/a"] == ["25", "38", "48.0", "48.0", "72.0", "8.0", "8.0", "8.0"]
    assert rows["org/prog/b"][:2] == ["25", "12"]
    assert rows["org/prog/b"][2:5] == ["48.0", "48.0", "24.0"]
    summary = page.locator("#what-if-summary tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))")
    assert summary[0] == ["", "Actually", "Replayed as is", "What-if"]
    assert summary[1] == ["Median wait (min)", "45", "45", "45"]  # W1 0 and W2 90 min
    # the parameters in the form's units, and what the replay assumes
    parameters = page.locator("#what-if-parameters tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))")
    assert parameters == [["Window (days)", "7", "7"], ["Maximum min_runtime (hours)", "8", "8"],
                          ["Hysteresis", "0.1", "0.1"]]
    assumptions = page.locator("#what-if-assumptions").inner_text()
    assert "as it really was at the start" in assumptions
    assert "whole clock hours up to the last full one" in assumptions
    assert page.watch.problems == []
