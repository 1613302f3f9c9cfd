"""A review cycle in a real Chromium: the PI opens the cycle from the navigation, confirms
one project and changes another in place (htmx, no reload), the progress follows; a
second decision on an item someone else decided meanwhile is told plainly."""

from datetime import timedelta

import pytest
from django.utils import timezone
from fixtures_browser import Watch, log_in

from budgets import reviews
from budgets.models import Allocation, ReviewItem

pytestmark = pytest.mark.browser


@pytest.fixture
def cycle(org):
    now = timezone.now()
    return reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=now,
                                  due_at=now + timedelta(days=14))


def test_the_pi_confirms_and_changes_allocations_in_place(org, cycle, live_server, browser,
                                                          password):
    from playwright.sync_api import expect

    page = log_in(browser, live_server, "pi", password, "/")
    watch = Watch(page)
    page.locator("nav").get_by_role("link", name="Reviews").click()
    page.get_by_role("link", name="2027 Q1").click()
    page.get_by_role("link", name="What you decide").click()
    page.evaluate("window.timeshareMarker = 'loaded once'")
    progress = page.locator("#review-progress")
    expect(progress).to_contain_text("0 of 4 allocations decided")

    a1 = page.locator(f"#review-item-{ReviewItem.objects.get(cycle=cycle, node=org.proj_a1).pk}")
    a1.get_by_role("button", name="Confirm").click()
    expect(a1.locator(".state")).to_have_text("confirmed")
    expect(progress).to_contain_text("1 of 4 allocations decided (1 confirmed, 0 changed)")

    a2 = page.locator(f"#review-item-{ReviewItem.objects.get(cycle=cycle, node=org.proj_a2).pk}")
    a2.get_by_label("Shares for Project A2 on h100").fill("20")
    a2.get_by_label("Comment for Project A2").fill("winding down")
    a2.get_by_role("button", name="Change").click()
    expect(a2).to_contain_text("changed to 20")
    expect(a2).to_contain_text("winding down")
    expect(progress).to_contain_text("2 of 4 allocations decided (1 confirmed, 1 changed)")

    assert page.evaluate("window.timeshareMarker") == "loaded once"  # no reload
    assert Allocation.objects.get(node=org.proj_a2, cluster=org.cluster).shares == 20
    assert watch.problems == []


def test_a_decision_taken_meanwhile_is_told_and_kept(org, cycle, live_server, browser,
                                                     password):
    from playwright.sync_api import expect

    page = log_in(browser, live_server, "pi", password, f"/budgets/reviews/{cycle.pk}/")
    watch = Watch(page)
    exp_1 = ReviewItem.objects.get(cycle=cycle, node=org.exp_1)
    reviews.confirm(org.lead, exp_1)  # the lead, in another window
    watch.expected.add((409, f"/budgets/reviews/items/{exp_1.pk}/decide/"))

    page.locator(f"#review-item-{exp_1.pk}").get_by_role("button", name="Change").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "Experiment 1 on h100: org/prog-a/proj-a1/exp-1 on h100 was already confirmed by lead"
    )
    assert Allocation.objects.get(node=org.exp_1, cluster=org.cluster).shares == 100
    assert watch.problems == []
