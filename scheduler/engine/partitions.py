"""Static partitions (DESIGN.md, "Policies": ``partitions``).

Each group of hosts (a host's network group, e.g. a Philly virtual cluster) is a cluster of its
own: a workload runs only on the hosts of its budget's group, and each partition has its own
queue. The budget's leaf names its group: the group equal to the budget's path, else to its
last segment (``prog-a/vc-6214e9`` runs on the hosts of group ``vc-6214e9``). One pass walks
every partition in turn, in group-name order, so all partitions share one event loop.
"""

from __future__ import annotations

from operator import attrgetter

from .contract import ContractError
from .model import ClusterState, Host, HostState, Pass, Run, Wait, Workload


def group_of(budget: str, groups: dict[str, list[Host]]) -> str | None:
    """The group a budget's work runs in, or None when no group carries its name."""
    if budget in groups:
        return budget
    leaf = budget.rpartition("/")[2]
    return leaf if leaf in groups else None


class Partitioning:
    """The hosts of each group, built once per hosts list (its lists keep their identity from
    one pass to the next, so each partition's picture of its hosts is updated, not rebuilt),
    and the runs of each group, updated by what started and ended since the last pass."""

    def __init__(self, hosts: list[Host]) -> None:
        self.hosts = hosts
        groups: dict[str, list[Host]] = {}
        for host in hosts:
            groups.setdefault(host.group, []).append(host)
        self.groups = dict(sorted(groups.items()))
        self.host_group = {h.name: h.group for h in hosts}
        self._budget_group: dict[str, str | None] = {}
        self._known: set[Run] = set()
        self._runs: dict[str, list[Run]] = {name: [] for name in self.groups}

    def group(self, budget: str) -> str | None:
        try:
            return self._budget_group[budget]
        except KeyError:
            found = self._budget_group[budget] = group_of(budget, self.groups)
            return found

    def hosts_for(self, budget: str) -> list[Host]:
        """The hosts a budget's work may run on: its contract is checked against them."""
        group = self.group(budget)
        if group is None:
            raise ContractError(f"no hosts for budget {budget}: no group of hosts is named "
                                f"after it (groups: {', '.join(self.groups)})")
        return self.groups[group]

    def _run_group(self, run: Run) -> str:
        return self.group(run.workload.budget) or self.host_group[run.placement.hosts[0]]

    def _track(self, running: list[Run]) -> None:
        current = set(running)  # runs hash by identity
        if current == self._known:
            return
        for run in self._known - current:
            group = self._run_group(run)
            self._runs[group] = [r for r in self._runs[group] if r is not run]
        # new runs in a stable order (sets of runs iterate by memory address)
        for run in sorted(current - self._known, key=_run_order):
            self._runs[self._run_group(run)].append(run)
        self._known = current

    def split(self, state: ClusterState) -> tuple[dict[str, ClusterState], list[Workload]]:
        """One state per group that has something to decide (a queue, a draining host or a
        signalled run), and the pending work of budgets no group carries. A group left out
        decides nothing this pass: its picture is brought up to date when it next has work."""
        self._track(state.running)
        queues: dict[str, list[Workload]] = {}
        homeless: list[Workload] = []
        for w in state.pending:
            group = self.group(w.budget)
            if group is None:
                homeless.append(w)
            else:
                queues.setdefault(group, []).append(w)
        active = set(queues)
        if HostState.DRAINING in map(_state_of, self.hosts):
            active.update(h.group for h in self.hosts if h.state == HostState.DRAINING)
        active.update(self._run_group(r) for r in state.running if r.signalled_at is not None)
        parts = {}
        for name in sorted(active):
            queue = queues.get(name, [])
            ids = {w.id for w in queue}
            claims = [c for c in state.claims if c.workload_id in ids]
            parts[name] = ClusterState(state.now, self.groups[name], list(self._runs[name]),
                                       queue, state.usage, state.capacity, claims)
        return parts, homeless


_state_of = attrgetter("state")


def _run_order(run: Run) -> tuple:
    return (run.started, run.workload.id, run.number)


def merge(passes: list[Pass], homeless: list[Workload], groups: list[str]) -> Pass:
    """The passes of all partitions as one pass, partitions in group-name order."""
    out = Pass()
    for p in passes:
        out.decisions.extend(p.decisions)
        out.waits.update(p.waits)
        out.claims.extend(p.claims)
        out.order.extend(p.order)
        out.ratios.update(p.ratios)
        out.heads.extend(p.heads)
    if homeless:
        wait = Wait(f"no hosts for its budget: no group is named after it (groups: "
                    f"{', '.join(groups)})", "no partition")
        for w in homeless:
            out.waits[w.id] = wait
            out.order.append(w.id)
    return out
