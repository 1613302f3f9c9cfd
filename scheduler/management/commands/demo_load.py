"""Keep the demo clusters busy: replay a slice of the public Philly trace, accelerated, as
submissions of the demo's researchers (portal/demo.py). The beat's ticks do the rest.

The trace ships with the repository (``data/traces/philly_vc.csv.gz``).
The rule that turns a trace job into a workload is ``scheduler.replay`` (the demo's seeded
history uses the same one), seeded and printed at start:

* thinning: a seeded ``--fraction`` of jobs is kept, by hash of the job id (Philly ran on
  2,816 GPUs at low average use; half its jobs keep the demo's 320 GPUs contended);
* cluster: a seeded 20% of jobs go to b200, the rest to h100 (by hash of the job id);
* budget: each job draws a leaf that has members (seeded by its job id), weighted by the
  leaf's fraction of the job's cluster (2% when it has no allocation there) times a seeded
  activity factor of the leaf between 0.5 and 2: every funded team gets work roughly in
  proportion to its budget, some more, some less (one Philly VC submits half the trace: a
  VC -> leaf mapping would put nearly everything on one budget);
* user: a seeded draw among the leaf's members;
* GPUs: the job's GPUs, at most ``--max-gpus``;
* time: ``--speed`` x faster than the trace: waits, durations and minimum runtimes are divided
  by it (``expected_duration`` is what the simulated fleet runs); when the trace runs out the
  replay starts over from ``--start-day``;
* contract: debug jobs (<= 2 GPUs, <= 15 min of work) declare 15 min; a seeded 10% are
  unallocated (min_runtime 0); the rest declare min(duration, 8 h); a seeded 80% are
  resumable; a budget without allocation on the chosen cluster submits unallocated work.

    manage.py demo_load [--speed 60] [--start-day 30.4] [--fraction 0.5] [--seed 0]
                        [--failure-rate 1.0] [--once] [--limit N] [--from-start]

A restarted load (after a crash, or a new ``make run``) carries on after the last job it
submitted, instead of submitting the same morning again.

Stops cleanly on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import itertools
import signal
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from budgets.models import Allocation
from fleet.models import Cluster
from scheduler import services
from scheduler.models import Workload
from scheduler.replay import START_DAY, TRACE, Rule, read_jobs


def timetable(jobs: list, start: float, speed: float, repeat: bool, resume_at: int = 0):
    """``(due, job)``: when each job is submitted, in seconds from the replay's start. With
    ``repeat`` the trace starts over, a minute after its last job, whenever it runs out (at
    60x the trace's days 30 to 109 last 31 hours): the demo never goes quiet. ``resume_at``:
    the first lap begins with that job, due at once (a restarted load carries on)."""
    if not jobs:
        return
    lap = (jobs[-1].submit - start) / speed + 60
    skipped = (jobs[resume_at].submit - start) / speed
    for number in itertools.count() if repeat else range(1):
        for job in jobs[resume_at:] if number == 0 else jobs:
            yield number * lap + (job.submit - start) / speed - skipped, job


def resume_index(jobs: list, clusters) -> int:
    """Where a restarted load carries on: after the job of the last workload submitted on the
    demo clusters, when that workload is one of this replay's (0: from the start)."""
    last = (Workload.objects.filter(cluster__in=clusters).order_by("-submitted", "-pk")
            .values_list("name", flat=True).first())
    index = {f"{job.vc}/{job.job_id}": i for i, job in enumerate(jobs)}.get(last)
    return 0 if index is None or index + 1 == len(jobs) else index + 1


def wait_until(deadline: float, stopping: list, clock=time.monotonic, sleep=time.sleep) -> None:
    """Sleep until ``clock()`` reaches ``deadline`` (or ``stopping`` fills), a second at most
    at a time so that a signal is heard. The clock is read once per nap: the time left can
    run out between two readings, and ``sleep`` refuses a negative length."""
    while not stopping:
        left = deadline - clock()
        if left <= 0:
            return
        sleep(min(1.0, left))


class Command(BaseCommand):
    help = ("Replay a slice of the Philly trace, accelerated, onto the demo budgets: each job "
            "draws a leaf with members, weighted by the leaf's fraction of the job's cluster "
            "times a seeded activity factor (0.5-2), and one of its members (seeded by the job "
            "id); see scheduler/replay.py.")

    def add_arguments(self, parser):
        parser.add_argument("--speed", type=float, default=60.0)
        parser.add_argument("--start-day", type=float, default=START_DAY,
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
        parser.add_argument("--from-start", action="store_true",
                            help="replay from --start-day even when an earlier run of the load "
                                 "submitted some of it (default: carry on after its last job)")

    def handle(self, *args, **o):
        if not TRACE.exists():
            raise CommandError(f"{TRACE} not found: the demo load replays it")
        clusters = {c.name: c for c in Cluster.objects.filter(name__in=["h100", "b200"])}
        if "h100" not in clusters:
            raise CommandError("no demo clusters: run `manage.py seed_demo` first")
        if o["failure_rate"] is not None:
            for cluster in clusters.values():
                cluster.backend_config = {**cluster.backend_config,
                                          "failure_rate_per_host_day": o["failure_rate"],
                                          "repair_success": 0.7}
                cluster.save(update_fields=["backend_config"])
        speed, seed = o["speed"], o["seed"]
        rule = Rule(clusters, seed, o["max_gpus"])
        if not rule.leaves:
            raise CommandError("no leaf budget has members: run `manage.py seed_demo` first")
        allocated = set(Allocation.objects.filter(cluster__in=clusters.values())
                        .values_list("node_id", "cluster__name"))
        start = o["start_day"] * 86400
        jobs = read_jobs(start, None, seed, o["fraction"])
        resume_at = 0 if o["from_start"] else resume_index(jobs, clusters.values())
        self.stdout.write(
            f"demo load: {len(jobs)} jobs from {TRACE.name} day {o['start_day']:g} on, "
            f"{speed:g}x faster, seed {seed}; VCs -> leaves: none, each job draws its leaf "
            f"and member (weights {rule.describe()})"
            + (f"; carrying on from job {resume_at + 1} ({jobs[resume_at].job_id}), after "
               "the last one submitted" if resume_at else "")
        )
        stopping = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.append(True))
        began = time.monotonic()
        submitted = 0
        for due, job in timetable(jobs, start, speed, repeat=not o["once"],
                                  resume_at=resume_at):
            if o["once"] and due > o["window"]:
                break
            if not o["once"]:
                wait_until(began + due, stopping)
            if stopping:
                break
            if not o["once"]:
                close_old_connections()  # a long-running process: drop stale connections
            self.submit(rule.submission(job, allocated), clusters, speed)
            submitted += 1
            if o["limit"] and submitted >= o["limit"]:
                break
        self.stdout.write(f"demo load: {submitted} workloads submitted")

    def submit(self, sub, clusters, speed: float) -> None:
        cluster = clusters[sub.cluster]
        declared = sub.min_runtime
        min_runtime = 0 if declared == 0 else max(1, round(declared / speed))
        min_runtime = min(min_runtime, cluster.max_min_runtime)
        try:
            services.submit(
                sub.user, name=sub.name, budget=sub.node, cluster=cluster, gpus=sub.gpus,
                min_runtime=min_runtime, resumable=sub.resumable, command=sub.command,
                expected_duration=max(1, round(sub.job.duration / speed)),
            )
        except services.SubmissionError as error:
            self.stderr.write(f"skipped {sub.job.job_id}: {error}")
