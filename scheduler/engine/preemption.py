"""Preemption: whom an allocated workload that does not fit may displace.

Victims, in order of preference:

1. unallocated runs: free work that promised nothing, preemptible by any allocated request;
2. preemptible allocated runs (past their minimum runtime) whose branch ranks below the
   requester's AND is over its entitlement (ratio > 1 + hysteresis) at the level where the two
   branches diverge, and every budget below that on the victim's path too: a budget within its
   entitlement is never preempted by rebalancing.

Protected runs are never victims of rebalancing. Among the sets that make the requester fit
on one host (or on whole hosts), the cheapest wins: fewest allocated GPUs lost (unallocated
first), then fewest GPUs lost, then fewest non-resumable GPUs, then the most over-used.

**Final share**: a rebalancing preemption between two sibling branches is allowed only while
the requester's branch, after the transfer, stays at or below the victim's (Kueue's
``LessThanOrEqualToFinalShare``) or within its own entitlement (KAI's reclaim: a branch may
always reclaim up to its share from a branch over its entitlement). Ratios are projected as GPU
shares: the GPUs a branch holds with allocated work over the GPUs it is entitled to
(``fraction x healthy GPUs``), the ratio its window usage heads to if the holdings stay. The
pass moves the holdings as it starts and preempts (``Holdings``), so one pass cannot flip a
cluster from one branch to another: it stops at the crossing.

A host held for a reservation is searched only for a requester that will be out of the way
before the reservation starts (``ends <= until``): the same rule as backfilling it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .fairshare import Standing, percent
from .model import Params, Run, Workload, ancestors
from .placement import Floor, choose_hosts

_ZERO = (0, 0, 0, 0.0)


@dataclass(slots=True)
class Victims:
    runs: list[Run]  # to be signalled (empty: GPUs already being released suffice)
    hosts: list[str]  # where the requester will land once they are gone
    cost: tuple


class Holdings:
    """GPUs each budget node holds with allocated work, moved as a pass starts and preempts.

    Runs being released (signalled) are no longer held; GPUs claimed for a waiting workload
    are held by its budget. ``share(node)`` is held GPUs over entitled GPUs
    (``fraction x healthy GPUs``): 1 is exactly the node's share of the cluster.
    """

    __slots__ = ("fraction", "healthy", "held", "version")

    def __init__(self, fraction, healthy_gpus: int):
        self.fraction = fraction  # BudgetTree.fraction
        self.healthy = healthy_gpus
        self.held: dict[str, int] = {}
        self.version = 0  # counts the moves: a verdict on the holdings holds until the next

    def add(self, leaf: str, gpus: int) -> None:
        self.version += 1
        held = self.held
        for node in ancestors(leaf):
            held[node] = held.get(node, 0) + gpus

    def share(self, node: str, change: int = 0) -> float:
        entitled = self.fraction(node) * self.healthy
        if entitled <= 0:
            return math.inf
        return (self.held.get(node, 0) + change) / entitled


@dataclass(frozen=True, slots=True)
class FinalShareBlock:
    """Why a transfer breaks the final-share rule: ``mine`` would end above ``theirs``."""

    mine: str
    theirs: str
    mine_after: float
    theirs_after: float

    def reason(self) -> str:
        return (
            f"final-share rule: {self.mine} would hold {percent(self.mine_after)} of its GPU "
            f"share, above its own share and above {self.theirs} at {percent(self.theirs_after)}"
        )


class Rules:
    """Who may displace whom in one pass: rank and over-use from the ratios at the start of
    the pass, the final-share rule from the holdings as the pass moves them."""

    __slots__ = ("standing", "holdings", "threshold", "now", "blocked", "_verdict", "_cost",
                 "_board", "_transfer")

    def __init__(self, standing: Standing, params: Params, now: float, holdings: Holdings):
        self.standing = standing
        self.holdings = holdings
        self.threshold = 1.0 + params.hysteresis
        self.now = now
        # requester id -> the last final-share block that kept a run from being its victim
        self.blocked: dict[str, FinalShareBlock] = {}
        self._verdict: dict[tuple[str, str], bool] = {}
        self._cost: dict[int, tuple] = {}
        self._board: Board | None = None
        # (competing branches, GPUs each way, holdings version) -> the final-share verdict on
        # moving one run: the same for every run of that shape
        self._transfer: dict[tuple, FinalShareBlock | None] = {}

    def board(self, floor: Floor) -> Board:
        """The per-host summary of ``floor``, brought up to date."""
        if self._board is None or self._board.floor is not floor:
            self._board = Board(floor, self)
        else:
            self._board.sync()
        return self._board

    def candidate(self, run: Run) -> bool:
        """Whether anybody at all could displace ``run`` (a cheap necessary condition)."""
        if run.workload.min_runtime <= 0:
            return True
        return self.now >= run.protected_until and (
            self.standing.ratio(run.workload.budget) > self.threshold
        )

    def may_displace(self, requester: Workload, run: Run) -> bool:
        if requester.min_runtime <= 0:
            return False  # unallocated work never preempts
        victim = run.workload
        if victim.min_runtime <= 0:
            return True
        if self.now < run.protected_until:
            return False  # protected: the contract's promise
        if not self.outranks(requester, victim.budget):
            return False
        block = self._moving(requester, victim.budget, run.gpus)
        if block is not None:
            self.blocked[requester.id] = block
        return block is None

    def outranks(self, requester: Workload, budget: str) -> bool:
        """Whether ``requester``'s budget ranks above ``budget`` and ``budget``'s line is over
        its entitlement: the runs of ``budget`` that ``requester`` may weigh as victims (the
        final-share rule then judges each move, and says why when it refuses one)."""
        key = (requester.budget, budget)
        verdict = self._verdict.get(key)
        if verdict is None:
            verdict = self._verdict[key] = self._outranks(requester.budget, budget)
        return verdict

    def _moving(self, requester: Workload, budget: str, gpus: int) -> FinalShareBlock | None:
        """The final-share verdict on moving a run of ``gpus`` GPUs of ``budget`` to
        ``requester``. It compares only the two competing branches, so it is the same for
        every such move between them until the holdings move."""
        mine, theirs = self.standing.diverge(requester.budget, budget)
        shape = (mine, requester.gpus, theirs, gpus, self.holdings.version)
        if shape not in self._transfer:
            self._transfer[shape] = self._block(requester, [(budget, gpus)])
        return self._transfer[shape]

    def final_share_block(self, requester: Workload, runs: list[Run]) -> FinalShareBlock | None:
        """The first pair of sibling branches where moving ``runs``' GPUs to ``requester`` would
        leave the requester's branch above the victim's AND above its own entitlement (GPU
        shares after the transfer), or None when the transfer keeps to the final-share rule.
        Unallocated victims hold no share."""
        return self._block(requester, [(r.workload.budget, r.gpus) for r in runs
                                       if r.workload.min_runtime > 0])

    def _block(self, requester: Workload, moved: list[tuple[str, int]]) -> FinalShareBlock | None:
        if not moved:
            return None
        change: dict[str, int] = {}
        for node in ancestors(requester.budget):
            change[node] = change.get(node, 0) + requester.gpus
        for budget, gpus in moved:
            for node in ancestors(budget):
                change[node] = change.get(node, 0) - gpus
        share = self.holdings.share
        for budget, _ in moved:
            mine, theirs = self.standing.diverge(requester.budget, budget)
            a, b = share(mine, change.get(mine, 0)), share(theirs, change.get(theirs, 0))
            if a > max(b, 1.0) + 1e-9:
                return FinalShareBlock(mine, theirs, a, b)
        return None

    def _outranks(self, mine: str, theirs: str) -> bool:
        s = self.standing
        if s.rank_of(theirs) <= s.rank_of(mine):
            return False  # their branch ranks above mine (or it is my own budget)
        _, their_branch = s.diverge(mine, theirs)
        return s.over_from(their_branch, theirs, self.threshold)

    def cost(self, run: Run) -> tuple:
        """(allocated GPUs lost, GPUs lost, non-resumable GPUs lost, -over-use): lower is better."""
        c = self._cost.get(id(run))
        if c is None:
            g = run.placement.gpus
            allocated = run.workload.min_runtime > 0
            over = min(self.standing.ratio(run.workload.budget), 1e9) if allocated else 0.0
            c = (g if allocated else 0, g, 0 if run.workload.resumable else g, -over * g)
            self._cost[id(run)] = c
        return c

    def reason(self, requester: Workload, run: Run) -> str:
        head = f"preempted to make room for {requester.label} of {requester.budget}"
        if run.workload.min_runtime <= 0:
            return f"{head}: unallocated work gives way to allocated work"
        mine, theirs = self.standing.diverge(requester.budget, run.workload.budget)
        s = self.standing
        return (
            f"{head}: {theirs} at {percent(s.ratio(theirs))} of entitlement, "
            f"{mine} at {percent(s.ratio(mine))}"
        )


def _add(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


class Board:
    """What preemption could free on each host, as numpy rows kept in step with the floor.

    Per host: ``base`` GPUs free or already being released, ``unalloc`` GPUs of unallocated
    runs, and for each allocated run that someone could displace (preemptible, budget
    over-used) its budget and GPUs. A requester may only displace allocated runs of budgets
    it outranks, so ``base + unalloc + GPUs of those budgets`` bounds what a host can offer
    it, and which hosts are worth a close look is one vector expression, not a loop over
    hosts.
    """

    def __init__(self, floor: Floor, rules: Rules):
        self.floor, self.rules = floor, rules
        self.hosts = list(floor.size)
        self.row = {h: i for i, h in enumerate(self.hosts)}
        n = len(self.hosts)
        self.size = np.array([floor.size[h] for h in self.hosts], dtype=np.int64)
        self.base = self.size.copy()  # free or being released; hosts without runs: all
        self.within = self.size.copy()  # base + GPUs of unallocated runs
        self.until = np.full(n, math.inf)  # when a held host's reservation starts; inf if not
        self.over = np.zeros(n)  # most over-used candidate ratio on the host
        self.options: dict[str, list[tuple[tuple, int, Run]]] = {}  # (cost, GPUs here, run)
        self.emptiable: dict[str, tuple | None] = {}  # cost of all runs if all are candidates
        width = max([len(r) for r in floor.runs.values()] + [1])
        self.leaf = np.full((n, width), -1, dtype=np.int64)  # candidates' budgets, by leaf_id
        self.gpus = np.zeros((n, width), dtype=np.int64)
        self.leaf_id: dict[str, int] = {}
        self.budgets: list[list[str]] = [[] for _ in range(n)]  # the same, by host row
        self.present: Counter[str] = Counter()  # candidates per budget over all hosts
        # (requester's budget and GPUs, holdings version), its reach, the budgets it may take from
        self._reach: tuple[tuple, np.ndarray, set[str]] | None = None
        for h in (set(self.hosts) - floor.whole) | set(floor.runs) | set(floor.releasing):
            if h in self.row:
                self._refresh(h)
        floor.dirty.clear()

    def sync(self) -> None:
        for h in self.floor.dirty:
            if h in self.row:
                self._refresh(h)
        self.floor.dirty.clear()

    def _refresh(self, host: str) -> None:
        floor, rules, i = self.floor, self.rules, self.row[host]
        standing = rules.standing
        base = len(floor.free[host]) + len(floor.releasing[host])
        unalloc, budgets, gpus, over = 0, [], [], 0.0
        options = []
        here = floor.runs[host]
        for run, idx in here:
            if not rules.candidate(run):
                continue
            options.append((rules.cost(run), len(idx), run))
            if run.workload.min_runtime <= 0:
                unalloc += len(idx)
            else:
                budgets.append(run.workload.budget)
                gpus.append(len(idx))
                over = max(over, min(standing.ratio(run.workload.budget), 1e9))
        options.sort(key=lambda o: (o[0], o[2].workload.id, o[2].number))  # stable ties
        self.options[host] = options
        total = _ZERO
        for o in options:
            total = _add(total, o[0])
        self.emptiable[host] = total if len(options) == len(here) else None
        self.base[i], self.within[i], self.over[i] = base, base + unalloc, over
        self.until[i] = floor.held.get(host, math.inf)
        width = self.leaf.shape[1]
        if len(budgets) > width:
            extra, width = len(budgets) - width, len(budgets)
            self.leaf = np.pad(self.leaf, ((0, 0), (0, extra)), constant_values=-1)
            self.gpus = np.pad(self.gpus, ((0, 0), (0, extra)))
        pad = width - len(budgets)
        leaf_id = self.leaf_id
        self.leaf[i] = [leaf_id.setdefault(b, len(leaf_id)) for b in budgets] + [-1] * pad
        self.gpus[i] = gpus + [0] * pad
        self.present.subtract(self.budgets[i])
        self.present.update(budgets)
        self.budgets[i] = budgets
        if self._reach is not None:
            _, reach, allowed = self._reach
            reach[i] = base + unalloc + sum(
                n for b, n in zip(budgets, gpus, strict=True) if b in allowed
            )

    def reach(self, requester: Workload) -> np.ndarray:
        """Upper bound of the GPUs each host could offer ``requester``: free, being released,
        unallocated, and allocated candidates of the budgets it outranks
        (``Rules.outranks``). Kept while the requester's budget and size and the holdings stay
        the same (requesters come in rank order) and patched per refreshed host."""
        rules = self.rules
        key = (requester.budget, requester.gpus, rules.holdings.version)
        if self._reach is None or self._reach[0] != key:
            allowed = {b for b, n in self.present.items() if n > 0 and rules.outranks(requester, b)}
            ids = [self.leaf_id[b] for b in allowed]
            taken = np.where(np.isin(self.leaf, ids), self.gpus, 0).sum(axis=1)
            self._reach = (key, self.within + taken, allowed)
        return self._reach[1]


def _cheapest(options: list[tuple[tuple, int, Run]], need: int) -> tuple[tuple, list[Run]] | None:
    """Cheapest subset of ``(cost, gpus freed here, run)`` (sorted by cost) freeing at least
    ``need`` GPUs. A host holds a handful of runs: an exhaustive search over minimal sets,
    pruned by the best so far, is cheap."""
    best: list = [None, None]

    def search(i: int, freed: int, cost: tuple, chosen: list[Run]) -> None:
        if freed >= need:
            if best[0] is None or cost < best[0]:
                best[0], best[1] = cost, list(chosen)
            return
        if i == len(options) or (best[0] is not None and cost[:3] > best[0][:3]):
            return
        c, n, run = options[i]
        chosen.append(run)
        search(i + 1, freed + n, _add(cost, c), chosen)
        chosen.pop()
        search(i + 1, freed, cost, chosen)

    search(0, 0, _ZERO, [])
    return None if best[0] is None else (best[0], best[1])


def victims_for(
    requester: Workload, floor: Floor, rules: Rules, ends: float = math.inf
) -> Victims | None:
    """The cheapest set of runs whose departure lets ``requester`` fit, or None.

    GPUs already being released by signalled runs count as free (they are on their way) so a
    requester waiting on them triggers no further preemption. ``ends`` is when the requester
    would be out of the way (after the grace period and its run): a held host is searched only
    if its reservation starts no earlier (as for backfill); by default held hosts are left alone.
    """
    if requester.min_runtime <= 0:
        return None
    board = rules.board(floor)
    if requester.gpus <= floor.largest:
        return _on_one_host(requester, board, ends)
    return _on_whole_hosts(requester, board, ends)


def _on_one_host(requester: Workload, board: Board, ends: float) -> Victims | None:
    g, rules = requester.gpus, board.rules
    usable = (board.size >= g) & (board.until >= ends)
    rows = np.flatnonzero((board.reach(requester) >= g) & usable)
    if rows.size == 0:
        return None
    need = g - board.base[rows]
    lowest = np.maximum(0, g - board.within[rows])  # allocated GPUs it must cost at least
    # look at hosts in order of the cheapest they could possibly be (most over-used first on
    # ties) and stop once no later host can beat the best set found
    order = np.lexsort((rows, -board.over[rows], need, lowest)).tolist()
    rows, need, lowest = rows.tolist(), need.tolist(), lowest.tolist()
    best: tuple | None = None
    for j in order:
        if best is not None and best[0][:2] <= (lowest[j], need[j]):
            break  # sorted by this bound: no later host loses fewer GPUs
        host = board.hosts[rows[j]]
        if need[j] <= 0:
            found = (_ZERO, [])
        else:
            options = [o for o in board.options[host] if rules.may_displace(requester, o[2])]
            found = _cheapest(options, need[j])
            if found is None:
                continue
        if best is None or (found[0], host) < (best[0], best[2]):
            best = (found[0], found[1], host)
    if best is None:
        return None
    return Victims(runs=best[1], hosts=[best[2]], cost=best[0])


def _on_whole_hosts(requester: Workload, board: Board, ends: float) -> Victims | None:
    floor, rules = board.floor, board.rules
    rows = np.flatnonzero((board.reach(requester) >= board.size) & (board.until >= ends))
    if int(board.size[rows].sum()) < requester.gpus:
        return None
    cost: dict[str, tuple] = {}
    for i in rows.tolist():
        host = board.hosts[i]
        total = board.emptiable.get(host, _ZERO) if host in board.options else _ZERO
        if total is None:
            continue  # a run on it is nobody's to preempt
        if all(rules.may_displace(requester, o[2]) for o in board.options.get(host, ())):
            cost[host] = total
    chosen = choose_hosts(requester.gpus, cost, floor.size, floor.group, cost)
    if chosen is None:
        return None
    victims = {id(o[2]): o[2] for host in chosen for o in board.options.get(host, ())}
    total = _ZERO
    for run in victims.values():
        total = _add(total, rules.cost(run))
    runs_out = sorted(victims.values(), key=lambda r: (r.workload.id, r.number))
    return Victims(runs=runs_out, hosts=chosen, cost=total)
