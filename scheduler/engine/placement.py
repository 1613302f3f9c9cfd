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
from collections.abc import Iterable

from .model import Host, HostState, Placement, Run


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
    )

    def __init__(self, hosts: Iterable[Host], running: Iterable[Run] = ()):
        hosts = list(hosts)
        self.size = {h.name: h.gpus for h in hosts if h.state == HostState.AVAILABLE}
        self.group = {h.name: h.group for h in hosts}
        # the single-host threshold is a property of the cluster, not of today's health
        self.largest = max((h.gpus for h in hosts), default=0)
        used: dict[str, set[int]] = {name: set() for name in self.size}
        # per host: (run, its indices here) of runs not yet signalled (possible victims)
        self.runs: dict[str, list[tuple[Run, tuple[int, ...]]]] = {n: [] for n in self.size}
        self.releasing: dict[str, list[int]] = {name: [] for name in self.size}
        for run in running:
            for host, indices in run.placement.slots:
                if host in used:
                    used[host].update(indices)
                    if run.signalled_at is None:
                        self.runs[host].append((run, indices))
                    else:
                        self.releasing[host].extend(indices)
        self.free = {n: [i for i in range(s) if i not in used[n]] for n, s in self.size.items()}
        self.bucket: list[set[str]] = [set() for _ in range(self.largest + 1)]
        self.whole: set[str] = set()
        self.held: dict[str, float] = {}  # host -> time it is reserved from
        for name in self.size:
            self._file(name)
        self.generation = 0

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

    def give(self, host: str, indices: Iterable[int]) -> None:
        """Return GPUs to the free pool (a run stopped)."""
        if host not in self.free:
            return
        self._unfile(host)
        self.free[host] = sorted(set(self.free[host]).union(indices))
        self._file(host)
        self.generation += 1

    def hold(self, host: str, until: float) -> None:
        """Reserve a host from ``until``: only work out of the way by then may use it."""
        self._unfile(host)
        self.held[host] = until
        self.generation += 1

    def release(self, run: Run) -> None:
        """``run`` was signalled: its GPUs are on their way out, no longer a possible victim."""
        for host, indices in run.placement.slots:
            if host in self.runs:
                self.runs[host] = [(r, i) for r, i in self.runs[host] if r is not run]
                self.releasing[host].extend(indices)

    def stopped(self, run: Run) -> None:
        """A signalled ``run`` is stopped: GPUs it was releasing are free now."""
        for host, indices in run.placement.slots:
            if host in self.releasing:
                gone = set(indices)
                self.releasing[host] = [i for i in self.releasing[host] if i not in gone]
                self.give(host, indices)

    def claim(self, host: str, gpus: int) -> tuple[int, ...]:
        """Set aside ``gpus`` GPUs of ``host`` (free first, then releasing) for a requester
        that waits on them, so that nobody else starts on or preempts for them."""
        free = self.free[host][:gpus]
        rest = gpus - len(free)
        releasing = sorted(self.releasing[host])[:rest]
        if free:
            self.take(host, free)
        if releasing:
            gone = set(releasing)
            self.releasing[host] = [i for i in self.releasing[host] if i not in gone]
        self.generation += 1
        return tuple(sorted(free + releasing))

    def occupy(self, placement: Placement) -> None:
        for host, indices in placement.slots:
            self.take(host, indices)

    @property
    def open_free(self) -> int:
        """Free GPUs on hosts that are not held."""
        return sum(k * len(b) for k, b in enumerate(self.bucket))

    def free_on(self, hosts: Iterable[str]) -> int:
        return sum(len(self.free[h]) for h in hosts)


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

    def key(h: str) -> tuple:
        return (cost.get(h, ()), h)

    ordered = sorted(candidates, key=key)
    if sum(size[h] for h in ordered) < gpus:
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
