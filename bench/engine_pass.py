"""Time one scheduling pass on a busy 1,024-GPU cluster.

128 hosts x 8 GPUs in 8 network groups, 150 leaf budgets (10 programs x 15 projects),
600 running and 3,000 pending workloads, usage spread from idle to 3x entitlement: a pass with
plenty to rank, a few starts, preemptions and a reservation. Seeded, so runs are comparable.

    .venv/bin/python bench/engine_pass.py [--passes 50] [--seed 7] [--profile]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.engine import (  # noqa: E402
    BudgetTree,
    ClusterState,
    Host,
    Params,
    Placement,
    Run,
    Workload,
    schedule,
)

HOSTS, GPUS_PER_HOST, GROUPS = 128, 8, 8
PROGRAMS, PROJECTS = 10, 15
RUNNING, PENDING = 600, 3000
DAY = 86400.0


def build(seed: int) -> tuple[ClusterState, BudgetTree, Params]:
    rng = random.Random(seed)
    params = Params()
    now = 30 * DAY
    hosts = [Host(f"h{i:03d}", GPUS_PER_HOST, group=f"g{i % GROUPS}") for i in range(HOSTS)]
    shares: dict[str, float] = {}
    for p in range(PROGRAMS):
        shares[f"prog-{p}"] = rng.randint(1, 10)
        for j in range(PROJECTS):
            shares[f"prog-{p}/proj-{j}"] = rng.randint(1, 10)
    tree = BudgetTree.from_shares(shares)
    leaves = tree.leaves
    capacity = HOSTS * GPUS_PER_HOST * params.window
    usage = {leaf: tree.fraction(leaf) * capacity * rng.uniform(0.0, 3.0) for leaf in leaves}

    def workload(i: int, submitted: float, sizes=(1, 1, 1, 2, 2, 4, 8)) -> Workload:
        allocated = rng.random() > 0.15
        return Workload(
            id=f"job-{i}",
            budget=rng.choice(leaves),
            gpus=rng.choice(sizes),
            min_runtime=rng.choice([900.0, 3600.0, 4 * 3600.0]) if allocated else 0.0,
            resumable=rng.random() < 0.6,
            submitted=submitted,
            duration=rng.uniform(600, 2 * DAY),
        )

    free = {h.name: list(range(GPUS_PER_HOST)) for h in hosts}
    running: list[Run] = []
    i = 0
    for _ in range(100 * RUNNING):  # bounded: gives up if the hosts fill first
        if len(running) == RUNNING:
            break
        w = workload(i, now - rng.uniform(0, 2 * DAY), sizes=(1, 1, 1, 1, 1, 2, 2, 4))
        i += 1
        fits = [h for h, f in free.items() if len(f) >= w.gpus]
        if not fits:
            continue
        host = rng.choice(fits)
        idx, free[host] = tuple(free[host][: w.gpus]), free[host][w.gpus :]
        started = w.submitted + rng.uniform(0, 3600)
        running.append(
            Run(w, started, Placement(((host, idx),)), protected_until=started + w.min_runtime)
        )
    pending = []
    for _ in range(PENDING):
        w = workload(i, now - rng.uniform(0, DAY))
        i += 1
        if rng.random() < 0.03:  # a few large multi-host jobs
            w = Workload(w.id, w.budget, rng.choice([16, 32]), 3600.0, True, w.submitted)
        pending.append(w)
    state = ClusterState(now, hosts, running, pending, usage=usage, capacity=capacity)
    return state, tree, params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="cProfile one pass")
    args = ap.parse_args()
    state, tree, params = build(args.seed)
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.runcall(schedule, state, tree, params)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        return
    schedule(state, tree, params)  # warm up
    times = []
    for _ in range(args.passes):
        t0 = time.perf_counter()
        result = schedule(state, tree, params)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    kinds = {}
    for d in result.decisions:
        kinds[type(d).__name__] = kinds.get(type(d).__name__, 0) + 1
    print(
        f"engine pass {len(state.hosts) * GPUS_PER_HOST} GPUs, {len(state.pending)} pending, "
        f"{len(state.running)} running, {len(tree.leaves)} leaves: "
        f"median {statistics.median(times):.1f} ms, p95 {p95:.1f} ms"
    )
    print(f"  decisions: {kinds}, waiting: {len(result.waiting)}", file=sys.stderr)


if __name__ == "__main__":
    main()
