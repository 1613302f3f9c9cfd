"""Benchmark (not a test): one end-to-end tick of the live loop on PostgreSQL with 1,024 GPUs
(128 hosts x 8), 3,000 pending and 600 running workloads. Target: <= 300 ms.

    .venv/bin/python bench/tick.py [--ticks N] [--profile]

The database is PostgreSQL from DATABASE_URL when it is one, else
postgres://postgres@127.0.0.1:5432/postgres; the benchmark builds its state in a throwaway
database (``test_<name>``) and drops it afterwards.

What a tick does here (scheduler.loop): poll the simulated fleet, charge usage and capacity
rollups, read a week of rollups, load 128 hosts, 600 runs with their GPUs and 3,000 pending
workloads into the engine, schedule, apply, write queue positions, record a sample. The
cold tick is the first on a fresh state (every pending workload gets its queue position
written); the measured ticks then run every 5 simulated seconds on that state, each rolled
back afterwards so that all see the same state, as the loop does every few seconds. The cold
tick signals unallocated runs to make room; their 30 s grace ends before the sixth measured
tick, so the ticks from then on stop those runs and start the work waiting for them: both
kinds are reported apart, under the median of all.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
    os.environ["DATABASE_URL"] = DEFAULT_URL
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from budgets.models import Allocation, BudgetNode  # noqa: E402
from fleet.models import CapacityRollup, Cluster, Host  # noqa: E402
from scheduler import loop  # noqa: E402
from scheduler.models import OccupancySample, Run, RunGPU, UsageRollup, Workload  # noqa: E402

HOSTS, GPUS_PER_HOST, PENDING, RUNNING = 128, 8, 3000, 600


def build(now) -> Cluster:
    rng = random.Random(7)
    user = User.objects.create_user("bench")
    cluster = Cluster.objects.create(
        name="bench", gpu_type="H100", created=now - timedelta(days=30),
        backend_config={"failure_rate_per_host_day": 0.02, "default_duration": 10 * 86400},
    )
    hosts = Host.objects.bulk_create(
        Host(cluster=cluster, name=f"gpu-{i:03d}", gpus=GPUS_PER_HOST, group=f"rail-{i % 8}",
             last_heartbeat=now)
        for i in range(HOSTS)
    )
    root = BudgetNode.objects.create(slug="org", name="org", kind="organisation")
    leaves = []
    for p in range(4):
        program = BudgetNode.objects.create(parent=root, slug=f"prog-{p}", name=f"P{p}",
                                            kind="program")
        Allocation.objects.create(node=program, cluster=cluster, shares=10 + 10 * p)
        for j in range(4):
            leaf = BudgetNode.objects.create(parent=program, slug=f"proj-{j}", name=f"J{j}",
                                             kind="project")
            Allocation.objects.create(node=leaf, cluster=cluster, shares=1 + j)
            leaves.append(leaf)
    # a week of usage and capacity rollups
    first = loop.floor_hour(now) - timedelta(hours=168)
    UsageRollup.objects.bulk_create(
        UsageRollup(cluster=cluster, budget=leaf, hour=first + timedelta(hours=h),
                    gpu_seconds=rng.uniform(0, 60) * 3600)
        for leaf in leaves for h in range(168)
    )
    CapacityRollup.objects.bulk_create(
        CapacityRollup(cluster=cluster, hour=first + timedelta(hours=h),
                       gpu_seconds=HOSTS * GPUS_PER_HOST * 3600.0)
        for h in range(168)
    )
    # 600 running workloads (400 x 1 GPU, 150 x 2, 50 x 4: 900 GPUs), packed onto hosts
    sizes = [1] * 400 + [2] * 150 + [4] * 50
    rng.shuffle(sizes)
    running = Workload.objects.bulk_create(
        Workload(name=f"run-{i}", owner=user, budget=rng.choice(leaves), cluster=cluster, gpus=g,
                 min_runtime=rng.choice([0, 3600, 4 * 3600, 8 * 3600]), resumable=rng.random() < .8,
                 command="python train.py", state="RUNNING",
                 submitted=now - timedelta(hours=rng.uniform(1, 5)))
        for i, g in enumerate(sizes)
    )
    runs, slots = [], []
    host_index, free = 0, GPUS_PER_HOST
    for w in running:
        if free < w.gpus:
            host_index, free = host_index + 1, GPUS_PER_HOST
        started = w.submitted + timedelta(minutes=5)
        run = Run(workload=w, number=1, allocated=w.min_runtime > 0, gpus=w.gpus, started=started,
                  protected_until=started + timedelta(seconds=w.min_runtime + 8 * 3600),
                  accounted_until=now - timedelta(seconds=5))
        runs.append(run)
        first_gpu = GPUS_PER_HOST - free
        slots.append([(hosts[host_index], first_gpu + k) for k in range(w.gpus)])
        free -= w.gpus
    Run.objects.bulk_create(runs)
    RunGPU.objects.bulk_create(
        RunGPU(run=run, host=host, index=index)
        for run, pairs in zip(runs, slots, strict=True) for host, index in pairs
    )
    Workload.objects.bulk_create(
        Workload(name=f"wait-{i}", owner=user, budget=rng.choice(leaves), cluster=cluster,
                 gpus=rng.choice([1, 1, 1, 2, 2, 4, 8, 8, 16, 32]),
                 min_runtime=rng.choice([0, 900, 3600, 4 * 3600, 8 * 3600]),
                 resumable=rng.random() < 0.8, command="python train.py",
                 expected_duration=rng.choice([None, 3600, 4 * 3600]),
                 submitted=now - timedelta(seconds=rng.uniform(60, 86400)))
        for i in range(PENDING)
    )
    OccupancySample.objects.create(cluster=cluster, at=now - timedelta(seconds=5),
                                   total=HOSTS * GPUS_PER_HOST, available=HOSTS * GPUS_PER_HOST,
                                   allocated=900, unallocated=0, pending_workloads=PENDING,
                                   pending_gpus=0)
    return cluster


class Rollback(Exception):
    pass


def measured_tick(cluster_id, now) -> tuple[float, loop.TickReport]:
    started = time.perf_counter()
    try:
        with transaction.atomic():
            report = loop.tick(cluster_id, now)
            elapsed = time.perf_counter() - started
            raise Rollback
    except Rollback:
        pass
    return elapsed, report


def median_line(label: str, times: list[float]) -> str:
    if not times:
        return f"{label}: none"
    return f"{label}: median {statistics.median(times):.0f} ms over {len(times)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=15)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--queries", action="store_true", help="time every SQL statement of a tick")
    args = ap.parse_args()
    if connection.vendor != "postgresql":
        print("bench/tick.py needs PostgreSQL (DATABASE_URL=postgres://...)")
        return 2
    try:
        connection.ensure_connection()
    except Exception as error:
        print(f"bench/tick.py: cannot reach PostgreSQL: {error}")
        return 2
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        now = timezone.now()
        cluster = build(now)
        # the state was just bulk-loaded: gather the statistics autovacuum keeps on a database
        # that has lived with its data, or the planner takes the tables for empty (a nested
        # loop over 3,600 workloads x 635 runs once its first guess stops fitting)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        started = time.perf_counter()
        report = loop.tick(cluster.pk, now)
        cold = (time.perf_counter() - started) * 1000
        started_runs = sum(type(d).__name__ == "Start" for d in report.decisions)
        times, steady, events = [], [], []
        profiler = cProfile.Profile() if args.profile else None
        for i in range(args.ticks):
            if profiler:
                profiler.enable()
            elapsed, tick_report = measured_tick(cluster.pk, now + timedelta(seconds=5 * (i + 1)))
            times.append(elapsed * 1000)
            kinds = [type(d).__name__ for d in tick_report.decisions]
            ended, started_then = kinds.count("Stop"), kinds.count("Start")
            (events if ended or started_then else steady).append(elapsed * 1000)
            if profiler:
                profiler.disable()
        if args.queries:
            log = []

            def timed(execute, sql, params, many, context):
                t = time.perf_counter()
                try:
                    return execute(sql, params, many, context)
                finally:
                    log.append(((time.perf_counter() - t) * 1000, sql[:150]))

            with connection.execute_wrapper(timed):
                measured_tick(cluster.pk, now + timedelta(seconds=5 * (args.ticks + 1)))
            for ms, sql in log:
                print(f"{ms:8.1f} ms  {sql}")
        running = Run.objects.filter(ended=None).count()
        pending = Workload.objects.filter(state="PENDING").count()
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        print(f"tick {HOSTS * GPUS_PER_HOST} GPUs, {PENDING} pending, {RUNNING} running on "
              f"postgresql: median {statistics.median(times):.0f} ms, p95 {p95:.0f} ms "
              f"(target <= 300 ms; {args.ticks} ticks)")
        print(f"cold first tick on the fresh state: {cold:.0f} ms ({started_runs} runs started, "
              f"queue positions of every pending workload written); after it: {running} "
              f"running, {pending} pending")
        # the cold tick signalled unallocated runs; their grace ends 30 s later, so the ticks
        # from then on (rolled back, each sees the same state) all stop and start work
        print(f"  {median_line('steady ticks (nothing to stop or start)', steady)}; "
              f"{median_line('ticks where graces end', events)}"
              + (f" ({ended} runs stopped, {started_then} started in each)" if events else ""))
        if profiler:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
