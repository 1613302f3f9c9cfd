"""Usage, entitlement, ratio, Fair Tree rank and window usage."""

from __future__ import annotations

import math
import random

import pytest
from engine_builders import budget_shares, job, run
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.engine import (
    BudgetTree,
    UsageLedger,
    next_crossing,
    rank,
    ratio,
    rollup,
    window_usage,
)
from scheduler.engine.fairshare import Standing

SHARES = {"prog-a": 70, "prog-b": 30, "prog-a/proj-a1": 50, "prog-a/proj-a2": 50, "prog-b/b1": 1}


def test_usage_rolls_up_to_every_ancestor():
    t = BudgetTree.from_shares(SHARES)
    total = rollup({"prog-a/proj-a1": 10.0, "prog-a/proj-a2": 5.0, "prog-b/b1": 1.0}, t)
    assert total["prog-a"] == 15.0
    assert total["prog-b"] == 1.0
    assert total[""] == 16.0


def test_ratio_of_the_35_percent_project():
    # A1 holds 0.7 x 0.5 = 35% of 1000 GPU-s = 350; it used 175 -> ratio 0.5
    s = Standing(BudgetTree.from_shares(SHARES), {"prog-a/proj-a1": 175.0}, capacity=1000.0)
    assert s.ratio("prog-a/proj-a1") == pytest.approx(0.5)


def test_ratio_without_shares_is_infinite():
    assert ratio(0.0, 0.0, 1000.0) == math.inf


def test_ratio_on_a_brand_new_cluster_is_zero_when_unused():
    assert ratio(0.0, 0.5, 0.0) == 0.0


def _order(pending, shares, usage, capacity=1000.0):
    return [w.id for w in rank(pending, BudgetTree.from_shares(shares), usage, capacity)]


DOMINANCE = {"a": 50, "b": 50, "a/a1": 50, "a/a2": 50, "b/b1": 50, "b/b2": 50}


def test_heavy_leaf_of_underused_program_ranks_above_light_leaf_of_overused_program():
    # entitlements (capacity 1000): a = b = 500, each leaf 250.
    # a1 used 300 (1.2) but a = 300/500 = 0.6; b1 used 50 (0.2) but b = 600/500 = 1.2.
    usage = {"a/a1": 300.0, "b/b1": 50.0, "b/b2": 550.0}
    pending = [job("light", "b/b1", submitted=0), job("heavy", "a/a1", submitted=1)]
    assert _order(pending, DOMINANCE, usage) == ["heavy", "light"]


def test_siblings_order_by_ratio_ascending():
    usage = {"a/a1": 200.0, "a/a2": 100.0}  # a1 at 0.8, a2 at 0.4
    pending = [job("one", "a/a1"), job("two", "a/a2")]
    assert _order(pending, DOMINANCE, usage) == ["two", "one"]


def test_ratio_tie_goes_to_larger_fraction():
    shares = {"small": 1, "big": 3}
    pending = [job("s", "small"), job("b", "big")]
    assert _order(pending, shares, {}) == ["b", "s"]


def test_ratio_and_fraction_tie_goes_to_name():
    shares = {"zeta": 1, "alpha": 1}
    pending = [job("z", "zeta"), job("a", "alpha")]
    assert _order(pending, shares, {}) == ["a", "z"]


def test_requeued_workload_keeps_its_place_in_its_leaf():
    first = job("first", "a/a1", submitted=10)
    second = job("second", "a/a1", submitted=20)
    # "first" was preempted and requeued: it comes back at the end of the pending list
    assert _order([second, first], DOMINANCE, {}) == ["first", "second"]


def test_unallocated_work_ranks_after_all_allocated_work_in_submission_order():
    usage = {"b/b2": 5000.0}  # b far over its entitlement
    pending = [
        job("free-late", "a/a1", min_runtime=0, submitted=5),
        job("free-early", "a/a2", min_runtime=0, submitted=1),
        job("overused", "b/b2", submitted=9),
    ]
    assert _order(pending, DOMINANCE, usage) == ["overused", "free-early", "free-late"]


def test_window_usage_counts_only_the_overlap_with_the_window():
    # 2 GPUs over [0, 100]; window [50, 150] keeps 50 s of it: 100 GPU-s
    assert window_usage([("a", 0.0, 100.0, 2)], now=150.0, window=100.0) == {"a": 100.0}


def test_window_usage_with_half_life_decays_exponentially():
    # 1 GPU over [0, 100], half-life 100, seen at 100: integral of 2^-(100-t)/100 = 50/ln 2
    got = window_usage([("a", 0.0, 100.0, 1)], now=100.0, window=1e9, half_life=100.0)
    assert got["a"] == pytest.approx(50 / math.log(2))


def test_ledger_half_life_halves_after_one_half_life():
    ledger = UsageLedger(window=1e9, half_life=100.0)
    ledger.charge("a", 0.0, 100.0, 1)
    assert ledger.usage(200.0)["a"] == pytest.approx(25 / math.log(2))


def test_ledger_never_charges_unallocated_running_work():
    ledger = UsageLedger(window=1000.0)
    free = run(job("u", "a", min_runtime=0), "h0", [0], started=0.0)
    paid = run(job("p", "b", min_runtime=60), "h0", [1], started=0.0)
    assert ledger.usage(100.0, [free, paid]) == {"b": 100.0}


def test_ledger_counts_running_work_up_to_now_within_the_window():
    ledger = UsageLedger(window=100.0)
    r = run(job("p", "a", gpus=2, min_runtime=60), "h0", [0, 1], started=0.0)
    assert ledger.usage(150.0, [r]) == {"a": 200.0}  # 2 GPUs x [50, 150]


def test_ledger_matches_exact_window_usage_on_random_intervals():
    rng = random.Random(3)
    window, now = 7 * 86400.0, 20 * 86400.0
    intervals = []
    for _ in range(300):
        start = rng.uniform(0, now)
        intervals.append((rng.choice("abc"), start, min(now, start + rng.uniform(0, 86400)), 2))
    ledger = UsageLedger(window=window)
    for budget, start, end, gpus in intervals:
        ledger.charge(budget, start, end, gpus)
    exact = window_usage(intervals, now, window)
    got = ledger.usage(now)
    bucket = window / 256
    for budget, value in exact.items():
        # only the bucket at the window's trailing edge is pro rata
        assert got[budget] == pytest.approx(value, abs=bucket * 2 * 10)


def test_ledger_capacity_includes_open_healthy_segment():
    ledger = UsageLedger(window=1000.0)
    ledger.healthy(0.0, 100.0, 8)
    assert ledger.capacity(150.0, open_gpus=8, open_since=100.0) == pytest.approx(1200.0)


def _standing_at(tree, usage, slope, capacity, capacity_slope, t):
    """The Fair Tree order and each node's verdict of over-use (ratio above 1.1) ``t`` seconds
    on, every budget's usage moving at its slope."""
    s = Standing(tree, {k: u + slope[k] * t for k, u in usage.items()},
                 capacity + capacity_slope * t)
    return s.position, {n: r > 1.1 for n, r in s.ratios.items()}


@st.composite
def moving_usage(draw):
    tree = BudgetTree.from_shares(draw(budget_shares(projects=(1, 4))))
    # none or at least a thousandth of a GPU-second and of a GPU: a budget apart from another
    # by less than a float holds next to their usage would swap places with it by rounding
    amounts = st.one_of(st.just(0.0), st.floats(1e-3, 1e6))
    usage = {leaf: draw(amounts) for leaf in tree.leaves}
    slopes = st.one_of(st.just(0.0), st.floats(1e-3, 8), st.floats(-8, -1e-3))
    slope = {leaf: draw(slopes) for leaf in tree.leaves}
    return tree, usage, slope, draw(st.floats(1e5, 1e6)), draw(st.floats(0, 16))


@settings(max_examples=300, deadline=None)
@given(moving_usage())
def test_next_crossing_is_the_first_moment_the_order_or_a_verdict_of_over_use_changes(case):
    tree, usage, slope, capacity, capacity_slope = case
    horizon = 86400.0
    dt = next_crossing(tree, usage, slope, capacity, capacity_slope, 1.1, horizon)
    end = horizon if dt is None else dt
    now = _standing_at(tree, usage, slope, capacity, capacity_slope, 0.0)
    for step in range(1, 20):  # nothing changes before it (but at its very edges)
        t = end * step / 20
        assert _standing_at(tree, usage, slope, capacity, capacity_slope, t) == now
    if dt is not None and dt > 1e-3:
        after = dt + max(1e-6 * dt, 1e-4)
        assert _standing_at(tree, usage, slope, capacity, capacity_slope, after) != now
