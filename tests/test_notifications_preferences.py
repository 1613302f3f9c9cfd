"""Each person chooses per kind: in the app, by email, both or none; at once or in a daily
digest. Defaults: researchers get their preemptions and failures by email too, managers the
requests to decide."""

import pytest
from django.urls import reverse

from notifications import services
from notifications.kinds import Kind
from notifications.models import Notification
from notifications.tasks import send_daily_digests


@pytest.fixture
def addressed(org):
    org.researcher.email = "researcher@example.org"
    org.researcher.save()
    return org


def tell(org, kind=Kind.WORKLOAD_PREEMPTED, title="preempted"):
    return services.notify(kind, [org.researcher], title=title, link="/workloads/1/")


def test_by_default_a_preemption_goes_to_the_inbox_and_by_email_at_once(addressed):
    [told] = tell(addressed)
    assert (told.in_app, told.email) == (True, "immediate")


def test_by_default_a_start_stays_in_the_app(addressed):
    [told] = tell(addressed, Kind.WORKLOAD_STARTED)
    assert (told.in_app, told.email) == (True, "")


def test_none_means_nothing_at_all(addressed):
    services.set_preference(addressed.researcher, Kind.WORKLOAD_PREEMPTED, "none", "immediate")
    assert tell(addressed) == []
    assert not Notification.objects.exists()


def test_email_only_stays_out_of_the_inbox(addressed):
    services.set_preference(addressed.researcher, Kind.WORKLOAD_PREEMPTED, "email", "immediate")
    tell(addressed)
    assert services.unread_count(addressed.researcher) == 0


def test_the_preferences_page_saves_a_choice(addressed, client_for):
    data = {}
    for kind, (channel, timing) in services.preferences_of(addressed.researcher).items():
        data[f"{kind}_channel"], data[f"{kind}_timing"] = channel, timing
    data["workload_failed_channel"], data["workload_failed_timing"] = "email", "digest"
    response = client_for("researcher").post(reverse("notifications:preferences"), data)
    assert response.status_code == 302
    assert services.preferences_of(addressed.researcher)[Kind.WORKLOAD_FAILED] == (
        "email", "digest"
    )


def test_an_unknown_choice_is_refused_and_nothing_saved(addressed, client_for):
    response = client_for("researcher").post(reverse("notifications:preferences"),
                                             {"workload_failed_channel": "pigeon"})
    assert response.status_code == 422
    assert not addressed.researcher.notification_prefs.exists()


def test_the_daily_digest_sends_one_email_with_every_link(addressed, smtp):
    services.set_preference(addressed.researcher, Kind.WORKLOAD_PREEMPTED, "email", "digest")
    tell(addressed, title="w-1 preempted")
    tell(addressed, title="w-2 preempted")
    assert smtp.received == []
    assert send_daily_digests() == 1
    [mail] = smtp.received
    assert (mail.to, mail.subject) == (["researcher@example.org"],
                                       "[Timeshare] 2 notifications today")
    assert "w-1 preempted" in mail.body and "w-2 preempted" in mail.body
    assert "https://timeshare.example.org/workloads/1/" in mail.body
    assert send_daily_digests() == 0  # each notification once
