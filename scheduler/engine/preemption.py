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
"""

from __future__ import annotations

from dataclasses import dataclass

from .fairshare import Standing, percent
from .model import Params, Run, Workload
from .placement import Floor, choose_hosts

_ZERO = (0, 0, 0, 0.0)


@dataclass(slots=True)
class Victims:
    runs: list[Run]  # to be signalled (empty: GPUs already being released suffice)
    hosts: list[str]  # where the requester will land once they are gone
    cost: tuple


class Rules:
    """Who may displace whom in one pass: the ratios are those at the start of the pass."""

    __slots__ = ("standing", "threshold", "now", "_verdict")

    def __init__(self, standing: Standing, params: Params, now: float):
        self.standing = standing
        self.threshold = 1.0 + params.hysteresis
        self.now = now
        self._verdict: dict[tuple[str, str], bool] = {}

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
        key = (requester.budget, victim.budget)
        verdict = self._verdict.get(key)
        if verdict is None:
            verdict = self._verdict[key] = self._outranks(requester.budget, victim.budget)
        return verdict

    def _outranks(self, mine: str, theirs: str) -> bool:
        s = self.standing
        if s.rank_of(theirs) <= s.rank_of(mine):
            return False  # their branch ranks above mine (or it is my own budget)
        _, their_branch = s.diverge(mine, theirs)
        return s.over_from(their_branch, theirs, self.threshold)

    def cost(self, run: Run) -> tuple:
        g = run.placement.gpus
        allocated = run.workload.min_runtime > 0
        over = min(self.standing.ratio(run.workload.budget), 1e9) if allocated else 0.0
        return (g if allocated else 0, g, 0 if run.workload.resumable else g, -over * g)

    def reason(self, requester: Workload, run: Run) -> str:
        head = f"preempted to make room for {requester.budget}/{requester.id}"
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


def _cheapest(options: list[tuple[tuple, int, Run]], need: int) -> tuple[tuple, list[Run]] | None:
    """Cheapest subset of ``(cost, gpus freed here, run)`` freeing at least ``need`` GPUs.
    A host holds a handful of runs, so an exhaustive search over minimal sets is cheap."""
    options.sort(key=lambda o: o[0])
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


def victims_for(requester: Workload, floor: Floor, rules: Rules) -> Victims | None:
    """The cheapest set of runs whose departure lets ``requester`` fit, or None.

    GPUs already being released by signalled runs count as free (they are on their way) so a
    requester waiting on them triggers no further preemption. Held hosts are left alone.
    """
    if requester.min_runtime <= 0:
        return None
    if requester.gpus <= floor.largest:
        return _on_one_host(requester, floor, rules)
    return _on_whole_hosts(requester, floor, rules)


def _on_one_host(requester: Workload, floor: Floor, rules: Rules) -> Victims | None:
    g = requester.gpus
    best: tuple | None = None
    for host, size in floor.size.items():
        if host in floor.held or size < g:
            continue
        base = len(floor.free[host]) + len(floor.releasing[host])
        if base >= g:
            found = (_ZERO, [])
        else:
            options = [
                (rules.cost(run), len(idx), run)
                for run, idx in floor.runs[host]
                if rules.may_displace(requester, run)
            ]
            if base + sum(o[1] for o in options) < g:
                continue
            found = _cheapest(options, g - base)
            if found is None:
                continue
        score = (found[0], base, host)  # then prefer the host whose own GPUs cover most
        if best is None or score < best[0]:
            best = (score, found[1])
    if best is None:
        return None
    return Victims(runs=best[1], hosts=[best[0][2]], cost=best[0][0])


def _on_whole_hosts(requester: Workload, floor: Floor, rules: Rules) -> Victims | None:
    cost: dict[str, tuple] = {}
    runs: dict[str, list[Run]] = {}
    for host in floor.size:
        if host in floor.held:
            continue
        here = floor.runs[host]
        if not all(rules.may_displace(requester, run) for run, _ in here):
            continue
        total = _ZERO
        for run, _ in here:
            total = _add(total, rules.cost(run))
        cost[host], runs[host] = total, [run for run, _ in here]
    chosen = choose_hosts(requester.gpus, cost, floor.size, floor.group, cost)
    if chosen is None:
        return None
    victims: dict[int, Run] = {}
    for host in chosen:
        for run in runs[host]:
            victims[id(run)] = run
    total = _ZERO
    for run in victims.values():
        total = _add(total, rules.cost(run))
    return Victims(runs=list(victims.values()), hosts=chosen, cost=total)
