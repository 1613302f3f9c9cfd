"""The state of the fleet and the budgets now, read-only, for the API, the CLI and /metrics.

Where every budget stands on a cluster, as the scheduler sees it: the loop's window
usage (hourly rollups, the window's edge exact) and capacity, handed to the engine's
``Standing`` (ratios and the Fair Tree order). Nothing here decides anything; the API's budget
tree, the CLI's ``usage`` and the Prometheus ratios read it."""

from __future__ import annotations

import math
from collections import defaultdict

from django.db.models import Count, Sum
from django.utils import timezone

from budgets.models import BudgetNode
from fleet.models import Host
from scheduler import loop
from scheduler.engine import ROOT, Standing
from scheduler.engine_views import budget_tree
from scheduler.models import OccupancySample, RunGPU, Workload


def current_standing(cluster, now=None) -> Standing:
    now = now or timezone.now()
    paths = dict(BudgetNode.objects.values_list("id", "path"))
    usage = loop.window_usage(cluster, now, paths)
    if OccupancySample.objects.filter(cluster=cluster).exists():
        capacity = loop.window_capacity(cluster, now)
    else:  # no tick yet: what the first tick will see
        capacity = loop.window_capacity_estimate(cluster, now)
    return Standing(budget_tree(cluster), usage, capacity)


def sibling_ranks(standing: Standing) -> dict[str, tuple[int, int]]:
    """path -> (rank among its siblings, number of siblings): Fair Tree order, 1 first."""
    ranks: dict[str, tuple[int, int]] = {}
    tree = standing.tree
    for node in [ROOT, *tree.nodes]:
        kids = sorted(tree.children(node), key=lambda n: standing.position.get(n, 0))
        for index, kid in enumerate(kids):
            ranks[kid] = (index + 1, len(kids))
    return ranks


def finite(value: float) -> float | None:
    """JSON has no infinity: a node without shares has no ratio."""
    return None if math.isinf(value) else value


GPU_STATES = ("allocated", "unallocated", "free", "unavailable")


def gpu_states() -> dict[int, dict[str, int]]:
    """cluster id -> GPUs by state, a partition of the cluster's GPUs: held by allocated or
    unallocated runs, free on AVAILABLE hosts, or unavailable (idle on a host that is not
    AVAILABLE: draining, drained, repairing, down, escalated)."""
    out: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(GPU_STATES, 0))
    total: dict[int, int] = defaultdict(int)
    available: dict[int, int] = defaultdict(int)
    for cluster_id, state, gpus in Host.objects.values("cluster_id", "state").annotate(
        gpus=Sum("gpus")
    ).values_list("cluster_id", "state", "gpus"):
        total[cluster_id] += gpus or 0
        if state == Host.State.AVAILABLE:
            available[cluster_id] += gpus or 0
    held_on_available: dict[int, int] = defaultdict(int)
    for cluster_id, allocated, host_state, n in (
        RunGPU.objects.filter(held=True)
        .values("host__cluster_id", "run__allocated", "host__state")
        .annotate(n=Count("id"))
        .values_list("host__cluster_id", "run__allocated", "host__state", "n")
    ):
        out[cluster_id]["allocated" if allocated else "unallocated"] += n
        if host_state == Host.State.AVAILABLE:
            held_on_available[cluster_id] += n
    for cluster_id, gpus in total.items():
        states = out[cluster_id]
        states["free"] = max(0, available[cluster_id] - held_on_available[cluster_id])
        states["unavailable"] = max(
            0, gpus - states["allocated"] - states["unallocated"] - states["free"]
        )
    return dict(out)


def host_states() -> dict[int, dict[str, int]]:
    """cluster id -> number of hosts in each state (every state, zeros included)."""
    out: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(Host.State.values, 0))
    for cluster_id, state, n in Host.objects.values("cluster_id", "state").annotate(
        n=Count("id")
    ).values_list("cluster_id", "state", "n"):
        out[cluster_id][state] = n
    return dict(out)


def pending_by_budget() -> dict[tuple[int, int], tuple[int, int]]:
    """(cluster id, budget id) -> (pending workloads, their GPUs)."""
    return {
        (cluster_id, budget_id): (n, gpus or 0)
        for cluster_id, budget_id, n, gpus in Workload.objects.filter(
            state=Workload.State.PENDING
        ).values("cluster_id", "budget_id").annotate(n=Count("id"), gpus=Sum("gpus"))
        .values_list("cluster_id", "budget_id", "n", "gpus")
    }


def tick_outage(cluster, now=None) -> str:
    """A warning when the loop has not ticked a Slurm cluster without accounting for longer
    than Slurm's ``MinJobAge``: jobs that ended meanwhile have left ``squeue``, and the next
    tick can only count their runs lost. "" when nothing is at risk."""
    facts = cluster.backend_facts or {}
    if cluster.backend != "slurm" or facts.get("accounting", True):
        return ""
    last = (OccupancySample.objects.filter(cluster=cluster).order_by("-at")
            .values_list("at", flat=True).first())
    if last is None:
        return ""
    silent = ((now or timezone.now()) - last).total_seconds()
    limit = int(facts.get("min_job_age") or 300)
    if silent <= limit:
        return ""
    return (
        f"No scheduling tick on {cluster.name} for {silent / 60:.0f} min, longer than Slurm's "
        f"MinJobAge ({limit} s), and this Slurm keeps no accounting: jobs that ended meanwhile "
        "have left squeue, so the next tick will count their runs lost (resumable workloads "
        "run again, the others end FAILED, both charged until then). Start the workers."
    )
