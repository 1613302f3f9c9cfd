"""The last guards against a cycle in the budget tree, below the move service: the model's
save on every database, and a trigger on PostgreSQL that holds whatever code writes the row."""

import pytest
from django.db import IntegrityError, connection, transaction

from budgets.models import BudgetNode


def test_saving_a_node_under_its_own_grandchild_is_refused(org):
    program = BudgetNode.objects.get(pk=org.prog_a.pk)
    program.parent = BudgetNode.objects.get(pk=org.exp_1.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        program.save()
    assert BudgetNode.objects.get(pk=org.prog_a.pk).parent_id == org.root.pk


def test_saving_a_node_under_itself_is_refused(org):
    project = BudgetNode.objects.get(pk=org.proj_a1.pk)
    project.parent_id = project.pk
    with pytest.raises(IntegrityError), transaction.atomic():
        project.save()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
def test_raw_sql_cannot_put_a_node_under_its_descendant(org):
    refused = pytest.raises(IntegrityError, match="cannot sit under its own descendant")
    with refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE budgets_budgetnode SET parent_id = %s WHERE id = %s",
            [org.exp_1.pk, org.prog_a.pk],
        )
    assert BudgetNode.objects.get(pk=org.prog_a.pk).parent_id == org.root.pk


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
def test_raw_sql_may_still_move_a_node_elsewhere(org):
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE budgets_budgetnode SET parent_id = %s WHERE id = %s",
            [org.prog_b.pk, org.proj_a2.pk],
        )
    assert BudgetNode.objects.get(pk=org.proj_a2.pk).parent_id == org.prog_b.pk
