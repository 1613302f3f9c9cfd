"""The budget review table in a real Chromium, as a review meeting uses it: it fits a 1400 px
window and an A4 landscape page, names the budgets (the path on hover), folds subtrees and
sorts the budgets under each parent by a column. Every test fails on any page error.
The history: tests/fixtures_reports.py (org > prog-a > proj-a1, proj-a2; org > prog-b >
proj-b1), the week of 3 March 2025."""

import pytest
from fixtures_browser import Watch

pytestmark = pytest.mark.browser

WEEK = "?period=week&date=2025-03-05"
# A4 landscape is 297 mm wide; less the print CSS's 12 mm margins, 273 mm at 96 px per inch.
A4_LANDSCAPE_PX = round((297 - 2 * 12) / 25.4 * 96)


@pytest.fixture
def report(browser, live_server, history):
    """The ceo's review of h100 for the week, in a 1400 px window, watched for errors."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    watch = Watch(page)
    page.goto(f"{live_server.url}/login/?next=/reports/")
    page.fill("#id_username", "ceo")
    page.fill("#id_password", "x")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/reports/**")
    page.goto(f"{live_server.url}/reports/review/h100/{WEEK}")
    yield page
    assert watch.problems == []


def overflow(page) -> dict:
    """How far the review table reaches beyond its card, and the page beyond the window, in
    px."""
    return page.evaluate("""() => {
        const table = document.querySelector('#review-table');
        const card = table.closest('.card');
        const style = getComputedStyle(card);
        const inside = card.getBoundingClientRect().right - parseFloat(style.paddingRight)
            - parseFloat(style.borderRightWidth);
        const root = document.documentElement;
        return {
            table: Math.max(0, Math.round(table.getBoundingClientRect().right - inside)),
            page: root.scrollWidth - root.clientWidth,
        };
    }""")


def shown_budgets(page) -> list[str]:
    return page.locator("#review-table tbody tr:visible td.budget").all_inner_texts()


def test_the_table_fits_a_1400_px_window(report):
    assert overflow(report) == {"table": 0, "page": 0}


def test_the_table_fits_an_a4_landscape_page(report):
    report.set_viewport_size({"width": A4_LANDSCAPE_PX, "height": 800})
    report.emulate_media(media="print")
    assert overflow(report) == {"table": 0, "page": 0}
    assert not report.get_by_role("button", name="Print").is_visible()


def test_budgets_are_named_with_their_path_on_hover(report):
    cells = report.locator("#review-table td.budget")
    assert [name.strip() for name in cells.all_inner_texts()] == [
        "Org", "Prog A", "Proj A1", "Proj A2", "Prog B", "Proj B1"]
    assert cells.nth(2).get_attribute("title") == "org/prog-a/proj-a1"


def test_folding_a_program_hides_its_projects(report):
    report.get_by_role("button", name="Fold Prog A", exact=True).click()
    assert [b.strip() for b in shown_budgets(report)] == ["Org", "Prog A", "Prog B", "Proj B1"]
    report.get_by_role("button", name="Unfold Prog A").click()
    assert len(shown_budgets(report)) == 6


def test_fold_all_keeps_the_first_level(report):
    report.get_by_role("button", name="Fold all", exact=True).click()
    assert [b.strip() for b in shown_budgets(report)] == ["Org", "Prog A", "Prog B"]
    report.get_by_role("button", name="Unfold all").click()
    assert len(shown_budgets(report)) == 6


def rows(page) -> list[tuple[str, float]]:
    """(path, entitlement GPU-h) of each row, in the order shown."""
    table = page.locator("#review-table")
    column = table.locator("th").all_inner_texts().index("Entitlement GPU-h")
    return [
        (row.locator("td.budget").get_attribute("title"),
         float(row.locator("td").nth(column).inner_text()))
        for row in table.locator("tbody tr").all()
    ]


def test_sorting_orders_siblings_and_keeps_the_tree(report):
    before = rows(report)
    header = report.locator("#review-table th", has_text="Entitlement GPU-h")
    for direction in ("ascending", "descending"):
        header.get_by_role("button").click()
        assert header.get_attribute("aria-sort") == direction
        shown = rows(report)
        assert sorted(shown) == sorted(before)  # the same rows, reordered
        paths = [path for path, _ in shown]
        for index, (path, _) in enumerate(shown):
            parent = path.rpartition("/")[0]
            if parent:  # a subtree follows its parent: the rows between are its own
                between = paths[paths.index(parent) + 1:index]
                assert all(p.startswith(parent + "/") for p in between)
        for parent in {path.rpartition("/")[0] for path, _ in shown}:
            siblings = [value for path, value in shown if path.rpartition("/")[0] == parent]
            assert siblings == sorted(siblings, reverse=direction == "descending")
