"""Every page of the demo institute in a real Chromium, for every persona, with no page error.

The institute is the demo's with a day of replayed past (`institute`, tests/fixtures_browser.py),
so that every page has something to show. For each persona the crawl opens
the pages of the navigation, then follows the links it finds to the main detail pages (a budget
node, a request, a workload, a host, a cluster dashboard, a report, a what-if), one page per
kind of address. It fails on any console error, uncaught exception, or failed request: a 5xx,
a 4xx, or no answer.
"""

import contextlib
import re
from urllib.parse import urlsplit

import pytest
from fixtures_browser import Watch, log_in

from portal import demo

pytestmark = pytest.mark.browser

PERSONAS = ("ceo", "pi", "lead", "researcher", "outsider", "operator")
# Not pages: downloads, the admin, the API's machine-readable answers, actions.
SKIPPED = re.compile(r"\.csv$|^/admin/|^/api/(?!tokens/$|docs/$)|^/logout/|/(cancel|withdraw|"
                     r"revoke|drain|return|repair)/$")
# Addresses the crawl must have reached for the personas who may open them.
DETAIL_PAGES = {
    "budget node": r"^/budgets/nodes/N/$",
    "request": r"^/budgets/requests/N/$",
    "workload": r"^/workloads/N/$",
    "host": r"^/hosts/N/$",
    "cluster dashboard": r"^/reports/dashboards/[\w-]+/$",
    "report": r"^/reports/review/[\w-]+/",
    "what-if": r"^/reports/what-ifs/N/$",
}


def kind(path: str) -> str:
    """One page per kind of address: /workloads/12/ and /workloads/13/ are the same kind."""
    return re.sub(r"\d+", "N", path)


def crawl(page, base: str) -> tuple[list[str], set[str]]:
    """Visit the navigation, then every new kind of page linked from what was visited.
    Returns the problems met and the kinds of page visited."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    watch = Watch(page)
    page.goto(f"{base}/")
    queue = [urlsplit(a).path for a in page.locator("header nav a").evaluate_all(
        "links => links.map(a => a.href)")]
    assert queue, "the navigation is empty"
    seen: set[str] = set()
    while queue:
        path = queue.pop(0)
        if kind(path) in seen or SKIPPED.search(path):
            continue
        seen.add(kind(path))
        page.goto(f"{base}{path}")
        # let the page's own requests (htmx loads) answer; Watch judges each of them. A page
        # that polls, on a loaded machine, may never be idle for 500 ms: go on after 5 s.
        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_load_state("networkidle", timeout=5_000)
        hrefs = page.locator("a[href]").evaluate_all("links => links.map(a => a.href)")
        for href in hrefs:
            parts = urlsplit(href)
            if parts.netloc == urlsplit(base).netloc and kind(parts.path) not in seen:
                queue.append(parts.path)
    return watch.problems, seen


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_page_opens_without_an_error(institute, live_server, browser, persona):
    page = log_in(browser, live_server, persona, demo.DEMO_PASSWORD)
    page.set_default_navigation_timeout(60_000)  # report pages on a busy 2-core machine
    problems, seen = crawl(page, live_server.url)
    assert not problems, "\n".join(problems)
    if persona != "outsider":
        reached = {name for name, pattern in DETAIL_PAGES.items()
                   if any(re.search(pattern, k) for k in seen)}
        assert reached == set(DETAIL_PAGES) - NOT_FOR[persona], sorted(seen)


# The detail pages a persona has no way to reach: the demo has no change request a lead or a
# researcher may see, what-ifs are for managers, and the operator holds no budget to report on.
NOT_FOR = {
    "ceo": set(),
    "pi": set(),
    "lead": {"request"},
    "researcher": {"request", "what-if"},
    "operator": {"request", "report", "what-if"},
}
