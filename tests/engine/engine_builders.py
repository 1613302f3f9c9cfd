"""Small builders for engine tests: hosts, workloads, runs and states written by hand."""

from __future__ import annotations

from hypothesis import strategies as st

from scheduler.engine import (
    BudgetTree,
    ClusterState,
    Host,
    HostState,
    Params,
    Placement,
    Run,
    Workload,
    schedule,
)

HOUR = 3600.0
DAY = 86400.0


def hosts(n: int, gpus: int = 8, groups: int = 1, state: HostState = HostState.AVAILABLE):
    """h0, h1, ... with ``gpus`` GPUs each, spread round-robin over groups g0, g1, ..."""
    return [Host(f"h{i}", gpus, group=f"g{i % groups}", state=state) for i in range(n)]


def job(
    id: str,
    budget: str = "a/a1",
    gpus: int = 1,
    min_runtime: float = HOUR,
    resumable: bool = True,
    submitted: float = 0.0,
    duration: float | None = None,
) -> Workload:
    return Workload(id, budget, gpus, min_runtime, resumable, submitted, duration=duration)


def run(
    workload: Workload,
    host: str,
    indices,
    started: float = 0.0,
    signalled_at: float | None = None,
    slots=None,
) -> Run:
    placement = Placement(tuple(slots) if slots else ((host, tuple(indices)),))
    return Run(
        workload,
        started,
        placement,
        protected_until=started + workload.min_runtime,
        signalled_at=signalled_at,
    )


def tree(**shares) -> BudgetTree:
    """tree(a=50, a__a1=1) -> paths "a", "a/a1"."""
    return BudgetTree.from_shares({k.replace("__", "/"): v for k, v in shares.items()})


def state(now, host_list, running=(), pending=(), usage=None, capacity=None) -> ClusterState:
    gpus = sum(h.gpus for h in host_list)
    return ClusterState(
        now=now,
        hosts=list(host_list),
        running=list(running),
        pending=list(pending),
        usage=dict(usage or {}),
        capacity=gpus * 7 * DAY if capacity is None else capacity,
    )


def one_pass(st: ClusterState, t: BudgetTree, **params):
    return schedule(st, t, Params(**params))


def started(result) -> dict[str, Placement]:
    from scheduler.engine import Start

    return {d.workload.id: d.placement for d in result.decisions if isinstance(d, Start)}


def preempted(result) -> list[str]:
    from scheduler.engine import Preempt

    return [d.run.workload.id for d in result.decisions if isinstance(d, Preempt)]


@st.composite
def budget_shares(draw, programs=(1, 3), projects=(1, 3), least=0, project="l"):
    """Shares of a random two-level budget tree for property tests: programs ``p0``, ``p1``...
    with projects ``p0/l0``... (``project`` names them), each ``least`` to 5 shares (0: a
    budget without an allocation)."""
    shares = {}
    for p in range(draw(st.integers(*programs))):
        shares[f"p{p}"] = draw(st.integers(least, 5))
        for leaf in range(draw(st.integers(*projects))):
            shares[f"p{p}/{project}{leaf}"] = draw(st.integers(least, 5))
    return shares
