"""Static partitions (DESIGN.md, "Policies": ``partitions``).

Each group of hosts (a host's network group, e.g. a Philly virtual cluster) is a cluster of its
own: a workload runs only on the hosts of its budget's group, and each partition has its own
queue. The budget's leaf names its group: the group equal to the budget's path, else to its
last segment (``prog-a/vc-6214e9`` runs on the hosts of group ``vc-6214e9``). One pass walks
every partition in turn, in group-name order, so all partitions share one event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from .contract import ContractError
from .model import ClusterState, Host, HostState, Pass, RestWaitsByGroup, Run, Wait, Workload
from .pending import PendingQueue


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
        self._moves = dict.fromkeys(self.groups, 0)  # runs started and ended, per group
        # groups with a draining host or a signalled run in the last split: their passes read
        # the clock (grace periods, protections)
        self._timed: set[str] = set()

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
            self._moves[group] += 1
        # new runs in a stable order (sets of runs iterate by memory address)
        for run in sorted(current - self._known, key=_run_order):
            group = self._run_group(run)
            self._runs[group].append(run)
            self._moves[group] += 1
        self._known = current

    def inputs(self, group: str, part: ClusterState) -> tuple | None:
        """What a pass inside ``group`` under a policy that reads no clock (strict, no
        reservation) decides from: its kept queue as it stands, its runs, its hosts' states.
        None when it reads more: a queue handed as a list, a draining host or a signalled run
        (grace periods and protections run by the clock), claims."""
        queue = part.pending
        if not isinstance(queue, PendingQueue) or group in self._timed or part.claims:
            return None
        return (queue, queue.version, self._moves[group],
                tuple(map(_state_of, self.groups[group])))

    def split(self, state: ClusterState) -> tuple[dict[str, ClusterState], list[Workload]]:
        """One state per group that has something to decide (a queue, a draining host or a
        signalled run), and the pending work of budgets no group carries. A group left out
        decides nothing this pass: its picture is brought up to date when it next has work.
        A kept queue (``PendingQueue``) hands each group its own kept queue
        (``PendingQueue.by_group``), so a pass inside a partition is read as lazily as a pass
        over the whole cluster."""
        self._track(state.running)
        queues: dict[str | None, Iterable[Workload]]
        if isinstance(state.pending, PendingQueue):
            queues = {g: q for g, q in state.pending.by_group(self.group).items() if len(q)}
        else:
            queues = {}
            for w in state.pending:
                queues.setdefault(self.group(w.budget), []).append(w)
        homeless = list(queues.pop(None, ()))
        active = set(queues)
        timed = self._timed = set()
        if HostState.DRAINING in map(_state_of, self.hosts):
            timed.update(h.group for h in self.hosts if h.state == HostState.DRAINING)
        timed.update(self._run_group(r) for r in state.running if r.signalled_at is not None)
        active |= timed
        parts = {}
        for name in sorted(active):
            queue = queues.get(name, [])
            ids = {w.id for w in queue} if isinstance(queue, list) else queue
            claims = [c for c in state.claims if c.workload_id in ids]
            parts[name] = ClusterState(state.now, self.groups[name], list(self._runs[name]),
                                       queue, state.usage, state.capacity, claims)
        return parts, homeless

    def merge(self, passes: dict[str, Pass], homeless: list[Workload]) -> Pass:
        """The passes of the partitions (by group, in group-name order) as one pass, with
        the wait of the work no group carries."""
        out = Pass()
        rests = {}
        for group, p in passes.items():
            out.decisions.extend(p.decisions)
            out.waits.update(p.waits)
            out.claims.extend(p.claims)
            out.order.extend(p.order)
            out.ratios.update(p.ratios)
            out.heads.extend(p.heads)
            out.behind.update((group, wait) for wait in p.behind.values())
            if p.rest is not None:
                rests[group] = p.rest
            out.rest_unchanged = out.rest_unchanged or p.rest_unchanged
        if rests:
            out.rest = RestWaitsByGroup(self.group, rests)
        if homeless:
            wait = Wait(f"no hosts for its budget: no group is named after it (groups: "
                        f"{', '.join(self.groups)})", "no partition")
            for w in homeless:
                out.waits[w.id] = wait
                out.order.append(w.id)
        return out


_state_of = attrgetter("state")


def _run_order(run: Run) -> tuple:
    return (run.started, run.workload.id, run.number)
