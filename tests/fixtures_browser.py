"""Debian's Chromium driven by Playwright, for the tests marked `browser`.

`browser`: one Chromium for the test (skipped without /usr/bin/chromium, a failure in CI).
`log_in(browser, live_server, username, password, next_url)`: a fresh context logged in
through the login form, on `next_url`.
`institute`: the demo institute (portal/demo.py) with a day of replayed past, so that every
page has something to show: workloads with runs and preemptions, hosts with repairs, change
requests, rollups for the reports, and a finished what-if for each manager.
`Watch(page)`: what went wrong in a page while the test drove it: console errors, uncaught
exceptions, and requests that failed (a 5xx, a 4xx nobody expected, no answer at all).
"""

from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.utils import timezone

from fleet.models import Cluster
from portal import demo
from reports import tasks
from reports.models import WhatIf

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser(monkeypatch, settings):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test body
    # are still plain synchronous calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.SESSION_COOKIE_SECURE = False  # the live server speaks plain http
    settings.CSRF_COOKIE_SECURE = False
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
            # ORM calls made while Playwright's loop runs get their own connection (another
            # context); close it, or PostgreSQL refuses to drop the test database at the end.
            connections.close_all()


def log_in(browser, live_server, username, password, next_url="/"):
    page = browser.new_context().new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}{next_url}")
    return page


class Watch:
    """Collects, from the moment it is made, every problem a user could meet in ``page``.

    ``expected`` holds the (status, path) pairs the test provokes on purpose (a form answering
    422); any other 4xx is a problem, as is every 5xx."""

    def __init__(self, page):
        self.page = page
        self.problems: list[str] = []
        self.expected: set[tuple[int, str]] = set()
        page.on("console", self._console)
        page.on("pageerror", lambda error: self._add(f"uncaught {error}"))
        page.on("response", self._response)
        page.on("requestfailed", self._failed)

    def _add(self, problem: str) -> None:
        self.problems.append(f"{problem} (on {self.page.url})")

    def _console(self, message) -> None:
        # Chromium also logs every 4xx/5xx answer as "Failed to load resource": those are
        # judged by their status in _response, expected ones included.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self._add(f"console error: {message.text}")

    def _response(self, response) -> None:
        from urllib.parse import urlsplit

        status, path = response.status, urlsplit(response.url).path
        if status >= 500 or (status >= 400 and (status, path) not in self.expected):
            self._add(f"{status} from {response.request.method} {response.url}")

    def _failed(self, request) -> None:
        failure = request.failure or ""
        if "ERR_ABORTED" not in failure:  # a navigation that replaced a pending request
            self._add(f"no answer to {request.method} {request.url}: {failure}")


@pytest.fixture
def institute(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    now = timezone.now()
    since = now - timedelta(days=1)
    demo.seed(since=since, now=now)
    demo.seed_history(since, now)
    h100 = Cluster.objects.get(name="h100")
    for manager in User.objects.filter(username__in=["ceo", "pi", "lead"]):
        what_if = WhatIf.objects.create(cluster=h100, requested_by=manager,
                                        params={"days": 1, "shares": {}})
        assert tasks.run_what_if(what_if.pk) == "done"
