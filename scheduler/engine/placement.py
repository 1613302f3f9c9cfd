"""Placement: which GPUs a workload gets.

A workload that fits on one host (``gpus <= GPUs per host``) gets one host, chosen best-fit:
the host with the fewest free GPUs that still suffice, so partly used hosts fill up and whole
hosts stay free for large work. A larger workload takes whole free hosts, preferably all in
one network group (best-fit again: the group with the fewest free whole hosts that suffice).
GPU indices are real, lowest first.

``Floor`` is the pass's picture of the GPUs of AVAILABLE hosts: free indices bucketed by free
count (so a fit test is a few set look-ups, not a scan of every host), the runs on each host,
GPUs being released by signalled runs, and hosts held for a reservation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from itertools import compress, repeat
from operator import attrgetter, is_not, itemgetter, mul

from .model import Host, HostState, Placement, Run

_state_of = attrgetter("state")
_signalled_at = attrgetter("signalled_at")
_CHANGES_KEPT = 50_000  # ``FloorPlan.changes`` starts a new list past this many


class RunLog:
    """The runs a driver started, ended or signalled since the last pass read them, each with
    whether it still runs: a driver that keeps its ``EngineMemo`` and tells it every such
    change (``EngineMemo.log``) spares each pass comparing every run with the last pass's."""

    __slots__ = ("changes",)

    def __init__(self) -> None:
        self.changes: dict[Run, bool] = {}

    def note(self, run: Run, running: bool) -> None:
        """``run`` started or was signalled (``running``), or ended."""
        self.changes[run] = running

    def take(self) -> dict[Run, bool]:
        changes, self.changes = self.changes, {}
        return changes


class FloorPlan:
    """The AVAILABLE hosts' GPUs and the runs on them, as every pass starts from.

    Kept up to date across passes by applying only what changed (runs started, ended or
    signalled since the last pass): a driver that runs many passes over one cluster (the
    simulator) keeps one in ``ClusterState.memo`` and a pass then costs little when little
    changed. A change of any host's state, or a new hosts list, rebuilds it. Runs are tracked
    by identity: a driver must not change a run's placement in place.
    """

    def __init__(self) -> None:
        self.hosts: list[Host] | None = None
        self.states: list[HostState] = []
        self.known: set[Run] = set()
        self.signalled: set[Run] = set()
        # budget -> GPUs its unsignalled allocated runs hold, on any host: what the final-share
        # rule counts (``Holdings``), followed run by run instead of counted in every pass
        self.holding: dict[str, int] = {}
        # the host of each change to its runs or GPUs since the last rebuild, in order (a new
        # list on rebuild): what a reader kept from an earlier pass reads to catch up
        self.changes: list[str] = []

    def update(self, hosts: list[Host], running: list[Run], log: RunLog | None = None) -> None:
        """Bring the plan to ``hosts`` and ``running``: from what ``log`` says changed when the
        driver keeps one, else by comparing every run with the last update's."""
        # map/set operations run in C: a few passes over the runs, no Python loop per run
        states = list(map(_state_of, hosts))
        changed = log.take() if log is not None else None
        if hosts is not self.hosts or states != self.states:
            self._rebuild(hosts, running, states)
            return
        if len(self.changes) > _CHANGES_KEPT:
            self.changes = []  # a new list: readers that kept a place in the old start afresh
        if changed is not None:
            self._apply(changed)
            return
        current = set(running)  # runs hash by identity
        marks = list(map(_signalled_at, running))
        if marks.count(None) == len(marks):
            signalled: set[Run] = set()
        else:
            signalled = set(compress(running, map(is_not, marks, repeat(None))))
        known, was = self.known, self.signalled
        if signalled == was and current == known:
            return
        gone, new = known - current, current - known
        for run in gone:
            self._remove(run, run in was)
            if run not in was:
                self._count(run, -1)
        for run in new:
            self._add(run, run in signalled)
            if run not in signalled:
                self._count(run, 1)
        for run in (signalled ^ was) - gone - new:
            self._remove(run, run in was)
            self._add(run, run in signalled)
            self._count(run, -1 if run in signalled else 1)
        self.known, self.signalled = current, signalled

    def _apply(self, changed: dict[Run, bool]) -> None:
        """Each run of ``changed`` still running (True) or not: as the comparison of every run
        in ``update`` would find, for the runs it would find changed."""
        known, was = self.known, self.signalled
        for run, present in changed.items():
            signalled = present and run.signalled_at is not None
            if run in known:
                if not present:
                    known.discard(run)
                    self._remove(run, run in was)
                    if run not in was:
                        self._count(run, -1)
                    was.discard(run)
                elif signalled != (run in was):
                    self._remove(run, not signalled)
                    self._add(run, signalled)
                    self._count(run, -1 if signalled else 1)
                    if signalled:
                        was.add(run)
                    else:
                        was.discard(run)
            elif present:
                known.add(run)
                self._add(run, signalled)
                if signalled:
                    was.add(run)
                else:
                    self._count(run, 1)

    def _rebuild(self, hosts: list[Host], running: list[Run], states: list[HostState]) -> None:
        available = HostState.AVAILABLE
        self.hosts, self.states = hosts, states
        self.changes = []
        self.size = {h.name: h.gpus for h in hosts if h.state == available}
        self.group = {h.name: h.group for h in hosts}
        # the single-host threshold is a property of the cluster, not of today's health
        self.largest = max((h.gpus for h in hosts), default=0)
        self.full = {s: list(range(s)) for s in set(self.size.values())}
        self.used: dict[str, set[int]] = {}
        self.runs: dict[str, list[tuple[Run, tuple[int, ...]]]] = {}
        self.releasing: dict[str, list[int]] = {}
        self.known = set(running)
        self.signalled = {r for r in running if r.signalled_at is not None}
        self.draining = {h.name: h for h in hosts if h.state == HostState.DRAINING}
        # the GPUs shares are worked out of: draining hosts still count, as their work does
        self.healthy = sum(self.size.values()) + sum(h.gpus for h in self.draining.values())
        self.holding = {}
        size = self.size
        for run in running:
            if run.signalled_at is None:
                self._count(run, 1)
            for host, indices in run.placement.slots:
                if host in size:
                    self.used.setdefault(host, set()).update(indices)
                    if run.signalled_at is None:
                        self.runs.setdefault(host, []).append((run, indices))
                    else:
                        self.releasing.setdefault(host, []).extend(indices)
        self.free = {n: self.full[s] for n, s in size.items()}  # shared lists, never mutated
        self.bucket: list[set[str]] = [set() for _ in range(self.largest + 1)]
        self.whole = {n for n in size if n not in self.used}
        for n in self.whole:
            self.bucket[size[n]].add(n)
        for n, taken in self.used.items():
            self.free[n] = [i for i in self.full[size[n]] if i not in taken]
            self._file(n)

    def _count(self, run: Run, change: int) -> None:
        """Count ``run``'s GPUs in or out (``change`` 1 or -1) of its budget's ``holding``, if it
        is allocated."""
        if run.workload.min_runtime <= 0:
            return
        budget = run.workload.budget
        held = self.holding.get(budget, 0) + change * run.gpus
        if held:
            self.holding[budget] = held
        else:
            del self.holding[budget]

    def _file(self, host: str) -> None:
        n = len(self.free[host])
        self.bucket[n].add(host)
        if n == self.size[host]:
            self.whole.add(host)

    def _refree(self, host: str) -> None:
        self.changes.append(host)
        self.bucket[len(self.free[host])].discard(host)
        self.whole.discard(host)
        taken = self.used.get(host, ())
        self.free[host] = [i for i in self.full[self.size[host]] if i not in taken]
        self._file(host)

    def _add(self, run: Run, signalled: bool) -> None:
        for host, indices in run.placement.slots:
            if host not in self.size:
                continue
            self.used[host] = self.used.get(host, set()) | set(indices)
            if signalled:
                self.releasing[host] = self.releasing.get(host, []) + list(indices)
            else:
                self.runs[host] = self.runs.get(host, []) + [(run, indices)]
            self._refree(host)

    def _remove(self, run: Run, signalled: bool) -> None:
        for host, indices in run.placement.slots:
            if host not in self.size:
                continue
            gone = set(indices)
            self.used[host] = self.used.get(host, set()) - gone
            if signalled:
                self.releasing[host] = [i for i in self.releasing.get(host, ()) if i not in gone]
            else:
                self.runs[host] = [(r, i) for r, i in self.runs.get(host, ()) if r is not run]
            self._refree(host)

    def floor(self) -> Floor:
        """A fresh Floor for one pass (copies of what a pass changes; lists are replaced, never
        changed in place, so they can be shared)."""
        f = Floor.__new__(Floor)
        f.size, f.group, f.largest = self.size, self.group, self.largest
        f.free = dict(self.free)
        f.runs = defaultdict(list, self.runs)
        f.releasing = defaultdict(list, self.releasing)
        f.bucket = list(map(set, self.bucket))
        f.whole = set(self.whole)
        f.held = {}
        f.generation = 0
        f.dirty = set()
        f.changed = set()
        return f


class Floor:
    __slots__ = (
        "size",
        "group",
        "free",
        "runs",
        "releasing",
        "bucket",
        "whole",
        "held",
        "largest",
        "generation",
        "dirty",
        "changed",
    )

    def __init__(self, hosts: Iterable[Host], running: Iterable[Run] = ()):
        plan = FloorPlan()
        plan.update(list(hosts), list(running))
        built = plan.floor()
        for name in self.__slots__:
            setattr(self, name, getattr(built, name))

    # -- bookkeeping ---------------------------------------------------------------------------

    def _file(self, name: str) -> None:
        if name in self.held:
            return
        n = len(self.free[name])
        self.bucket[n].add(name)
        if n == self.size[name]:
            self.whole.add(name)

    def _unfile(self, name: str) -> None:
        self.bucket[len(self.free[name])].discard(name)
        self.whole.discard(name)

    def take(self, host: str, indices: Iterable[int]) -> None:
        """Mark free GPUs as used (started, or claimed by a waiting requester)."""
        self._unfile(host)
        gone = set(indices)
        self.free[host] = [i for i in self.free[host] if i not in gone]
        self._file(host)
        self.generation += 1
        self.dirty.add(host)
        self.changed.add(host)

    def give(self, host: str, indices: Iterable[int]) -> None:
        """Return GPUs to the free pool (a run stopped)."""
        if host not in self.free:
            return
        self._unfile(host)
        self.free[host] = sorted(set(self.free[host]).union(indices))
        self._file(host)
        self.generation += 1
        self.dirty.add(host)
        self.changed.add(host)

    def hold(self, host: str, until: float) -> None:
        """Reserve a host from ``until``: only work out of the way by then may use it."""
        self._unfile(host)
        self.held[host] = until
        self.generation += 1
        self.dirty.add(host)

    def release(self, run: Run) -> None:
        """``run`` was signalled: its GPUs are on their way out, no longer a possible victim."""
        for host, indices in run.placement.slots:
            if host in self.runs:
                self.runs[host] = [(r, i) for r, i in self.runs[host] if r is not run]
                self.releasing[host] = self.releasing[host] + list(indices)
                self.dirty.add(host)
                self.changed.add(host)
                self.generation += 1  # every change counts: searches are remembered per generation

    def stopped(self, run: Run) -> None:
        """A signalled ``run`` is stopped: GPUs it was releasing are free now."""
        for host, indices in run.placement.slots:
            if host in self.releasing:
                gone = set(indices)
                self.releasing[host] = [i for i in self.releasing[host] if i not in gone]
                self.give(host, indices)

    def claim(self, host: str, gpus: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Set aside ``gpus`` GPUs of ``host`` (free first, then releasing) for a requester
        that waits on them, so that nobody else starts on or preempts for them. Returns the
        indices taken: ``(free ones, ones still being released)``."""
        free = self.free[host][:gpus]
        rest = gpus - len(free)
        releasing = sorted(self.releasing[host])[:rest]
        if free:
            self.take(host, free)
        if releasing:
            gone = set(releasing)
            self.releasing[host] = [i for i in self.releasing[host] if i not in gone]
        self.generation += 1
        self.dirty.add(host)
        self.changed.add(host)
        return tuple(free), tuple(releasing)

    def unclaim(self, host: str, free: tuple[int, ...], releasing: tuple[int, ...]) -> None:
        """Give back what ``claim`` set aside (its claimant started elsewhere)."""
        if releasing:
            self.releasing[host] = self.releasing[host] + list(releasing)
            self.dirty.add(host)
            self.changed.add(host)
            self.generation += 1
        if free:
            self.give(host, free)

    def occupy(self, placement: Placement) -> None:
        for host, indices in placement.slots:
            self.take(host, indices)

    @property
    def open_free(self) -> int:
        """Free GPUs on hosts that are not held."""
        return sum(map(mul, range(len(self.bucket)), map(len, self.bucket)))  # in C

    def free_on(self, hosts: Iterable[str]) -> int:
        return sum(len(self.free[h]) for h in hosts)


class Room:
    """The free GPUs of each AVAILABLE host, and how many hosts have each free count: what a
    driver asks at every instant (``may_fit``), kept up to date as GPUs are taken and given
    back instead of counted over every host each time."""

    __slots__ = ("largest", "size", "free", "hosts_with", "whole", "total")

    def __init__(self, hosts: Iterable[Host], used: Mapping[str, Collection[int]]) -> None:
        hosts = list(hosts)
        # the single-host threshold is a property of the cluster, as in ``FloorPlan``
        self.largest = max((h.gpus for h in hosts), default=0)
        self.size: dict[str, int] = {}
        self.free: dict[str, int] = {}
        self.hosts_with = [0] * (self.largest + 1)  # free count -> hosts with that many free
        self.whole = 0  # GPUs of the hosts with every GPU free
        self.total = 0  # free GPUs in all
        for h in hosts:
            if h.state == HostState.AVAILABLE:
                self.open(h.name, h.gpus, h.gpus - len(used[h.name]))

    def open(self, host: str, size: int, free: int) -> None:
        """``host`` became AVAILABLE with ``free`` of its ``size`` GPUs free."""
        self.size[host], self.free[host] = size, free
        self._count(host, 1)

    def close(self, host: str) -> None:
        """``host`` is no longer AVAILABLE: its free GPUs are no room."""
        self._count(host, -1)
        del self.size[host], self.free[host]

    def change(self, host: str, gpus: int) -> None:
        """``gpus`` more GPUs of ``host`` are free (fewer when negative); nothing for a host
        that is not AVAILABLE."""
        if host in self.free:
            self._count(host, -1)
            self.free[host] += gpus
            self._count(host, 1)

    def _count(self, host: str, sign: int) -> None:
        free = self.free[host]
        self.hosts_with[free] += sign
        self.total += sign * free
        if free == self.size[host]:
            self.whole += sign * free

    def may_fit(self, gpus: int) -> bool:
        """Whether ``place`` could find ``gpus`` GPUs, as far as free GPUs tell (no reservation
        counted): a host with that many free, or whole free hosts enough for work larger than
        any host. GPUs scattered over hosts are no room."""
        if gpus <= self.largest:
            return any(self.hosts_with[gpus:])
        return self.whole >= gpus


def place(gpus: int, floor: Floor, ends: float = math.inf) -> Placement | None:
    """Where ``gpus`` GPUs fit now, or None. ``ends`` is when the work would be out of the way:
    a held host is usable only by work that ends before its reservation."""
    if gpus <= 0:
        return None
    if gpus <= floor.largest:
        return _one_host(gpus, floor, ends)
    return _whole_hosts(gpus, floor, ends)


def _one_host(gpus: int, floor: Floor, ends: float) -> Placement | None:
    host = None
    for k in range(gpus, len(floor.bucket)):  # best fit: the tightest host that suffices
        if floor.bucket[k]:
            host = min(floor.bucket[k])
            break
    if host is None and floor.held:
        fits = [
            (len(floor.free[h]), h)
            for h, until in floor.held.items()
            if ends <= until and len(floor.free[h]) >= gpus
        ]
        if fits:
            host = min(fits)[1]
    if host is None:
        return None
    return Placement(((host, tuple(floor.free[host][:gpus])),))


def _whole_hosts(gpus: int, floor: Floor, ends: float) -> Placement | None:
    candidates = set(floor.whole)
    candidates.update(
        h
        for h, until in floor.held.items()
        if ends <= until and len(floor.free[h]) == floor.size[h]
    )
    chosen = choose_hosts(gpus, candidates, floor.size, floor.group)
    if chosen is None:
        return None
    return spread(gpus, chosen, floor.size)


def choose_hosts(
    gpus: int,
    candidates: Iterable[str],
    size: dict[str, int],
    group: dict[str, str],
    cost: dict[str, tuple] | None = None,
) -> list[str] | None:
    """Hosts whose GPUs add up to ``gpus``, cheapest first (by ``cost``, then name), preferring
    one network group: the cheapest group that suffices alone, ties to the group with the
    fewest candidates (best fit, keeps big groups whole). Without such a group, the cheapest
    hosts overall."""
    cost = cost or {}
    candidates = list(candidates)
    # sorted as (cost, name) pairs, which compare in C
    costs = map(cost.get, candidates, repeat(()))
    ordered = list(map(itemgetter(1), sorted(zip(costs, candidates, strict=True))))
    if sum(map(size.__getitem__, ordered)) < gpus:
        return None
    by_group: dict[str, list[str]] = {}
    for h in ordered:
        by_group.setdefault(group.get(h, ""), []).append(h)
    best = None
    for name, hosts in by_group.items():
        picked = _cover(gpus, hosts, size)
        if picked is None:
            continue
        score = (_total([cost.get(h, ()) for h in picked]), len(hosts), name)
        if best is None or score < best[0]:
            best = (score, picked)
    if best is not None:
        return best[1]
    return _cover(gpus, ordered, size)


def _total(costs: list[tuple]) -> tuple:
    """Component-wise sum of cost tuples."""
    return tuple(sum(parts) for parts in zip(*costs, strict=True)) if costs else ()


def _cover(gpus: int, hosts: list[str], size: dict[str, int]) -> list[str] | None:
    picked, have = [], 0
    for h in hosts:
        if have >= gpus:
            break
        picked.append(h)
        have += size[h]
    return picked if have >= gpus else None


def spread(gpus: int, hosts: list[str], size: dict[str, int]) -> Placement:
    """All GPUs of each host in turn; the last host gives only what is still needed."""
    slots, left = [], gpus
    for h in sorted(hosts):
        n = min(size[h], left)
        slots.append((h, tuple(range(n))))
        left -= n
    return Placement(tuple(slots))
