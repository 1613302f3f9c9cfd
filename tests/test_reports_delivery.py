"""The weekly review report by mail, against the hand-built week of tests/fixtures_reports.py
(Mon 3 March 2025): sent on Monday 10 March to every subscribed manager and reviewer for
their subtree, HTML with the CSV attached, a link to the page and an unsubscribe link; never
twice. ``auditor`` reviews prog-b (reads its reports, changes nothing)."""

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail
from django.urls import reverse

from reports.delivery import last_week, send_review_reports
from reports.models import ReportDelivery, ReportSubscription

MONDAY = datetime(2025, 3, 10, 7, tzinfo=UTC)


@pytest.fixture
def managers(history):
    for name in ("ceo", "pi", "lead", "researcher", "outsider"):
        user = history.users[name]
        user.email = f"{name}@example.org"
        user.save()
    history.users["auditor"] = User.objects.create_user(
        "auditor", password="x", email="auditor@example.org")
    history.prog_b.reviewers.add(history.users["auditor"])
    return history


def mail_to(name):
    return next(m for m in mail.outbox if m.to == [f"{name}@example.org"])


def test_last_week_is_the_calendar_week_before(db):
    week = (datetime(2025, 3, 3, tzinfo=UTC), datetime(2025, 3, 10, tzinfo=UTC))
    assert last_week(MONDAY) == week
    assert last_week(datetime(2025, 3, 16, 23, tzinfo=UTC))[0] == datetime(2025, 3, 3, tzinfo=UTC)


def test_every_manager_and_reviewer_and_nobody_else_receives_it(managers):
    assert send_review_reports(MONDAY) == 4
    assert sorted(m.to[0] for m in mail.outbox) == [
        "auditor@example.org", "ceo@example.org", "lead@example.org", "pi@example.org"]


def test_a_reviewer_receives_the_page_s_csv_of_the_subtree_they_review(managers):
    send_review_reports(MONDAY)
    message = mail_to("auditor")
    [(name, content, _)] = message.attachments
    page = managers.client_for("auditor").get(
        reverse("reports:node_review_csv", args=["h100", managers.prog_b.pk])
        + "?period=week&date=2025-03-03").content.decode()
    assert content.splitlines() == page.splitlines()
    assert "org/prog-b/proj-b1" in content and "org/prog-a" not in content
    html, _ = message.alternatives[0]
    assert reverse("reports:node_review", args=["h100", managers.prog_b.pk]) in html


def test_the_csv_attached_is_the_page_s_csv_of_their_subtree(managers):
    send_review_reports(MONDAY)
    [(name, content, mimetype)] = mail_to("pi").attachments
    page = managers.client_for("pi").get(
        reverse("reports:node_review_csv", args=["h100", managers.prog_a.pk])
        + "?period=week&date=2025-03-03").content.decode()
    assert (name, mimetype) == ("timeshare-h100-2025-03-03-to-2025-03-09.csv", "text/csv")
    assert content.splitlines() == page.splitlines()
    assert "org/prog-b" not in content


def test_the_html_links_to_the_page_and_to_the_preferences(managers):
    send_review_reports(MONDAY)
    html, kind = mail_to("lead").alternatives[0]
    page = (settings.TIMESHARE_BASE_URL
            + reverse("reports:node_review", args=["h100", managers.proj_a1.pk])
            + "?period=week&amp;date=2025-03-03")
    assert kind == "text/html"
    assert page in html
    assert settings.TIMESHARE_BASE_URL + reverse("reports:preferences") in html
    assert "researcher" in html  # the top user of proj-a1


def test_an_unsubscribed_manager_receives_nothing(managers):
    ReportSubscription.objects.create(user=managers.users["pi"], weekly_review=False)
    send_review_reports(MONDAY)
    assert "pi@example.org" not in [m.to[0] for m in mail.outbox]


def test_a_second_run_the_same_week_sends_nothing_more(managers):
    send_review_reports(MONDAY)
    assert send_review_reports(MONDAY) == 0
    assert len(mail.outbox) == 4
    assert ReportDelivery.objects.count() == 4


def test_the_preferences_page_unsubscribes(managers):
    client = managers.client_for("pi")
    assert client.post(reverse("reports:preferences"), {}).status_code == 302
    assert ReportSubscription.objects.get(user=managers.users["pi"]).weekly_review is False
    body = client.get(reverse("reports:preferences")).content.decode()
    assert 'id="weekly_review" checked' not in body


def test_the_preferences_page_subscribes_again(managers):
    client = managers.client_for("pi")
    ReportSubscription.objects.create(user=managers.users["pi"], weekly_review=False)
    client.post(reverse("reports:preferences"), {"weekly_review": "on"})
    assert ReportSubscription.objects.get(user=managers.users["pi"]).weekly_review is True


def test_the_beat_sends_it_on_monday_mornings_by_default():
    schedule = settings.CELERY_BEAT_SCHEDULE["send-review-reports"]
    assert schedule["task"] == "reports.send_review_reports"
    assert (schedule["schedule"].day_of_week, schedule["schedule"].hour) == ({1}, {7})
