"""Benchmark (not a test): the named policies, timed.

    .venv/bin/python bench/policies.py [--skip-peer] [--skip-contended]
        [--partitions-limit N]

(a) The peer reference: ``partitions`` (each Philly VC on its own nodes, 2,816 GPUs) on
    Helios's window, Philly 2017-10-01 to 11-30, with strict FIFO and SJF inside, beside
    Helios's published figures (tests/engine/test_peer_reference.py checks them within 1%).
(b) Contended: the whole philly_vc.csv on 44 x 8 = 352 GPUs, where average demand (374 GPUs)
    is just above capacity: strict ``fifo`` (goal <= 10 s) and ``fifo-backfill`` (goal <= 20 s)
    on the whole trace; ``partitions`` with every VC at 1/8 of its nodes (44 nodes in all),
    strict FIFO inside, on the whole trace (or its first --partitions-limit jobs).

One line per run: simulation wall seconds (trace reading excluded) and the figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.engine.model import Params  # noqa: E402
from scheduler.engine.simulate import SimConfig, simulate  # noqa: E402
from scheduler.engine.traces import (  # noqa: E402
    PHILLY_OCT_NOV_2017,
    PHILLY_TRACE,
    ClusterSpec,
    cluster_from_sizes,
    parse_cluster,
    read_trace,
)

HELIOS = {"fifo": (11_585.6, 104.9, 366.0), "sjf": (11_543.4, 62.7, 147.0)}
CONTENDED_GOALS = {"fifo": 10.0, "fifo-backfill": 20.0}


def replay(label: str, trace, cluster: ClusterSpec, params: Params, goal: float | None = None):
    started = time.perf_counter()
    res = simulate(trace.jobs, trace.shares, cluster, SimConfig(params=params))
    wall = time.perf_counter() - started
    ran = [r for r in res.jobs if r.first_start is not None]
    done = [r for r in res.jobs if r.state == "completed"]
    queue = np.array([r.wait_s for r in ran])
    jct = np.mean([r.end_time - r.job.submit_time for r in done]) if done else float("nan")
    s = res.summary
    target = f" (goal <= {goal:g} s)" if goal is not None else ""
    print(f"{label:<48} wall {wall:6.2f}s{target}  jobs {s['jobs']} passes {s['passes']}  "
          f"avg JCT {jct:,.1f}s  avg queue {queue.mean():,.1f}s  "
          f"p99 queue {np.percentile(queue, 99):,.0f}s  "
          f"occupancy {s['occupancy']['allocated'] + s['occupancy']['unallocated']:.1%}  "
          f"states {s['states']}", flush=True)
    return jct, queue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--skip-contended", action="store_true")
    ap.add_argument("--partitions-limit", type=int, default=0,
                    help="first N jobs of the contended partitions line (default 0: the whole "
                    "trace)")
    a = ap.parse_args()
    if not a.skip_peer:
        start, end = PHILLY_OCT_NOV_2017
        trace = read_trace(PHILLY_TRACE, start=start, end=end)
        cluster = parse_cluster("philly")
        for inside, (h_jct, h_queue, h_p99) in HELIOS.items():
            params = Params(policy="partitions", partition_policy=inside)
            jct, queue = replay(f"peer: partitions, {inside} inside", trace, cluster, params)
            print(f"  Helios {inside}: avg JCT {h_jct:,.1f}s ({jct / h_jct - 1:+.2%})  "
                  f"avg queue {h_queue:,.1f}s ({queue.mean() / h_queue - 1:+.2%})  "
                  f"p99 queue {h_p99:,.0f}s ({np.percentile(queue, 99) / h_p99 - 1:+.2%})",
                  flush=True)
    if not a.skip_contended:
        shared = parse_cluster("44x8")
        whole = read_trace(PHILLY_TRACE)
        for policy in ("fifo", "fifo-backfill"):
            replay(f"contended 352 GPUs, all jobs: {policy}", whole, shared,
                   Params(policy=policy), CONTENDED_GOALS[policy])
        trace = read_trace(PHILLY_TRACE, limit=a.partitions_limit or None)
        jobs = f"first {a.partitions_limit}" if a.partitions_limit else "all"
        replay(f"contended 352 GPUs, {jobs} jobs: partitions/VC", trace,
               cluster_from_sizes(fraction=8),
               Params(policy="partitions"))


if __name__ == "__main__":
    main()
