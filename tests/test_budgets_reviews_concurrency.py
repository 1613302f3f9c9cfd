"""Two managers decide the same allocation under review at the same moment: exactly one
decision counts and one share change is written; the other is told who decided (PostgreSQL)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from budgets import reviews
from budgets.models import Allocation, AllocationChange, ReviewItem

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="real row locks need PostgreSQL"
)


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_changes_one_counts(org):
    now = timezone.now()
    cycle = reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=now,
                                   due_at=now + timedelta(days=14))
    item = ReviewItem.objects.get(cycle=cycle, node=org.proj_a1)
    changes_before = AllocationChange.objects.filter(node=org.proj_a1).count()
    barrier = threading.Barrier(2)
    outcomes = {}

    def change(user, shares):
        try:
            barrier.wait(timeout=10)
            reviews.change(user, ReviewItem.objects.get(pk=item.pk), shares)
            outcomes[shares] = "won"
        except reviews.AlreadyReviewed as error:
            outcomes[shares] = f"conflict: {error}"
        finally:
            connections.close_all()

    threads = [threading.Thread(target=change, args=(org.ceo, 80)),
               threading.Thread(target=change, args=(org.pi, 90))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    winners = [shares for shares, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 2 and len(winners) == 1, outcomes
    loser = ({80, 90} - set(winners)).pop()
    assert "was already changed by" in outcomes[loser]
    assert Allocation.objects.get(node=org.proj_a1, cluster=org.cluster).shares == winners[0]
    assert AllocationChange.objects.filter(node=org.proj_a1).count() - changes_before == 1
    assert ReviewItem.objects.get(pk=item.pk).new_shares == winners[0]
