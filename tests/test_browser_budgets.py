"""The budget flows in a real Chromium: a PI edits a project's shares inline (no reload), the
CEO approves a program's change request and the tree shows it."""

import pytest
from fixtures_browser import log_in

from budgets import services
from budgets.models import Allocation, ChangeRequest

pytestmark = pytest.mark.browser


def test_pi_edits_inline_then_ceo_approves_a_program_request(org, live_server, browser,
                                                            password):
    from playwright.sync_api import expect

    program_request = services.request_change(
        org.pi, org.prog_a, org.cluster, shares=90, reason="bigger models"
    )
    tree = f"/budgets/clusters/{org.cluster.name}/"

    # The PI gives Project A1 150 shares next to A2's 50, without leaving the page.
    page = log_in(browser, live_server, "pi", password, tree)
    page.evaluate("window.timeshareMarker = 'loaded once'")
    a1, a2 = page.locator(f"#node-{org.proj_a1.pk}"), page.locator(f"#node-{org.proj_a2.pk}")
    expect(a1.locator(".pct-cluster")).to_have_text("35.0%")
    a1.get_by_role("link", name="Edit shares").click()
    a1.locator("input[name=shares]").fill("150")
    a1.locator("input[name=reason]").fill("new hires")
    a1.get_by_role("button", name="Save").click()
    # 150 of 200 = 75% of Program A; 0.7 x 0.75 = 52.5% of the cluster; A2 0.7 x 0.25 = 17.5%.
    expect(a1.locator(".shares")).to_have_text("150")
    expect(a1.locator(".pct-parent")).to_have_text("75.0%")
    expect(a1.locator(".pct-cluster")).to_have_text("52.5%")
    expect(a2.locator(".pct-cluster")).to_have_text("17.5%")
    assert page.evaluate("window.timeshareMarker") == "loaded once"  # no reload happened
    assert Allocation.objects.get(node=org.proj_a1, cluster=org.cluster).shares == 150

    # The CEO approves Program A's request for 90 shares from the queue.
    page = log_in(browser, live_server, "ceo", password, "/budgets/requests/")
    page.locator(f"#request-{program_request.pk}").get_by_role("link", name="Decide").click()
    page.select_option("select[name=decision]", "approve")
    page.fill("textarea[name=comment]", "granted")
    page.get_by_role("button", name="Record decision").click()
    page.wait_for_url(f"{live_server.url}/budgets/requests/")
    program_request.refresh_from_db()
    assert program_request.state == ChangeRequest.State.APPROVED

    page.goto(f"{live_server.url}{tree}")
    prog_a, prog_b = page.locator(f"#node-{org.prog_a.pk}"), page.locator(f"#node-{org.prog_b.pk}")
    # 90 of 120 = 75%; Program B 30 of 120 = 25%.
    expect(prog_a.locator(".shares")).to_have_text("90")
    expect(prog_a.locator(".pct-cluster")).to_have_text("75.0%")
    expect(prog_b.locator(".pct-cluster")).to_have_text("25.0%")
