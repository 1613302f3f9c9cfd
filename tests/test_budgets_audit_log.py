"""The allocation audit log is append-only and complete: reports replay it."""

import pytest
from django.db.models import ProtectedError

from budgets import services
from budgets.models import Allocation, AllocationChange


def test_every_fixture_allocation_was_logged(org):
    # Six budgets got their first shares: six entries from nothing.
    assert AllocationChange.objects.count() == 6
    assert set(AllocationChange.objects.values_list("old_shares", flat=True)) == {None}


def test_history_replays_to_the_current_shares(org):
    services.set_shares(org.pi, org.proj_a1, org.cluster, 60, reason="a")
    request = services.request_change(org.lead, org.proj_a1, org.cluster, shares=70, reason="b")
    services.decide(org.pi, request, approve=True)
    services.set_shares(org.ceo, org.prog_b, org.cluster, 40, reason="c")
    replayed = {}
    for entry in AllocationChange.objects.order_by("at", "id"):
        assert entry.old_shares == replayed.get(entry.node_id)
        replayed[entry.node_id] = entry.new_shares
    assert replayed == dict(Allocation.objects.values_list("node_id", "shares"))


def test_an_entry_cannot_be_saved_again(org):
    entry = AllocationChange.objects.first()
    entry.new_shares = 999
    with pytest.raises(TypeError, match="append-only"):
        entry.save()
    assert AllocationChange.objects.get(pk=entry.pk).new_shares != 999


def test_an_entry_cannot_be_deleted(org):
    with pytest.raises(TypeError, match="append-only"):
        AllocationChange.objects.first().delete()
    assert AllocationChange.objects.count() == 6


def test_the_log_cannot_be_updated_in_bulk(org):
    with pytest.raises(TypeError, match="append-only"):
        AllocationChange.objects.filter(node=org.proj_a1).update(new_shares=1)
    assert not AllocationChange.objects.filter(new_shares=1).exists()


def test_the_log_cannot_be_deleted_in_bulk(org):
    with pytest.raises(TypeError, match="append-only"):
        AllocationChange.objects.all().delete()
    assert AllocationChange.objects.count() == 6


def test_a_budget_with_history_cannot_be_deleted(org):
    with pytest.raises(ProtectedError):
        org.exp_1.delete()
    assert AllocationChange.objects.filter(node=org.exp_1).exists()


def test_a_deleted_user_keeps_their_name_in_the_log(org):
    services.set_shares(org.pi, org.proj_a2, org.cluster, 10, reason="cut")
    org.pi.managed_budgets.clear()
    org.pi.delete()
    entry = AllocationChange.objects.get(node=org.proj_a2, new_shares=10)
    assert (entry.changed_by, entry.changed_by_name, entry.reason) == (None, "pi", "cut")
