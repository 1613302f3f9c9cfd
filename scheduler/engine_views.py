"""The engine's view of the database: a cluster's parameters, its budget tree and its hosts
as engine objects, and the work a workload's ended runs did. The loop, the services, the
status pages and the history replay all read the database through these."""

from __future__ import annotations

from budgets.models import Allocation, BudgetNode
from budgets.services import shares_by_path
from fleet.models import Cluster
from scheduler.engine import BudgetTree, Params
from scheduler.engine import Host as EngineHost
from scheduler.engine import Workload as EngineWorkload
from scheduler.models import Run


def engine_params(cluster: Cluster) -> Params:
    return cluster.engine_params()


def engine_workload(w, budget_path: str) -> EngineWorkload:
    """The engine's view of workload ``w`` (a row, or the loop's plain pending row)."""
    return EngineWorkload(
        id=str(w.pk),
        name=w.name,
        budget=budget_path,
        gpus=w.gpus,
        min_runtime=float(w.min_runtime),
        resumable=w.resumable,
        submitted=w.submitted.timestamp(),
        duration=None if w.expected_duration is None else float(w.expected_duration),
    )


def budget_tree(cluster: Cluster) -> BudgetTree:
    """The engine's budget tree of ``cluster`` (paths as in the database)."""
    nodes = list(BudgetNode.objects.only("id", "path", "parent_id"))
    allocations = {a.node_id: a for a in Allocation.objects.filter(cluster=cluster)}
    return BudgetTree.from_shares(shares_by_path(nodes, allocations))


def engine_hosts(hosts) -> list[EngineHost]:
    return [EngineHost(h.name, h.gpus, h.group, h.state) for h in hosts]


def earlier_work(workloads) -> dict[int, float]:
    """Seconds of work each workload did in its ended runs (until signalled, or ended): what
    the fleet asks before resuming a checkpointed workload (``fleet.backends.earlier_work``;
    registered in ``SchedulerConfig.ready``). ``workloads``: their ids, or a queryset of them
    (one subquery instead of thousands of parameters, for a tick's whole queue)."""
    done: dict[int, float] = {}
    ended = Run.objects.filter(workload_id__in=workloads, ended__isnull=False).values_list(
        "workload_id", "started", "signalled_at", "ended"
    )
    for workload_id, started, signalled, end in ended:
        stop = min(signalled, end) if signalled else end
        done[workload_id] = done.get(workload_id, 0.0) + max(0.0, (stop - started).total_seconds())
    return done
