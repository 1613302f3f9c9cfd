"""Keep the demo clusters busy: replay a slice of the public Philly trace, accelerated, as
submissions of the demo's researchers (portal/demo.py). The beat's ticks do the rest.

The trace is read in place (``../shared/traces/philly_vc.csv`` relative to the project root).
The rule that turns a trace job into a workload is seeded and printed at start:

* thinning: a seeded ``--fraction`` of jobs is kept, by hash of the job id (Philly ran on
  2,816 GPUs at low average use; half its jobs keep the demo's 320 GPUs contended);
* budget: each Philly VC maps to one demo leaf that has members (seeded hash of the VC name),
  and the job is submitted by the first member of that leaf (alphabetical);
* cluster: a seeded 20% of jobs go to b200, the rest to h100 (by hash of the job id);
* GPUs: the job's GPUs, at most ``--max-gpus``;
* time: ``--speed`` x faster than the trace: waits, durations and minimum runtimes are divided
  by it (``expected_duration`` is what the simulated fleet runs);
* contract: debug jobs (<= 2 GPUs, <= 15 min of work) declare 15 min; a seeded 10% are
  unallocated (min_runtime 0); the rest declare min(duration, 8 h); a seeded 80% are
  resumable; a budget without allocation on the chosen cluster submits unallocated work.

    manage.py demo_load [--speed 60] [--start-day 30.4] [--fraction 0.5] [--seed 0]
                        [--failure-rate 1.0] [--once] [--limit N]

Stops cleanly on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import csv
import signal
import time
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from budgets.models import Allocation, BudgetNode
from scheduler import services
from scheduler.engine.traces import TRACES_DIR, seeded_unit, vc_name
from scheduler.models import Cluster

TRACE = TRACES_DIR / "philly_vc.csv"
DEBUG_GPUS, DEBUG_SECONDS = 2, 15 * 60
MAX_MIN_RUNTIME = 8 * 3600


@dataclass(slots=True)
class Job:
    job_id: str
    submit: float
    duration: float
    gpus: int
    vc: str


class Command(BaseCommand):
    help = "Replay a slice of the Philly trace, accelerated, onto the demo budgets."

    def add_arguments(self, parser):
        parser.add_argument("--speed", type=float, default=60.0)
        parser.add_argument("--start-day", type=float, default=30.4,
                            help="trace day the replay starts at (default: day 30 at 09:36, "
                                 "half a minute before its morning rush at 60x: the demo is "
                                 "contended at once instead of after ten quiet minutes)")
        parser.add_argument("--fraction", type=float, default=0.5)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--max-gpus", type=int, default=32)
        parser.add_argument("--failure-rate", type=float, default=None,
                            help="host failures per host-day for the demo clusters' simulated "
                                 "fleet (real days; default: leave the clusters' setting)")
        parser.add_argument("--once", action="store_true",
                            help="submit what is due in the first --window seconds and exit")
        parser.add_argument("--window", type=float, default=60.0)
        parser.add_argument("--limit", type=int, default=None, help="stop after N submissions")

    def handle(self, *args, **o):
        if not TRACE.exists():
            raise CommandError(f"{TRACE} not found: the demo load reads the trace in place")
        clusters = {c.name: c for c in Cluster.objects.filter(name__in=["h100", "b200"])}
        if "h100" not in clusters:
            raise CommandError("no demo clusters: run `manage.py seed_demo` first")
        if o["failure_rate"] is not None:
            for cluster in clusters.values():
                cluster.backend_config = {**cluster.backend_config,
                                          "failure_rate_per_host_day": o["failure_rate"],
                                          "repair_success": 0.7}
                cluster.save(update_fields=["backend_config"])
        leaves = self.leaves()
        speed, seed = o["speed"], o["seed"]
        start = o["start_day"] * 86400
        jobs = self.read(start, seed, o["fraction"])
        self.stdout.write(
            f"demo load: {len(jobs)} jobs from {TRACE.name} day {o['start_day']:g} on, "
            f"{speed:g}x faster, seed {seed}; VCs -> leaves: "
            + ", ".join(f"{vc}->{leaves[self.pick(vc, seed, len(leaves))][0].path}"
                        for vc in sorted({j.vc for j in jobs}))
        )
        stopping = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.append(True))
        began = time.monotonic()
        submitted = 0
        for job in jobs:
            due = (job.submit - start) / speed
            if o["once"] and due > o["window"]:
                break
            while not o["once"] and not stopping and time.monotonic() - began < due:
                time.sleep(min(1.0, due - (time.monotonic() - began)))
            if stopping:
                break
            if not o["once"]:
                close_old_connections()  # a long-running process: drop stale connections
            self.submit(job, leaves, clusters, o)
            submitted += 1
            if o["limit"] and submitted >= o["limit"]:
                break
        self.stdout.write(f"demo load: {submitted} workloads submitted")

    @staticmethod
    def pick(key: str, seed: int, n: int) -> int:
        return int(seeded_unit(seed, "vc-leaf", key) * n)

    def leaves(self) -> list[tuple[BudgetNode, User]]:
        out = []
        for node in BudgetNode.objects.filter(children=None).prefetch_related("members"):
            members = sorted(node.members.all(), key=lambda u: u.username)
            if members:
                out.append((node, members[0]))
        if not out:
            raise CommandError("no leaf budget has members: run `manage.py seed_demo` first")
        return sorted(out, key=lambda pair: pair[0].path)

    def read(self, start: float, seed: int, fraction: float) -> list[Job]:
        jobs = []
        with TRACE.open(newline="") as fh:
            for row in csv.DictReader(fh):
                submit = float(row["submit_s"])
                if submit < start:
                    continue
                if seeded_unit(seed, "keep", row["job_id"]) >= fraction:
                    continue
                jobs.append(Job(row["job_id"], submit, float(row["duration_s"]),
                                int(row["num_gpus"]), vc_name(row["group"])))
        return jobs

    def submit(self, job: Job, leaves, clusters, o) -> None:
        seed, speed = o["seed"], o["speed"]
        node, user = leaves[self.pick(job.vc, seed, len(leaves))]
        name = "b200" if "b200" in clusters and seeded_unit(seed, "cluster", job.job_id) < 0.2 \
            else "h100"
        cluster = clusters[name]
        gpus = max(1, min(job.gpus, o["max_gpus"]))
        if gpus <= DEBUG_GPUS and job.duration <= DEBUG_SECONDS:
            declared = DEBUG_SECONDS
        elif seeded_unit(seed, "unallocated", job.job_id) < 0.1:
            declared = 0
        else:
            declared = min(job.duration, MAX_MIN_RUNTIME)
        if not Allocation.objects.filter(node=node, cluster=cluster).exists():
            declared = 0  # no allocation there: only unallocated work (said, not downgraded)
        min_runtime = 0 if declared == 0 else max(1, round(declared / speed))
        min_runtime = min(min_runtime, cluster.max_min_runtime)
        try:
            services.submit(
                user, name=f"{job.vc}/{job.job_id}", budget=node, cluster=cluster, gpus=gpus,
                min_runtime=min_runtime,
                resumable=seeded_unit(seed, "resumable", job.job_id) < 0.8,
                command=f"python train.py  # replay of {job.job_id}",
                expected_duration=max(1, round(job.duration / speed)),
            )
        except services.SubmissionError as error:
            self.stderr.write(f"skipped {job.job_id}: {error}")
