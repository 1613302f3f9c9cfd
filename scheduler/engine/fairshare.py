"""Fair share: usage, entitlement, ratio and the Fair Tree rank.

For a cluster over the lookback window:

* ``usage(n)``       allocated GPU-seconds charged to n's subtree (unallocated work is free);
* ``entitlement(n)`` ``fraction(n) x capacity``: what n could have had;
* ``ratio(n)``       ``usage / entitlement``: below 1 under-used, above 1 over-used.

Rank is Slurm's Fair Tree with these ratios: siblings are ordered by ratio ascending (ties:
larger fraction first, then name) and the tree is walked depth first, so every workload of a
higher-ranked branch comes before every workload of a lower one (strict dominance). Sorting
siblings by ``usage / entitlement`` ascending is the same order as Fair Tree's ``S / U``
descending.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from .model import ROOT, BudgetTree, Run, Workload, ancestors, parent_of

INF = math.inf


def rollup(usage: dict[str, float], tree: BudgetTree) -> dict[str, float]:
    """Leaf usage -> usage of every node's subtree (the root included). Unknown paths still
    count for themselves, and for those ancestors the tree knows."""
    total: dict[str, float] = dict.fromkeys(tree._nodes, 0.0)
    total[ROOT] = 0.0
    for leaf, used in usage.items():
        if not used:
            continue
        total[ROOT] += used
        for node in ancestors(leaf):
            total[node] = total.get(node, 0.0) + used
    return total


def entitlement(node: str, tree: BudgetTree, capacity: float) -> float:
    return tree.fraction(node) * capacity


def ratio(used: float, fraction: float, capacity: float) -> float:
    """usage / entitlement. A node without shares has no claim at all: ratio infinite. While
    capacity is still zero (a cluster's first instant) an unused node is at 0."""
    if fraction <= 0:
        return INF
    ent = fraction * capacity
    if ent <= 0:
        return 0.0 if used <= 0 else INF
    return used / ent


PERCENT_CAP = 10.0  # ratios above 1000% read as ">1000%" (a young cluster's tiny capacity)


def percent(r: float) -> str:
    """A ratio as people read it: "40%", "180%"; past 1000% only ">1000%" (on a cluster a few
    minutes old the entitlement is a few GPU-minutes, and "1507849%" says nothing more)."""
    if r == INF:
        return "no allocation"
    return ">1000%" if r > PERCENT_CAP else f"{r * 100:.0f}%"


class Standing:
    """Where every budget stands in one pass: rolled-up usage, ratios and the Fair Tree order.

    ``position[path]`` is the node's index in the depth-first walk with siblings sorted by
    (ratio, -fraction, name); comparing two leaves' positions is comparing their branches at
    the level where they diverge, which is what strict dominance means.
    """

    __slots__ = ("tree", "capacity", "usage", "ratios", "position")

    def __init__(self, tree: BudgetTree, usage: dict[str, float], capacity: float):
        self.tree = tree
        self.capacity = capacity
        self.usage = used = rollup(usage, tree)
        fraction = tree._fraction
        self.ratios = ratios = {n: ratio(used[n], fraction[n], capacity) for n in tree._nodes}
        self.position: dict[str, int] = {}
        position = self.position
        children, stack = tree._children, [ROOT]
        while stack:
            node = stack.pop()
            position[node] = len(position)
            kids = children[node]
            if kids:  # the first sibling is popped first: pushed last
                stack += sorted(kids, key=lambda k: (ratios[k], -fraction[k], k), reverse=True)

    def ratio(self, path: str) -> float:
        r = self.ratios.get(path)
        if r is None:  # a budget the tree does not know: no allocation
            return ratio(self.usage.get(path, 0.0), 0.0, self.capacity)
        return r

    def rank_of(self, path: str) -> int:
        """Fair Tree position of a leaf; unknown budgets after every known one."""
        return self.position.get(path, len(self.position))

    def diverge(self, a: str, b: str) -> tuple[str, str]:
        """The two children of the deepest common ancestor of ``a`` and ``b`` on their paths
        (the branches that compete with each other); ``(a, b)`` themselves if siblings."""
        pa, pb = ancestors(a), ancestors(b)
        i = 0
        while i < len(pa) and i < len(pb) and pa[i] == pb[i]:
            i += 1
        return (pa[i] if i < len(pa) else a, pb[i] if i < len(pb) else b)

    def over_from(self, branch: str, leaf: str, threshold: float) -> bool:
        """Whether every node from ``branch`` down to ``leaf`` is above ``threshold``: only then
        does the victim's whole line of budgets lie beyond its entitlement."""
        node = leaf
        while True:
            if self.ratio(node) <= threshold:
                return False
            if node in (branch, ROOT):
                return True
            node = parent_of(node)

    def label(self, path: str) -> str:
        return f"{path} at {percent(self.ratio(path))}"


def order_key(standing: Standing | None):
    """Sort key for pending work: allocated by Fair Tree rank then original submission;
    unallocated after all allocated work, in submission order. Without a standing (a single
    budget competing) rank plays no part."""
    rank_of = standing.rank_of if standing is not None else (lambda budget: 0)

    def key(w: Workload) -> tuple[int, int, float, str]:
        if w.min_runtime > 0:
            return (0, rank_of(w.budget), w.submitted, w.id)
        return (1, 0, w.submitted, w.id)

    return key


def rank(
    pending: Sequence[Workload], tree: BudgetTree, usage: dict[str, float], capacity: float
) -> list[Workload]:
    """Pending workloads in the order a pass considers them (one sort)."""
    return sorted(pending, key=order_key(Standing(tree, usage, capacity)))


def next_crossing(
    tree: BudgetTree,
    usage: dict[str, float],
    slope: dict[str, float],
    capacity: float,
    capacity_slope: float,
    threshold: float,
    horizon: float,
) -> float | None:
    """Seconds from now until, with every leaf's usage changing at ``slope`` (GPU-seconds per
    second) and the capacity at ``capacity_slope``, two siblings swap places in the Fair Tree
    order or a node's ratio crosses ``threshold`` (1 + hysteresis); None if neither happens
    within ``horizon``.

    Between such moments the window's sliding changes no ranking and no "over its
    entitlement" verdict, so a pass decides nothing new: a driver that is not ticking (the
    simulator) need only wake at the next crossing. Both comparisons are linear in time:
    siblings compare ``usage / fraction`` (the capacity cancels out), a threshold compares
    ``usage`` with ``threshold x fraction x capacity``.
    """
    used, rate = rollup(usage, tree), rollup(slope, tree)
    soonest = math.inf

    def root(gap: float, closing: float) -> None:
        nonlocal soonest
        if closing:
            t = -gap / closing
            # a crossing at now (or a float's hair before it) counts: at a tick a ratio may
            # sit exactly on the threshold, not yet past it (drivers plan a tick ahead anyway)
            if -1e-6 < t < soonest:
                soonest = max(t, 0.0)

    entitled, rivals = tree.compared()
    for a, fa, b, fb in rivals:
        root(used[a] / fa - used[b] / fb, rate[a] / fa - rate[b] / fb)
    for node, f in entitled:
        root(used[node] - threshold * f * capacity, rate[node] - threshold * f * capacity_slope)
    return soonest if soonest <= horizon and soonest < math.inf else None


# ---------------------------------------------------------------------------------------------
# Window usage from run intervals

LN2 = math.log(2.0)


def decayed(gpus: float, start: float, end: float, now: float, half_life: float) -> float:
    """GPU-seconds of ``[start, end]`` weighted by ``2 ** -((now - t) / half_life)``."""
    if end <= start:
        return 0.0
    k = LN2 / half_life
    return gpus / k * (math.exp(-k * (now - end)) - math.exp(-k * (now - start)))


def window_usage(
    intervals: Iterable[tuple[str, float, float, float]],
    now: float,
    window: float,
    half_life: float | None = None,
) -> dict[str, float]:
    """Exact usage per budget from ``(budget, start, end, gpus)`` intervals of allocated work:
    the overlap with ``[now - window, now]``, or the exponentially decayed sum."""
    out: dict[str, float] = {}
    lo = now - window
    for budget, start, end, gpus in intervals:
        end = min(end, now)
        if half_life:
            used = decayed(gpus, start, end, now, half_life)
        else:
            used = gpus * max(0.0, end - max(start, lo))
        if used > 0:
            out[budget] = out.get(budget, 0.0) + used
    return out


class UsageLedger:
    """Incremental window usage and capacity for the simulator.

    Finished allocated work is charged with ``charge(budget, start, end, gpus)``, healthy GPU
    time with ``healthy(start, end, gpus)``; ``usage(now, running)`` adds running allocated work
    up to ``now``. With a hard window the history is kept in time buckets (numpy), exact
    except for the one bucket at the window's trailing edge, which is counted pro rata; with a
    half-life one decayed number per budget is kept, exactly.
    """

    _CAPACITY = "\0capacity"

    def __init__(
        self,
        window: float = 7 * 86400.0,
        half_life: float | None = None,
        start: float = 0.0,
        buckets_per_window: int = 256,
    ):
        self.window = window
        self.half_life = half_life
        self.start = start
        self.width = window / buckets_per_window
        self._row: dict[str, int] = {}
        self._grid = np.zeros((8, 1024))  # rows x buckets (hard window)
        self._value = np.zeros(8)  # decayed GPU-seconds as of self._as_of (half-life)
        self._as_of = start

    def _index(self, budget: str) -> int:
        row = self._row.get(budget)
        if row is None:
            row = self._row[budget] = len(self._row)
            if row >= self._grid.shape[0]:
                self._grid = np.vstack([self._grid, np.zeros_like(self._grid)])
                self._value = np.concatenate([self._value, np.zeros_like(self._value)])
        return row

    def _add(self, key: str, start: float, end: float, gpus: float) -> None:
        if end <= start or gpus == 0:
            return
        row = self._index(key)
        if self.half_life:
            if end > self._as_of:
                self._value *= math.exp(-LN2 * (end - self._as_of) / self.half_life)
                self._as_of = end
            self._value[row] += decayed(gpus, start, end, self._as_of, self.half_life)
            return
        w = self.width
        a, b = (start - self.start) / w, (end - self.start) / w
        first, last = int(a), int(b)
        if last >= self._grid.shape[1]:
            grow = max(last + 1, 2 * self._grid.shape[1]) - self._grid.shape[1]
            self._grid = np.hstack([self._grid, np.zeros((self._grid.shape[0], grow))])
        line = self._grid[row]
        if first == last:
            line[first] += gpus * (end - start)
            return
        line[first] += gpus * (first + 1 - a) * w
        line[first + 1 : last] += gpus * w
        line[last] += gpus * (b - last) * w

    def charge(self, budget: str, start: float, end: float, gpus: float) -> None:
        """Allocated GPU time of a finished run (or a finished part of it)."""
        self._add(budget, start, end, gpus)

    def healthy(self, start: float, end: float, gpus: float) -> None:
        """GPU time the cluster's healthy hosts could give over ``[start, end]``."""
        self._add(self._CAPACITY, start, end, gpus)

    def _totals(self, now: float) -> np.ndarray:
        n = len(self._row)
        if self.half_life:
            return self._value[:n] * math.exp(-LN2 * (now - self._as_of) / self.half_life)
        lo = (now - self.window - self.start) / self.width
        hi = min(int((now - self.start) / self.width), self._grid.shape[1] - 1)
        if hi < 0:
            return np.zeros(n)
        if lo <= 0:
            return self._grid[:n, : hi + 1].sum(axis=1)
        edge = int(lo)
        inside = self._grid[:n, edge + 1 : hi + 1].sum(axis=1)
        return inside + self._grid[:n, edge] * (edge + 1 - lo)

    def _open(self, gpus: float, since: float, now: float) -> float:
        if now <= since:
            return 0.0
        if self.half_life:
            return decayed(gpus, since, now, now, self.half_life)
        return gpus * (now - max(since, now - self.window))

    def usage(self, now: float, running: Iterable[Run] = ()) -> dict[str, float]:
        totals = self._totals(now)
        out = {b: float(totals[r]) for b, r in self._row.items() if b != self._CAPACITY}
        for run in running:
            if run.workload.min_runtime > 0:
                b = run.workload.budget
                out[b] = out.get(b, 0.0) + self._open(run.placement.gpus, run.started, now)
        return out

    def capacity(
        self, now: float, open_gpus: float = 0.0, open_since: float | None = None
    ) -> float:
        """Healthy GPU-seconds in the window, plus ``open_gpus`` healthy since ``open_since``."""
        row = self._row.get(self._CAPACITY)
        total = float(self._totals(now)[row]) if row is not None else 0.0
        if open_gpus and open_since is not None:
            total += self._open(open_gpus, open_since, now)
        return total
