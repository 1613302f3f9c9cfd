"""Benchmark (not a test): replay the whole philly_vc.csv (82k jobs, 109 days) on the
2,816-GPU Philly cluster, (a) with fair share and preemption, (b) under FIFO.

    .venv/bin/python bench/simulate_philly.py [--profile] [--limit N]
        [--time-scale 0.15] [--contended-limit 10000]

One line per run: wall seconds (trace reading excluded, then included) and key figures.
Target for (a): <= 10 s wall on a 2-core machine. Then (c) one contended line: fair share with
submission times scaled by --time-scale (thousands pending), bounded to the first
--contended-limit jobs (the whole contended trace takes far longer than a minute; 0: skip).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.engine.model import Params  # noqa: E402
from scheduler.engine.simulate import SimConfig, simulate  # noqa: E402
from scheduler.engine.traces import PHILLY_TRACE, ConversionRule, parse_cluster, read_trace  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="cProfile the fair-share run")
    ap.add_argument("--limit", type=int, default=None, help="first N jobs only")
    ap.add_argument("--policy", action="append", help="fairshare and/or fifo (default both)")
    ap.add_argument("--time-scale", type=float, default=0.15,
                    help="submission-time scale of the contended line (default 0.15)")
    ap.add_argument("--contended-limit", type=int, default=10000,
                    help="first N jobs of the contended line (default 10000; 0: skip it)")
    a = ap.parse_args()
    runs = [(policy, a.limit, 1.0) for policy in a.policy or ["fairshare", "fifo"]]
    if a.contended_limit:
        runs.append(("fairshare", a.contended_limit, a.time_scale))
    for policy, limit, scale in runs:
        t0 = time.perf_counter()
        trace = read_trace(PHILLY_TRACE, rule=ConversionRule(seed=0),
                           limit=limit)
        for j in trace.jobs:
            j.submit_time *= scale
        cluster = parse_cluster("philly")
        t1 = time.perf_counter()
        cfg = SimConfig(params=Params(policy=policy), seed=0)
        prof = cProfile.Profile() if a.profile and policy == "fairshare" and scale == 1.0 else None
        if prof:
            prof.enable()
        res = simulate(trace.jobs, trace.shares, cluster, cfg)
        if prof:
            prof.disable()
        t2 = time.perf_counter()
        s = res.summary
        label = policy
        if scale != 1.0:
            label = f"{policy} contended (time-scale {scale:g}, first {limit} jobs):"
        print(
            f"{label:<9} jobs {s['jobs']} sim {s['end_s'] / 86400:.1f} d  "
            f"wall {t2 - t1:.2f}s (+read {t1 - t0:.2f}s)  passes {s['passes']} "
            f"skipped {s['skipped_passes']}  wait p95 {s['waits']['all']['p95'] or 0:.0f}s "
            f"debug p95 {s['waits']['debug']['p95'] or 0:.0f}s  "
            f"occupancy {s['occupancy']['allocated'] + s['occupancy']['unallocated']:.1%}  "
            f"preemptions {s['preemptions']['total']} requeues {s['requeues']}  "
            f"states {s['states']}",
            flush=True,
        )
        if prof:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
