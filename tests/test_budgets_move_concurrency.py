"""Two managers move X under Y and Y under X at the same instant: one wins, the other gets the
field error, and the tree never holds a cycle (PostgreSQL: real concurrent transactions)."""

import threading

import pytest
from django.db import connection, connections

from budgets import services
from budgets.models import BudgetNode

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="concurrent transactions need PostgreSQL"
)

ROUNDS = 8


def move_both_at_once(org):
    """proj-a1 under proj-a2 and proj-a2 under proj-a1, released by one barrier."""
    barrier = threading.Barrier(2)
    outcomes = {}

    def move(name, node, new_parent):
        try:
            barrier.wait(timeout=10)
            services.move_node(org.ceo, node, new_parent, reason=name)
            outcomes[name] = "moved"
        except services.BudgetError as error:
            outcomes[name] = str(error)
        except Exception as error:  # noqa: BLE001 - a crash is an outcome the test reports
            outcomes[name] = f"crashed: {error!r}"
        finally:
            connections.close_all()

    a1 = BudgetNode.objects.get(pk=org.proj_a1.pk)
    a2 = BudgetNode.objects.get(pk=org.proj_a2.pk)
    threads = [
        threading.Thread(target=move, args=("a1 under a2", a1, a2)),
        threading.Thread(target=move, args=("a2 under a1", a2, a1)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def put_back(org):
    """Both projects back under Program A, whichever move won."""
    for node in BudgetNode.objects.filter(pk__in=[org.proj_a1.pk, org.proj_a2.pk]):
        if node.parent_id != org.prog_a.pk:
            services.move_node(org.ceo, node, org.prog_a, reason="put back")


def reaches_the_root(node: BudgetNode, root: BudgetNode) -> bool:
    seen = set()
    while node.parent_id is not None:
        if node.pk in seen:
            return False
        seen.add(node.pk)
        node = BudgetNode.objects.get(pk=node.parent_id)
    return node.pk == root.pk


@pytest.mark.django_db(transaction=True)
def test_crossed_moves_exactly_one_wins_every_round(org):
    for _ in range(ROUNDS):
        outcomes = move_both_at_once(org)
        assert len(outcomes) == 2, outcomes
        assert sorted(outcomes.values()).count("moved") == 1, outcomes
        loser = next(text for text in outcomes.values() if text != "moved")
        assert loser == "A budget cannot move under itself or its own descendant.", outcomes
        put_back(org)


@pytest.mark.django_db(transaction=True)
def test_crossed_moves_leave_every_node_reachable_from_the_root(org):
    for _ in range(ROUNDS):
        move_both_at_once(org)
        for node in BudgetNode.objects.all():
            assert reaches_the_root(node, org.root), node.path
            expected = (
                node.slug if node.parent_id is None
                else f"{BudgetNode.objects.get(pk=node.parent_id).path}/{node.slug}"
            )
            assert node.path == expected
        put_back(org)
