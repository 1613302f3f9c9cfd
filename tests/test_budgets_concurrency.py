"""Two managers save the same allocation at the same moment: exactly one wins (PostgreSQL)."""

import threading

import pytest
from django.db import connection, connections

from budgets import services
from budgets.models import Allocation, AllocationChange

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="real row locks need PostgreSQL"
)


@pytest.mark.django_db(transaction=True)
def test_two_edits_with_the_same_version_exactly_one_wins(org):
    allocation = Allocation.objects.get(node=org.proj_a1, cluster=org.cluster)
    changes_before = AllocationChange.objects.filter(node=org.proj_a1).count()
    barrier = threading.Barrier(2)
    outcomes = {}

    def edit(user, shares):
        try:
            barrier.wait(timeout=10)
            services.set_shares(
                user, org.proj_a1, org.cluster, shares, reason=f"by {user}",
                expected_version=allocation.version,
            )
            outcomes[shares] = "won"
        except services.StaleEdit as error:
            outcomes[shares] = f"stale: {error}"
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=edit, args=(org.ceo, 80)),
        threading.Thread(target=edit, args=(org.pi, 90)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    winners = [shares for shares, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 2, outcomes
    assert len(winners) == 1, outcomes
    loser = ({80, 90} - set(winners)).pop()
    assert "reload and try again" in outcomes[loser]
    allocation.refresh_from_db()
    assert allocation.shares == winners[0]
    assert allocation.version == 2
    new_entries = AllocationChange.objects.filter(node=org.proj_a1).count() - changes_before
    assert new_entries == 1
    entry = AllocationChange.objects.filter(node=org.proj_a1).first()
    assert (entry.old_shares, entry.new_shares) == (50, winners[0])
