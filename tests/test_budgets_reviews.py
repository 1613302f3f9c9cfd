"""Review cycles: per organisation, the managers confirm or change each child's allocation
by a deadline; what is unconfirmed then is flagged; a quarterly cycle schedules the next.

The tree of tests/conftest.py holds six allocations below the root: prog-a 70, proj-a1 50,
exp-1 100, proj-a2 50, prog-b 30, proj-b1 100."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from budgets import reviews
from budgets.models import AllocationChange, ReviewCycle, ReviewItem
from budgets.services import BudgetError

NOW = timezone.now().replace(microsecond=0)


@pytest.fixture
def cycle(org):
    """2027 Q1, opened now by the CEO, due in two weeks."""
    return reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=NOW,
                                  due_at=NOW + timedelta(days=14))


def item(cycle, node):
    return ReviewItem.objects.get(cycle=cycle, node=node)


def test_opening_lists_every_allocation_below_the_root_at_its_shares(org, cycle):
    assert sorted(cycle.items.values_list("node__path", "shares")) == [
        ("org/prog-a", 70), ("org/prog-a/proj-a1", 50), ("org/prog-a/proj-a1/exp-1", 100),
        ("org/prog-a/proj-a2", 50), ("org/prog-b", 30), ("org/prog-b/proj-b1", 100),
    ]
    assert ReviewCycle.objects.get(pk=cycle.pk).state == "open"


def test_a_cycle_opens_at_its_moment_not_before(org):
    later = reviews.schedule_cycle(org.ceo, org.root, name="2027 Q2",
                                   opens_at=NOW + timedelta(days=1),
                                   due_at=NOW + timedelta(days=15))
    reviews.run_due_cycles(now=NOW + timedelta(hours=23))
    assert later.items.count() == 0
    reviews.run_due_cycles(now=NOW + timedelta(days=1))
    assert later.items.count() == 6


def test_confirming_keeps_the_shares_and_writes_no_share_change(org, cycle, shares_of):
    changes = AllocationChange.objects.count()
    reviews.confirm(org.pi, item(cycle, org.proj_a1), comment="on track")
    confirmed = item(cycle, org.proj_a1)
    assert (confirmed.decision, confirmed.decided_by, confirmed.comment) == (
        "confirmed", org.pi, "on track"
    )
    assert shares_of(org.proj_a1) == 50
    assert AllocationChange.objects.count() == changes


def test_changing_sets_the_shares_through_the_audit_log(org, cycle, shares_of):
    reviews.change(org.pi, item(cycle, org.proj_a2), 20, comment="winding down")
    assert shares_of(org.proj_a2) == 20
    entry = AllocationChange.objects.filter(node=org.proj_a2).first()
    assert (entry.old_shares, entry.new_shares, entry.changed_by, entry.reason) == (
        50, 20, org.pi, "review 2027 Q1: winding down"
    )
    assert item(cycle, org.proj_a2).new_shares == 20


def test_the_second_decider_gets_a_conflict_and_the_first_decision_stands(org, cycle,
                                                                           shares_of):
    reviews.confirm(org.pi, item(cycle, org.proj_a1))
    with pytest.raises(reviews.AlreadyReviewed, match="already confirmed by pi"):
        reviews.change(org.ceo, item(cycle, org.proj_a1), 90)
    assert shares_of(org.proj_a1) == 50
    assert item(cycle, org.proj_a1).decided_by == org.pi


def test_nobody_decides_outside_the_nodes_they_manage(org, cycle, unchanged):
    from django.core.exceptions import PermissionDenied

    for persona, node in [("lead", org.proj_a1), ("pi", org.proj_b1), ("pi", org.prog_a),
                          ("researcher", org.exp_1), ("operator", org.exp_1),
                          ("outsider", org.exp_1)]:
        with unchanged(), pytest.raises(PermissionDenied):
            reviews.confirm(org.users[persona], item(cycle, node))
    assert item(cycle, org.proj_a1).decision == "pending"


def test_a_change_to_bad_shares_is_refused_and_the_item_stays_pending(org, cycle, unchanged):
    with unchanged(), pytest.raises(BudgetError):
        reviews.change(org.pi, item(cycle, org.proj_a1), 0)
    assert item(cycle, org.proj_a1).decision == "pending"


def test_at_the_deadline_what_is_unconfirmed_is_flagged(org, cycle):
    reviews.confirm(org.pi, item(cycle, org.proj_a1))
    reviews.run_due_cycles(now=cycle.due_at)
    flagged = set(cycle.items.exclude(flagged_at=None).values_list("node__path", flat=True))
    assert flagged == {"org/prog-a", "org/prog-a/proj-a1/exp-1", "org/prog-a/proj-a2",
                       "org/prog-b", "org/prog-b/proj-b1"}
    assert ReviewCycle.objects.get(pk=cycle.pk).state == "closed"


def test_a_flagged_allocation_may_still_be_confirmed_and_shows_late(org, cycle):
    reviews.run_due_cycles(now=cycle.due_at)
    reviews.confirm(org.ceo, item(cycle, org.prog_b))
    assert item(cycle, org.prog_b).late


def test_a_quarterly_cycle_schedules_the_next_three_months_later(org):
    opens = datetime(2027, 1, 31, 9, tzinfo=UTC)
    quarterly = reviews.schedule_cycle(
        org.ceo, org.root, name="2027 Q1", opens_at=opens, due_at=opens + timedelta(days=14),
        repeat_months=3, now=opens - timedelta(days=1),
    )
    reviews.run_due_cycles(now=opens)
    reviews.run_due_cycles(now=opens + timedelta(days=14))
    following = ReviewCycle.objects.exclude(pk=quarterly.pk).get()
    # January 31st + 3 months: April has 30 days
    assert (following.opens_at, following.due_at, following.state, following.repeat_months) == (
        datetime(2027, 4, 30, 9, tzinfo=UTC), datetime(2027, 5, 14, 9, tzinfo=UTC),
        "scheduled", 3,
    )


def test_closing_twice_flags_and_schedules_once(org, cycle):
    assert reviews.close_cycle(cycle, cycle.due_at) == 6
    assert reviews.close_cycle(cycle, cycle.due_at + timedelta(minutes=10)) == 0


@pytest.mark.parametrize(("opens", "due", "field"), [
    (NOW, NOW - timedelta(days=1), "due_at"),  # deadline in the past
    (NOW + timedelta(days=5), NOW + timedelta(days=2), "due_at"),  # deadline before opening
])
def test_impossible_dates_are_refused(org, opens, due, field):
    with pytest.raises(BudgetError) as refused:
        reviews.schedule_cycle(org.ceo, org.root, name="odd", opens_at=opens, due_at=due)
    assert refused.value.field == field
    assert not ReviewCycle.objects.exists()


def test_a_second_cycle_of_the_same_name_is_refused(org, cycle):
    with pytest.raises(BudgetError, match="already has a review cycle named '2027 Q1'"):
        reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=NOW,
                               due_at=NOW + timedelta(days=3))
    assert ReviewCycle.objects.count() == 1


def test_only_the_organisation_s_managers_schedule_reviews(org):
    from django.core.exceptions import PermissionDenied

    for persona in ("pi", "lead", "researcher", "operator", "outsider"):
        with pytest.raises(PermissionDenied):
            reviews.schedule_cycle(org.users[persona], org.root, name="x", opens_at=NOW,
                                   due_at=NOW + timedelta(days=3))
    assert not ReviewCycle.objects.exists()


def test_the_beat_task_opens_a_cycle_whose_moment_has_come(org):
    from django.conf import settings

    from budgets.tasks import run_review_cycles
    from portal.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["run-review-cycles"]
    assert entry["task"] == run_review_cycles.name == "budgets.run_review_cycles"
    app.loader.import_default_modules()
    assert entry["task"] in app.tasks
    due = ReviewCycle.objects.create(organisation=org.root, name="due", created_by=org.ceo,
                                     opens_at=NOW - timedelta(minutes=5),
                                     due_at=NOW + timedelta(days=14))
    assert run_review_cycles.apply().get() == 1
    assert (ReviewCycle.objects.get(pk=due.pk).state, due.items.count()) == ("open", 6)
