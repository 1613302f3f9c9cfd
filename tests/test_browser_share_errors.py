"""A refused share edit says why in a real Chromium, in the row being edited, without a page
error: a value beyond the maximum, and an edit that lost the race to another manager's."""

import pytest
from fixtures_browser import Watch, log_in

from budgets.models import MAX_SHARES

pytestmark = pytest.mark.browser

TREE = "/budgets/clusters/h100/"


def open_editor(page, node):
    row = page.locator(f"#node-{node.pk}")
    row.get_by_role("link", name="Edit shares").click()
    row.locator("input[name=shares]").wait_for()
    return row


def test_a_huge_share_value_shows_its_message_and_saves_nothing(org, live_server, browser,
                                                                password, shares_of):
    from playwright.sync_api import expect

    page = log_in(browser, live_server, "pi", password, TREE)
    watch = Watch(page)
    watch.expected.add((422, TREE))
    row = open_editor(page, org.proj_a1)
    row.locator("input[name=shares]").fill("1000000000000")
    row.get_by_role("button", name="Save").click()
    expect(row.get_by_role("alert")).to_contain_text(
        f"less than or equal to {MAX_SHARES}")
    expect(row.locator("input[name=shares]")).to_have_value("1000000000000")
    assert shares_of(org.proj_a1) == 50
    assert watch.problems == []


def test_the_manager_who_saves_second_sees_the_conflict(org, live_server, browser, password,
                                                        shares_of):
    from playwright.sync_api import expect

    pi = log_in(browser, live_server, "pi", password, TREE)
    ceo = log_in(browser, live_server, "ceo", password, TREE)
    watch = Watch(ceo)
    watch.expected.add((422, TREE))
    pi_row, ceo_row = open_editor(pi, org.proj_a1), open_editor(ceo, org.proj_a1)

    pi_row.locator("input[name=shares]").fill("80")
    pi_row.get_by_role("button", name="Save").click()
    expect(pi_row.locator(".shares")).to_have_text("80")

    ceo_row.locator("input[name=shares]").fill("60")
    ceo_row.get_by_role("button", name="Save").click()
    expect(ceo_row.get_by_role("alert")).to_have_text(
        "Project A1 was changed to 80 shares since you loaded the page; reload and try again.")
    assert shares_of(org.proj_a1) == 80
    assert watch.problems == []


def test_a_refused_save_says_why_instead_of_doing_nothing(org, live_server, browser, password,
                                                          shares_of):
    """The PI loses her role while the editor is open: the 403 is not swapped into the table,
    its reason is shown above it."""
    from playwright.sync_api import expect

    page = log_in(browser, live_server, "pi", password, TREE)
    watch = Watch(page)
    watch.expected.add((403, TREE))
    row = open_editor(page, org.proj_a1)
    org.prog_a.managers.remove(org.pi)
    row.locator("input[name=shares]").fill("80")
    row.get_by_role("button", name="Save").click()
    expect(page.locator("#htmx-messages")).to_have_text(
        "Not done: You have no role in this organisation's budgets.")
    expect(row.locator("input[name=shares]")).to_have_value("80")  # the form is left as it was
    assert shares_of(org.proj_a1) == 50
    assert watch.problems == []
