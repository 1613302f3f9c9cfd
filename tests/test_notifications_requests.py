"""Requests tell people: the deciders when one is filed (or passed up to them), the requester
when it is decided, everyone in the thread when someone comments; by email through a real
SMTP server, with the request's link."""

import pytest

from budgets import services
from notifications.models import Notification


@pytest.fixture
def mail_addresses(org):
    for name, user in org.users.items():
        user.email = f"{name}@example.org"
        user.save()
    return org


def titles(user):
    return list(Notification.objects.filter(recipient=user).values_list("title", flat=True))


def file_request(org, capture):
    with capture(execute=True):
        return services.request_change(org.researcher, org.proj_a1, org.cluster, shares=75,
                                       reason="the new model does not fit")


def test_a_filed_request_is_emailed_to_the_deciders(mail_addresses, smtp,
                                                    django_capture_on_commit_callbacks):
    change_request = file_request(mail_addresses, django_capture_on_commit_callbacks)
    [mail] = smtp.received
    assert mail.to == ["pi@example.org"]
    assert mail.subject == (
        f"[Timeshare] researcher asks: request #{change_request.pk} (different shares for "
        "org/prog-a/proj-a1) waits for your decision"
    )
    assert f"https://timeshare.example.org/budgets/requests/{change_request.pk}/" in mail.body


def test_passing_up_tells_the_managers_above(mail_addresses, django_capture_on_commit_callbacks):
    org = mail_addresses
    change_request = file_request(org, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        services.pass_up(org.pi, change_request)
    assert titles(org.ceo) == [
        f"pi asks: request #{change_request.pk} (different shares for org/prog-a/proj-a1) "
        "waits for your decision"
    ]


def test_the_decision_is_emailed_to_the_requester(mail_addresses, smtp,
                                                  django_capture_on_commit_callbacks):
    org = mail_addresses
    change_request = file_request(org, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        services.decide(org.pi, change_request, approve=False, comment="not this quarter")
    mail = smtp.received[-1]
    assert mail.to == ["researcher@example.org"]
    assert mail.subject == (
        f"[Timeshare] request #{change_request.pk} (different shares for org/prog-a/proj-a1) "
        "was rejected by pi"
    )
    assert "not this quarter" in mail.body


def test_a_comment_tells_the_thread_but_not_its_author(mail_addresses,
                                                       django_capture_on_commit_callbacks):
    org = mail_addresses
    change_request = file_request(org, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        services.comment_on(org.pi, change_request, "how many GPU-hours?")
    told = set(Notification.objects.filter(kind="request_commented").values_list(
        "recipient__username", flat=True))
    assert told == {"researcher"}


def test_a_failing_mail_server_does_not_hold_up_the_form(mail_addresses, client_for, dead_smtp,
                                                         django_capture_on_commit_callbacks):
    from django.urls import reverse

    org = mail_addresses
    url = reverse("budgets:request_create", kwargs={"pk": org.proj_a1.pk})
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for("researcher").post(
            url, {"cluster": org.cluster.pk, "shares": 75, "reason": "more"}
        )
    assert response.status_code == 302
    told = Notification.objects.get(recipient=org.pi)
    assert (told.in_app, told.emailed_at) == (True, None)
