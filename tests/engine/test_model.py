"""Budget tree fractions, placements and runs."""

from __future__ import annotations

import pytest

from scheduler.engine import BudgetTree, Params, Placement, Run, Workload, fractions


def test_fraction_is_product_of_sibling_shares_down_the_path():
    # program A has 70 of 100 shares, its project A1 50 of 100: 0.7 x 0.5 = 0.35
    shares = {"prog-a": 70, "prog-b": 30, "prog-a/proj-a1": 50, "prog-a/proj-a2": 50}
    assert fractions(shares)["prog-a/proj-a1"] == pytest.approx(0.35)


def test_fraction_counts_all_siblings_busy_or_not():
    # a sibling with shares but no work still dilutes: 1 / (1 + 3) = 0.25
    t = BudgetTree.from_shares({"a": 1, "idle": 3})
    assert t.fraction("a") == pytest.approx(0.25)


def test_node_without_shares_has_fraction_zero():
    t = BudgetTree.from_shares({"a/a1": 10, "b": 5})  # "a" itself holds no shares
    assert t.fraction("a") == 0.0
    assert t.fraction("a/a1") == 0.0


def test_unknown_node_has_fraction_zero():
    assert BudgetTree.from_shares({"a": 1}).fraction("nobody") == 0.0


def test_tree_structure_from_paths():
    t = BudgetTree.from_shares({"p": 1, "p/x": 1, "p/y": 1, "p/y/alice": 1, "q": 1})
    assert t.children("p") == ["p/x", "p/y"]
    assert t.parent("p/y/alice") == "p/y"
    assert t.leaves == ["p/x", "p/y/alice", "q"]


def test_placement_counts_gpus_and_lists_pairs():
    p = Placement((("h0", (0, 1)), ("h1", (3,))))
    assert p.gpus == 3
    assert p.hosts == ("h0", "h1")
    assert p.pairs() == [("h0", 0), ("h0", 1), ("h1", 3)]


def test_allocated_run_is_preemptible_only_after_protection():
    w = Workload("j", "a", 1, min_runtime=100, resumable=True, submitted=0)
    r = Run(w, started=0, placement=Placement((("h0", (0,)),)), protected_until=100)
    assert not r.preemptible(99)
    assert r.preemptible(100)


def test_unallocated_run_is_always_preemptible():
    w = Workload("j", "a", 1, min_runtime=0, resumable=True, submitted=0)
    r = Run(w, started=0, placement=Placement((("h0", (0,)),)), protected_until=0)
    assert not w.allocated
    assert r.preemptible(0)


def test_grace_ends_after_signal():
    w = Workload("j", "a", 1, min_runtime=600, resumable=True, submitted=0)
    r = Run(w, 0, Placement((("h0", (0,)),)), 600, signalled_at=50)
    assert r.grace_ends(Params(grace=300)) == 350


def test_unallocated_work_gets_the_short_grace():
    w = Workload("j", "a", 1, min_runtime=0, resumable=True, submitted=0)
    r = Run(w, 0, Placement((("h0", (0,)),)), 0, signalled_at=50)
    assert r.grace_ends(Params(grace=300, unallocated_grace=20)) == 70


def test_unallocated_grace_never_exceeds_the_grace_period():
    w = Workload("j", "a", 1, min_runtime=0, resumable=True, submitted=0)
    r = Run(w, 0, Placement((("h0", (0,)),)), 0, signalled_at=50)
    assert r.grace_ends(Params(grace=10, unallocated_grace=60)) == 60
