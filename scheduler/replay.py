"""The demo's rule that turns a job of the public Philly trace into a submission of the demo
institute (``portal/demo.py``): used by ``manage.py demo_load`` (the live load, accelerated)
and by the demo's seeded history (``scheduler.history``, the week before, in real time), so
the past and the present of the demo look like the same institute.

Every draw is ``traces.seeded_unit`` (same seed, same answer in any process):

* thinning: a seeded ``fraction`` of jobs is kept, by hash of the job id;
* cluster: a seeded 20% of jobs go to b200 (when it exists), the rest to h100;
* budget: a weighted draw per job over the leaves that have members. A leaf's weight on a
  cluster is its fraction of that cluster (the 35% rule; 2% when it has no allocation there:
  such a leaf submits only unallocated work there) times a seeded activity factor of the leaf
  between 0.5 and 2 (some teams are busier than their budget, others quieter): work spreads
  over every funded team roughly as their budgets say, with some over- and some under-used;
* user: a seeded draw among the leaf's members;
* GPUs: the job's GPUs, at most ``max_gpus``;
* contract: debug jobs (<= 2 GPUs, <= 15 min of work) declare 15 min; a seeded 10% are
  unallocated (min_runtime 0); the rest declare min(duration, 8 h); a seeded 80% are
  resumable; a budget without allocation on the chosen cluster submits unallocated work.
"""

from __future__ import annotations

import bisect
import csv
from dataclasses import dataclass
from pathlib import Path

from budgets.models import BudgetNode
from scheduler.engine.contract import DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME
from scheduler.engine.traces import PHILLY_TRACE, open_trace, seeded_unit, vc_name

TRACE = PHILLY_TRACE
START_DAY = 30.4  # the live load starts here (day 30, 09:36); the seeded history ends here
MAX_MIN_RUNTIME = 8 * 3600
B200_SHARE = 0.2
NO_ALLOCATION_WEIGHT = 0.02
ACTIVITY_MIN, ACTIVITY_MAX = 0.5, 2.0


@dataclass(slots=True)
class Job:
    job_id: str
    submit: float  # seconds from the trace start
    duration: float
    gpus: int
    vc: str


@dataclass(slots=True)
class Submission:
    job: Job
    cluster: str
    node: BudgetNode
    user: object  # django.contrib.auth User
    gpus: int
    min_runtime: float  # seconds of trace time: divide by the replay's speed
    resumable: bool

    @property
    def name(self) -> str:
        return f"{self.job.vc}/{self.job.job_id}"

    @property
    def command(self) -> str:
        return f"python train.py  # replay of {self.job.job_id}"


def read_jobs(start: float, end: float | None, seed: int, fraction: float,
              path: Path = TRACE) -> list[Job]:
    """The kept jobs submitted in ``[start, end)`` (trace seconds), in trace order."""
    jobs = []
    with open_trace(path) as fh:
        for row in csv.DictReader(fh):
            submit = float(row["submit_s"])
            if submit < start or (end is not None and submit >= end):
                continue
            if seeded_unit(seed, "keep", row["job_id"]) >= fraction:
                continue
            jobs.append(Job(row["job_id"], submit, float(row["duration_s"]),
                            int(row["num_gpus"]), vc_name(row["group"])))
    jobs.sort(key=lambda j: (j.submit, j.job_id))
    return jobs


def activity(seed: int, path: str) -> float:
    """A leaf's seeded activity factor in [0.5, 2): log-uniform, so as many teams are busier
    than their budget as quieter."""
    u = seeded_unit(seed, "activity", path)
    return ACTIVITY_MIN * (ACTIVITY_MAX / ACTIVITY_MIN) ** u


class Rule:
    """The mapping for the demo's current budget tree and clusters (read once)."""

    def __init__(self, clusters: dict, seed: int = 0, max_gpus: int = 32):
        from scheduler.engine_views import budget_tree

        self.seed, self.max_gpus = seed, max_gpus
        self.clusters = clusters  # name -> Cluster
        self.leaves: list[tuple[BudgetNode, list]] = []
        for node in BudgetNode.objects.filter(children=None).prefetch_related("members"):
            members = sorted(node.members.all(), key=lambda u: u.username)
            if members:
                self.leaves.append((node, members))
        self.leaves.sort(key=lambda pair: pair[0].path)
        self.weights: dict[str, list[float]] = {}
        self.cumulative: dict[str, list[float]] = {}
        for name, cluster in clusters.items():
            tree = budget_tree(cluster)
            weights = []
            for node, _ in self.leaves:
                fraction = tree.fraction(node.path)
                weights.append((fraction if fraction > 0 else NO_ALLOCATION_WEIGHT)
                               * activity(seed, node.path))
            self.weights[name] = weights
            running, total = [], 0.0
            for w in weights:
                total += w
                running.append(total)
            self.cumulative[name] = running

    def describe(self) -> str:
        parts = []
        for name in sorted(self.weights):
            total = sum(self.weights[name]) or 1.0
            parts.append(f"{name}: " + ", ".join(
                f"{node.path} {w / total:.0%}"
                for (node, _), w in zip(self.leaves, self.weights[name], strict=True)))
        return "; ".join(parts)

    def cluster_of(self, job: Job) -> str:
        if "b200" in self.clusters and seeded_unit(self.seed, "cluster", job.job_id) < B200_SHARE:
            return "b200"
        return "h100"

    def leaf_index(self, cluster: str, job_id: str) -> int:
        running = self.cumulative[cluster]
        draw = seeded_unit(self.seed, "leaf", job_id) * running[-1]
        return min(bisect.bisect_right(running, draw), len(running) - 1)

    def submission(self, job: Job, allocated: set[tuple[int, str]]) -> Submission:
        """``allocated``: the (node id, cluster name) pairs that have an allocation."""
        name = self.cluster_of(job)
        node, members = self.leaves[self.leaf_index(name, job.job_id)]
        user = members[int(seeded_unit(self.seed, "user", job.job_id) * len(members))]
        gpus = max(1, min(job.gpus, self.max_gpus))
        if gpus <= DEBUG_MAX_GPUS and job.duration <= DEBUG_MAX_MIN_RUNTIME:
            declared = DEBUG_MAX_MIN_RUNTIME
        elif seeded_unit(self.seed, "unallocated", job.job_id) < 0.1:
            declared = 0
        else:
            declared = min(job.duration, MAX_MIN_RUNTIME)
        if (node.pk, name) not in allocated:
            declared = 0  # no allocation there: only unallocated work (said, not downgraded)
        return Submission(job, name, node, user, gpus, declared,
                          seeded_unit(self.seed, "resumable", job.job_id) < 0.8)
