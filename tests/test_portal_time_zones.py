"""Times in the viewer's time zone: the one set on /settings/, else the browser's (the ``tz``
cookie static/js/timeshare.js sets), else TIME_ZONE (UTC); each labelled with its zone and
followed by how long ago. Workloads: tests/fixtures_scheduler.py (submitted 3 hours ago)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from common.templatetags.when import relative
from portal.models import UserSettings

SETTINGS = reverse("settings")
WORKLOADS = reverse("scheduler:workloads")
NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("moment", "said"), [
    (NOW - timedelta(seconds=20), "just now"),
    (NOW - timedelta(minutes=12, seconds=30), "12 min ago"),
    (NOW - timedelta(hours=3, minutes=59), "3 h ago"),
    (NOW - timedelta(hours=47), "47 h ago"),
    (NOW - timedelta(days=9, hours=5), "9 days ago"),
    (NOW + timedelta(minutes=40), "in 40 min"),
])
def test_relative_hint(moment, said):
    assert relative(moment, NOW) == said


def submitted_cell(client, fleet, **extra) -> str:
    body = client.get(WORKLOADS, **extra).content.decode()
    row = body[body.index(f'id="workload-{fleet.run_w.pk}"'):]
    return row[:row.index("</tr>")]


def local(moment, hours, minutes=0) -> str:
    return (moment + timedelta(hours=hours, minutes=minutes)).strftime("%Y-%m-%d %H:%M")


def test_without_a_zone_times_are_utc(fleet, client_for):
    cell = submitted_cell(client_for("researcher"), fleet)
    assert f"{local(fleet.run_w.submitted, 0)} UTC</time>" in cell
    assert '<span class="ago">· 3 h ago</span>' in cell


def test_the_browser_zone_is_the_default(fleet, client_for):
    client = client_for("researcher")
    client.cookies["tz"] = "Asia/Kolkata"
    cell = submitted_cell(client, fleet)
    assert f"{local(fleet.run_w.submitted, 5, 30)} IST</time>" in cell
    assert "Asia/Kolkata (UTC+0530)" in cell  # on hover


def test_a_zone_without_an_abbreviation_is_labelled_with_its_offset(fleet, client_for):
    client = client_for("researcher")
    client.cookies["tz"] = "Asia/Kathmandu"
    cell = submitted_cell(client, fleet)
    assert f"{local(fleet.run_w.submitted, 5, 45)} UTC+0545</time>" in cell


def test_an_unknown_browser_zone_is_ignored(fleet, client_for):
    client = client_for("researcher")
    client.cookies["tz"] = "Mars/Olympus_Mons"
    assert f"{local(fleet.run_w.submitted, 0)} UTC</time>" in submitted_cell(client, fleet)


def test_the_chosen_zone_wins_over_the_browser(fleet, client_for):
    client = client_for("researcher")
    client.cookies["tz"] = "Asia/Kolkata"
    response = client.post(SETTINGS, {"time_zone": "Asia/Tokyo"})
    assert response.status_code == 302
    assert UserSettings.objects.get(user=fleet.org.researcher).time_zone == "Asia/Tokyo"
    assert f"{local(fleet.run_w.submitted, 9)} JST</time>" in submitted_cell(client, fleet)


def test_the_chosen_zone_follows_the_user_to_a_new_login(fleet, client, password):
    UserSettings.objects.create(user=fleet.org.researcher, time_zone="Asia/Tokyo")
    client.post(reverse("login"), {"username": "researcher", "password": password})
    assert f"{local(fleet.run_w.submitted, 9)} JST</time>" in submitted_cell(client, fleet)


def test_going_back_to_the_browser_zone(fleet, client_for):
    client = client_for("researcher")
    client.cookies["tz"] = "Asia/Kolkata"
    client.post(SETTINGS, {"time_zone": "Asia/Tokyo"})
    client.post(SETTINGS, {"time_zone": ""})
    assert f"{local(fleet.run_w.submitted, 5, 30)} IST</time>" in submitted_cell(client, fleet)


def test_the_settings_page_offers_the_browser_zone(fleet, client_for):
    client = client_for("lead")
    client.cookies["tz"] = "Europe/Paris"
    body = client.get(SETTINGS).content.decode()
    assert '<option value="" selected>Your browser&#x27;s (Europe/Paris)</option>' in body


def test_an_unknown_zone_is_refused_with_a_message(fleet, client_for):
    response = client_for("lead").post(SETTINGS, {"time_zone": "Europe/Atlantis"})
    assert response.status_code == 422
    assert "Europe/Atlantis is not a time zone we know" in response.content.decode()
    assert not UserSettings.objects.filter(user=fleet.org.lead).exists()


@pytest.mark.parametrize("persona", ["ceo", "pi", "lead", "researcher", "outsider",
                                     "operator"])
def test_every_persona_sets_their_own_zone(fleet, client_for, persona):
    assert client_for(persona).post(SETTINGS, {"time_zone": "America/Chicago"}).status_code \
        == 302
    assert list(UserSettings.objects.values_list("user__username", "time_zone")) == [
        (persona, "America/Chicago")]


def test_anonymous_visitors_are_sent_to_log_in(db, client):
    response = client.post(SETTINGS, {"time_zone": "Asia/Tokyo"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert not UserSettings.objects.exists()


def test_the_user_menu_links_to_the_settings(fleet, client_for):
    assert f'<a class="who" href="{SETTINGS}"' in client_for("pi").get("/").content.decode()


def test_column_headers_name_the_zone(fleet, client_for):
    client = client_for("ceo")
    client.cookies["tz"] = "Asia/Tokyo"
    body = client.get(reverse("budgets:history")).content.decode()
    assert 'When (<abbr title="Asia/Tokyo">JST</abbr>)' in body
