"""The idle policy, optional per cluster: allocated work whose GPUs have stayed idle past the
cluster's idle period is preempted once its minimum runtime is over, so the GPUs it squats go
back to the queue. The scheduling contract still holds: protected work is never touched,
unallocated work is left alone (it is free and preemptible by anyone already), and the usual
grace period lets the run checkpoint; a resumable workload is requeued.

Which runs are idle is the fleet's telemetry's business (the live loop reads it from the
utilization collection): this module only takes, per run, since when it has been idle.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ClusterState, Preempt, Run
from .traces import seeded_unit

# An interactive session left open works for 10 to 40 minutes, then its GPUs sit idle.
IDLE_AFTER = (600.0, 2400.0)


def goes_idle_after(seed: int, workload_id: str, idle_share: float) -> float | None:
    """Seconds into each of its runs after which a workload's GPUs go idle (a session left
    open), for the seeded ``idle_share`` of workloads; None for the others (busy to the end).
    The simulator's model of squatting."""
    if idle_share <= 0 or seeded_unit(seed, "idle-session", workload_id) >= idle_share:
        return None
    low, high = IDLE_AFTER
    return low + (high - low) * seeded_unit(seed, "idle-after", workload_id)


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    period: float  # seconds below the threshold before a run counts as idle
    threshold: float  # busy fraction below which GPUs count as idle (for the reason)


def idle_preemptions(state: ClusterState, idle_since: dict[Run, float], policy: IdlePolicy
                     ) -> list[Preempt]:
    """Preempt every allocated, unsignalled run idle for the policy's period and past its
    minimum runtime; longest idle first."""
    idle = [
        (since, run) for run, since in idle_since.items()
        if run.allocated and run.signalled_at is None and run.preemptible(state.now)
        and state.now - since >= policy.period
    ]
    idle.sort(key=lambda item: (item[0], item[1].workload.id, item[1].number))
    return [Preempt(run, reason=idle_reason(run, since, policy)) for since, run in idle]


def idle_reason(run: Run, since: float, policy: IdlePolicy) -> str:
    minutes = (run.protected_until - run.started) / 60
    return (f"preempted by the cluster's idle policy: its {run.gpus} GPU(s) stayed below "
            f"{policy.threshold * 100:.0f}% busy for {policy.period / 60:g} min and it is past "
            f"its minimum runtime of {minutes:g} min")
