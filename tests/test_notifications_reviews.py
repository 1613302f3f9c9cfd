"""A review cycle tells people: when it opens and before its deadline, each decider how many
allocations wait for them; at the deadline, the deciders who missed it and the managers one
level above them. By email through a real SMTP server, with the cycle's link.

Deciders in tests/conftest.py's tree: the CEO decides prog-a, prog-b and (prog-b has no
manager) proj-b1; the PI proj-a1 and proj-a2; the lead exp-1."""

from datetime import timedelta

import pytest
from django.utils import timezone

from budgets import reviews
from budgets.models import ReviewItem
from notifications.models import Notification

NOW = timezone.now().replace(microsecond=0)


@pytest.fixture
def addressed(org):
    for name, user in org.users.items():
        user.email = f"{name}@example.org"
        user.save()
    return org


def open_cycle(org, capture):
    with capture(execute=True):
        return reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=NOW,
                                      due_at=NOW + timedelta(days=14))


def titles(kind):
    return sorted(Notification.objects.filter(kind=kind).values_list(
        "recipient__username", "title"
    ))


def test_opening_emails_each_decider_what_waits_for_them(addressed, smtp,
                                                         django_capture_on_commit_callbacks):
    cycle = open_cycle(addressed, django_capture_on_commit_callbacks)
    due = f"{cycle.due_at:%Y-%m-%d %H:%M} UTC"
    assert sorted((m.to[0], m.subject) for m in smtp.received) == [
        ("ceo@example.org", f"[Timeshare] Budget review 2027 Q1: 3 allocations to confirm or "
                            f"change by {due}"),
        ("lead@example.org", f"[Timeshare] Budget review 2027 Q1: 1 allocation to confirm or "
                             f"change by {due}"),
        ("pi@example.org", f"[Timeshare] Budget review 2027 Q1: 2 allocations to confirm or "
                           f"change by {due}"),
    ]
    assert f"https://timeshare.example.org/budgets/reviews/{cycle.pk}/?mine=1" in (
        smtp.received[0].body
    )


def test_the_reminder_goes_once_to_those_with_items_pending(addressed,
                                                            django_capture_on_commit_callbacks):
    org = addressed
    cycle = open_cycle(org, django_capture_on_commit_callbacks)
    reviews.confirm(org.lead, ReviewItem.objects.get(cycle=cycle, node=org.exp_1))
    Notification.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        reviews.run_due_cycles(now=cycle.due_at - timedelta(days=2))
        reviews.run_due_cycles(now=cycle.due_at - timedelta(days=1))
    assert [who for who, _ in titles("review_due")] == ["ceo", "pi"]


def test_nothing_is_reminded_a_week_before_the_deadline(addressed,
                                                        django_capture_on_commit_callbacks):
    cycle = open_cycle(addressed, django_capture_on_commit_callbacks)
    Notification.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        reviews.run_due_cycles(now=cycle.due_at - timedelta(days=7))
    assert titles("review_due") == []


def test_overdue_items_are_flagged_to_the_managers_above(addressed,
                                                         django_capture_on_commit_callbacks):
    org = addressed
    cycle = open_cycle(org, django_capture_on_commit_callbacks)
    # everything is decided but Experiment 1 (the lead's) and Project A2 (the PI's)
    for node, who in [(org.prog_a, org.ceo), (org.prog_b, org.ceo), (org.proj_b1, org.ceo),
                      (org.proj_a1, org.pi)]:
        reviews.confirm(who, ReviewItem.objects.get(cycle=cycle, node=node))
    with django_capture_on_commit_callbacks(execute=True):
        reviews.run_due_cycles(now=cycle.due_at)
    assert titles("review_overdue") == [
        ("ceo", "Budget review 2027 Q1: 1 allocation below org/prog-a not confirmed by the "
                "deadline"),
        ("lead", "Budget review 2027 Q1 is overdue: 1 allocation still waits for you"),
        ("pi", "Budget review 2027 Q1 is overdue: 1 allocation still waits for you"),
        ("pi", "Budget review 2027 Q1: 1 allocation below org/prog-a/proj-a1 not confirmed by "
               "the deadline"),
    ]


def test_a_cycle_decided_in_time_flags_nobody(addressed, django_capture_on_commit_callbacks):
    org = addressed
    cycle = open_cycle(org, django_capture_on_commit_callbacks)
    for review_item in cycle.items.select_related("node"):
        reviews.confirm(org.ceo, review_item)
    with django_capture_on_commit_callbacks(execute=True):
        reviews.run_due_cycles(now=cycle.due_at)
    assert titles("review_overdue") == []
