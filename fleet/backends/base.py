"""The backend interface between the live loop and GPU hosts.

The database is the source of truth: the loop decides in one transaction and tells the
backend afterwards (``launch``/``signal``/``stop`` run after commit), then learns what
happened out there by polling (``poll_runs``, ``poll_hosts``). A backend therefore never
decides anything; it carries out and reports. The shape follows Slurm, the first real
backend planned:

==============  ==============================================================
method          Slurm
==============  ==============================================================
launch          ``sbatch -w host1,host2 --gres=gpu:N --job-name=<prefix>-<run id>``
                (job id -> run.backend_id, written at once)
signal          ``scancel --signal=TERM --full <job>``: checkpoint, grace starts (no cancel)
stop            ``scancel <job>``
poll_runs       ``squeue --json``, then ``sacct`` for jobs that left squeue: final state,
                exit code, end time
poll_hosts      ``sinfo --json`` (node state, reason, last busy/heartbeat)
drain / resume  ``scontrol update NodeName=... State=DRAIN Reason=...`` / ``State=RESUME``
repair          site hook (reboot, GPU reset, health check); True when healthy again
reconcile       every tick: jobs Slurm lost (-> Lost), runs that never reached Slurm
                (-> not_launched), jobs nobody owns (cancel or report), when jobs really
                started, GPU indices Slurm chose, node drain states
==============  ==============================================================

Runs and workloads belong to the scheduler, above the fleet: a backend receives them from
the loop and reads only what it needs to carry out (ids, GPUs, the command, the declared
duration), and asks the scheduler about their past through ``earlier_work``, an answer the
scheduler registers when Django starts (``register_earlier_work``).

``BackendUnavailable`` (Slurm unreachable) aborts the cluster's tick: the loop records the
message on the cluster (``Cluster.backend_error``) and the other clusters go on.

Launches are two-phase. The tick commits the run (the intent: the run, its placement, and so
the job's unique name) before ``launch`` is called, and the backend id is recorded as soon as
``launch`` returns it. A launch that raises ``BackendUnavailable`` or ``LaunchRefused`` never
reached the resource manager; after a crash, ``reconcile`` looks every run without a backend
id up by its name, out there and in accounting, and reports those it finds nowhere in
``not_launched``. Either way the scheduler takes the run back (it never started: not failed,
not charged) once it knows no launch is still in flight.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

# workload ids -> {workload id: seconds of work done in its ended runs}; see earlier_work
EarlierWork = Callable[[Iterable[int]], dict[int, float]]
_earlier_work: list[EarlierWork] = []


def register_earlier_work(answer: EarlierWork) -> None:
    """The scheduler tells the fleet how to learn what a workload's ended runs did."""
    _earlier_work[:] = [answer]


def earlier_work(workload_ids: Iterable[int]) -> dict[int, float]:
    """Seconds of work each workload did in its ended runs (until they were signalled, or
    ended): a resumable workload resumes from its checkpoint."""
    if not _earlier_work:
        raise RuntimeError("no scheduler registered earlier_work (is 'scheduler' installed?)")
    return _earlier_work[0](workload_ids)


@dataclass(frozen=True, slots=True)
class Finished:
    """A run that ended on its own (completed or failed) at ``at``; ``backend_id`` when the
    run had none recorded (its launch was cut short before the id was written)."""

    run_id: int
    at: datetime
    exit_code: int
    message: str = ""
    backend_id: str = ""


@dataclass(frozen=True, slots=True)
class HealthSignal:
    """Something wrong with a host. ``fatal`` (lost heartbeat, host gone): its runs are lost.
    Otherwise (GPU errors, ECC, XID) the host is drained and its work leaves by the contract."""

    host: str
    kind: str  # "lost_heartbeat" | "gpu_error"
    at: datetime
    reason: str

    @property
    def fatal(self) -> bool:
        return self.kind == "lost_heartbeat"


@dataclass(slots=True)
class HostHealth:
    heartbeats: dict[str, datetime] = field(default_factory=dict)  # host name -> last seen
    signals: list[HealthSignal] = field(default_factory=list)


class LaunchRefused(RuntimeError):
    """The resource manager answered a launch with a refusal (an invalid request): the run
    never started, and launching it again would be refused again."""


class BackendUnavailable(RuntimeError):
    """The resource manager cannot be reached (Slurm down, no configuration, timeout). The
    loop abandons the cluster's tick, records the message on the cluster for its page, and
    keeps scheduling the other clusters."""


@dataclass(frozen=True, slots=True)
class Lost:
    """A live run the resource manager no longer has (its job vanished, never started, or
    died with its node): requeued if resumable, else FAILED."""

    run_id: int
    at: datetime
    reason: str
    end_reason: str = "failed"  # Run.EndReason: "host_failure" when its node died


@dataclass(slots=True)
class Reconciliation:
    """What ``reconcile`` found while putting the backend's view and Timeshare's in agreement.

    ``lost``: runs to end (requeue or fail). ``placements``: where live runs really hold GPUs
    ({run id: {host: [index, ...]}}, when the resource manager picks indices itself).
    ``backend_ids``: backend ids found for runs that had none recorded yet. ``started``: when
    the resource manager really started live runs. ``not_launched``: runs with no backend id
    that the resource manager has no trace of, with why ({run id: reason}; the scheduler takes
    them back unless a launch is still in flight). ``facts``: what the page should know about
    the backend (e.g. ``{"accounting": False, "min_job_age": 300}``). ``notes``: what was put
    right (logged). ``problems``: what needs a human (shown on the cluster page)."""

    lost: list[Lost] = field(default_factory=list)
    placements: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    backend_ids: dict[int, str] = field(default_factory=dict)
    started: dict[int, datetime] = field(default_factory=dict)
    not_launched: dict[int, str] = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class FleetBackend(ABC):
    """One cluster's hosts. Constructed per tick from ``cluster`` (cheap, no I/O)."""

    name = "abstract"

    def __init__(self, cluster):
        self.cluster = cluster
        self.config = dict(cluster.backend_config or {})

    @abstractmethod
    def launch(self, run, placement) -> str:
        """Start ``run`` on ``placement`` (engine Placement); return the backend's id. Raise
        ``BackendUnavailable`` when the resource manager cannot be reached and
        ``LaunchRefused`` when it refuses the run: both mean it never started."""

    @abstractmethod
    def signal(self, run) -> None:
        """Ask ``run`` to checkpoint and leave: its grace period starts."""

    @abstractmethod
    def stop(self, run) -> None:
        """End ``run`` now (grace over, cancelled, host drained)."""

    @abstractmethod
    def poll_runs(self, runs, now: datetime) -> list[Finished]:
        """Of the live ``runs`` (Run rows with their workload), those that ended by ``now``."""

    @abstractmethod
    def poll_hosts(self, hosts, since: datetime, now: datetime) -> HostHealth:
        """Heartbeats and health signals of ``hosts`` between ``since`` and ``now``."""

    def known_hosts(self) -> set[str] | None:
        """Names of the hosts this backend has (a cluster switched to it retires the others);
        None when it has no inventory of its own and runs whatever hosts the cluster lists."""
        return None

    def drain(self, host, reason: str) -> None:  # noqa: B027 - optional for a backend
        """Tell the resource manager to place nothing new on ``host``."""

    def resume(self, host) -> None:  # noqa: B027 - optional for a backend
        """Tell the resource manager ``host`` takes work again."""

    @abstractmethod
    def repair(self, host, now: datetime) -> bool:
        """Run the automatic repair and health check; True when the host is healthy."""

    def reconcile(self, runs, hosts, now: datetime) -> Reconciliation:
        """Every tick, after ``poll_runs``: put the backend's view and Timeshare's in agreement
        (``runs``: the live runs with their workload; ``hosts``: the cluster's hosts). A
        backend that cannot disagree with the database (the simulated fleet) has nothing to
        do."""
        return Reconciliation()

