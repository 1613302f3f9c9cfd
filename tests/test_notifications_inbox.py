"""The inbox and the bell: a count of unread notifications in the nav, read and unread."""

import pytest
from django.urls import reverse

from notifications import services
from notifications.kinds import Kind
from notifications.models import Notification


@pytest.fixture
def two_for_the_researcher(org):
    """Two notifications for the researcher, one for the lead."""
    for who, title in [("researcher", "first"), ("researcher", "second"), ("lead", "other")]:
        services.notify(Kind.WORKLOAD_STARTED, [org.users[who]], title=title, link="/workloads/")
    return org


def test_the_bell_counts_unread_notifications(two_for_the_researcher, client_for):
    body = client_for("researcher").get(reverse("home")).content.decode()
    assert 'aria-label="Notifications: 2 unread"' in body


def test_the_inbox_lists_only_your_own(two_for_the_researcher, client_for):
    response = client_for("researcher").get(reverse("notifications:inbox"))
    assert [n.title for n in response.context["page"]] == ["second", "first"]


def test_marking_one_read_with_htmx_swaps_the_row_and_the_bell(
    two_for_the_researcher, client_for, htmx
):
    first = Notification.objects.get(title="first")
    url = reverse("notifications:toggle_read", kwargs={"pk": first.pk})
    response = client_for("researcher").post(url, **htmx)
    body = response.content.decode()
    assert f'<li id="notification-{first.pk}" class="notification read">' in body
    assert 'aria-label="Notifications: 1 unread"' in body and 'hx-swap-oob="true"' in body
    assert Notification.objects.get(pk=first.pk).read_at is not None


def test_marking_it_again_makes_it_unread(two_for_the_researcher, client_for):
    first = Notification.objects.get(title="first")
    url = reverse("notifications:toggle_read", kwargs={"pk": first.pk})
    client_for("researcher").post(url)
    client_for("researcher").post(url)
    assert Notification.objects.get(pk=first.pk).read_at is None


def test_nobody_marks_someone_elses(two_for_the_researcher, client_for):
    other = Notification.objects.get(title="other")
    url = reverse("notifications:toggle_read", kwargs={"pk": other.pk})
    assert client_for("researcher").post(url).status_code == 404
    assert Notification.objects.get(pk=other.pk).read_at is None


def test_mark_all_read(two_for_the_researcher, client_for):
    client_for("researcher").post(reverse("notifications:read_all"))
    assert services.unread_count(two_for_the_researcher.researcher) == 0
    assert services.unread_count(two_for_the_researcher.lead) == 1


def test_opening_one_follows_its_link_and_reads_it(two_for_the_researcher, client_for):
    first = Notification.objects.get(title="first")
    response = client_for("researcher").get(reverse("notifications:open", kwargs={"pk": first.pk}))
    assert response["Location"] == "/workloads/"
    assert Notification.objects.get(pk=first.pk).read_at is not None


def test_the_inbox_needs_a_login(client_for):
    assert client_for(None).get(reverse("notifications:inbox")).status_code == 302
