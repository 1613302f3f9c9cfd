"""The notifications in a real Chromium: the bell shows the unread count, the inbox lists
them, marking one read updates the row and the bell without a reload."""

import pytest
from fixtures_browser import Watch, log_in

from notifications import services
from notifications.kinds import Kind

pytestmark = pytest.mark.browser


def test_the_bell_the_inbox_and_marking_read(org, live_server, browser, password):
    from playwright.sync_api import expect

    for title in ("exp-7 was preempted", "request #3 waits for your decision"):
        services.notify(Kind.WORKLOAD_PREEMPTED, [org.researcher], title=title,
                        link="/workloads/")
    page = log_in(browser, live_server, "researcher", password, "/")
    watch = Watch(page)
    bell = page.locator("#bell")
    expect(bell.get_by_test_id("unread-count")).to_have_text("2")

    bell.click()
    page.wait_for_url(f"{live_server.url}/notifications/")
    page.evaluate("window.timeshareMarker = 'loaded once'")
    row = page.locator("li.notification", has_text="exp-7 was preempted")
    expect(row).to_have_class("notification unread")

    row.get_by_role("button", name="Mark read").click()
    row = page.locator("li.notification", has_text="exp-7 was preempted")
    expect(row).to_have_class("notification read")
    expect(page.locator("#bell").get_by_test_id("unread-count")).to_have_text("1")
    assert page.evaluate("window.timeshareMarker") == "loaded once"  # no reload
    assert services.unread_count(org.researcher) == 1
    assert watch.problems == []
