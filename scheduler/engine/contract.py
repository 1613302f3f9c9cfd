"""The scheduling contract: what a workload may ask for and what it is promised.

A workload declares ``gpus``, a budget leaf, ``min_runtime`` and ``resumable``.

* ``min_runtime > 0``: **allocated**. Charged to the budget, **protected** from rebalancing
  until ``started + min_runtime``, **preemptible** after that.
* ``min_runtime = 0``: **unallocated**. Free, never charged, preemptible at any moment by any
  allocated request.

A budget without an allocation on the cluster may only run unallocated work there; asking
for more is refused with a clear message, never silently downgraded.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from .model import BudgetTree, Host, Params, Run, Workload
from .wording import quantity


class ContractError(ValueError):
    """A workload the cluster will not accept, with a message meant for the person submitting."""


def is_allocated(workload: Workload) -> bool:
    return workload.min_runtime > 0


def protected_until(workload: Workload, started: float) -> float:
    """End of the protection window of a run started at ``started`` (unallocated: none)."""
    return started + workload.min_runtime


def protected(run: Run, now: float) -> bool:
    return run.workload.min_runtime > 0 and now < run.protected_until


def preemptible(run: Run, now: float) -> bool:
    return not protected(run, now)


_gpus_of = attrgetter("gpus")


def placeable(gpus: int, hosts: Iterable[Host]) -> bool:
    """Whether some healthy day of the cluster could hold ``gpus``: one host when it fits on
    the largest host, otherwise whole hosts (see ``placement``)."""
    sizes = list(map(_gpus_of, hosts))  # in C: asked at every submission
    if not sizes or gpus < 1:
        return False
    return gpus <= max(sizes) or gpus <= sum(sizes)


def validate(workload: Workload, hosts: Iterable[Host], tree: BudgetTree, params: Params) -> None:
    """Raise ``ContractError`` if ``workload`` breaks the contract of this cluster."""
    hosts = list(hosts)
    if int(workload.gpus) != workload.gpus or workload.gpus < 1:
        raise ContractError(f"a workload needs at least 1 GPU (asked for {workload.gpus})")
    if not placeable(workload.gpus, hosts):
        total = sum(h.gpus for h in hosts)
        raise ContractError(
            f"{quantity(workload.gpus, 'GPU')} can never be placed: the cluster has "
            f"{quantity(total, 'GPU')}"
        )
    if not 0 <= workload.min_runtime <= params.max_min_runtime:
        raise ContractError(
            f"min_runtime must be between 0 and {params.max_min_runtime / 3600:g} h "
            f"on this cluster (asked for {workload.min_runtime / 3600:g} h)"
        )
    if workload.min_runtime > 0 and tree.fraction(workload.budget) <= 0:
        raise ContractError(
            f"{workload.budget} has no allocation on this cluster: it can only run "
            "unallocated work here (min_runtime 0, preemptible at any moment)"
        )


# ---------------------------------------------------------------------------------------------
# Workload classes: how waits are reported (the seeds' debug test), in the simulator, the
# reports and the metrics alike.

DEBUG_MAX_GPUS = 2
DEBUG_MAX_MIN_RUNTIME = 15 * 60


def is_debug(gpus: int, min_runtime: float) -> bool:
    """Debug workload: few GPUs (<= 2) and an allocated min_runtime of at most 15 minutes.

    Unallocated work (min_runtime 0) is free and preemptible at any moment; it is counted in its
    own class, not as debug (a 1-2 minute wait is a goal only for funded debug sessions).
    """
    return gpus <= DEBUG_MAX_GPUS and 0 < min_runtime <= DEBUG_MAX_MIN_RUNTIME


def workload_class(gpus: int, min_runtime: float, gpus_per_host: int) -> str:
    """unallocated, debug, small (fits one host) or large (spans hosts)."""
    if min_runtime <= 0:
        return "unallocated"
    if is_debug(gpus, min_runtime):
        return "debug"
    return "small" if gpus <= gpus_per_host else "large"
