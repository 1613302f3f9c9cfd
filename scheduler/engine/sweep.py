"""Parameter sweeps: a grid over window x max min_runtime x hysteresis x unallocated grace,
one process per point, printed as one comparison table (the tool to pick the lookback window,
the maximum min_runtime and the grace of unallocated work)."""

from __future__ import annotations

import argparse
import copy
import itertools
import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from .summary import human


def _point(args: argparse.Namespace, run_one: Callable[[argparse.Namespace], Any]) -> dict:
    res = run_one(args)
    s = res.summary
    devs = [
        max(abs(r["min"] - 1), abs(r["max"] - 1))
        for b in s["budgets"].values()
        if b["leaf"] and (r := b["ratio_after_first_window"])["min"] is not None
    ]
    return {
        "window_s": args.window,
        "max_min_runtime_s": args.max_min_runtime,
        "hysteresis": args.hysteresis,
        "grace_s": args.grace,
        "unallocated_grace_s": args.unallocated_grace,
        "wait_p95_s": s["waits"]["all"]["p95"],
        "debug_p95_s": s["waits"]["debug"]["p95"],
        "debug_p99_s": s["waits"]["debug"]["p99"],
        "allocated_p95_s": s["waits"]["allocated"]["p95"],
        "occupancy": s["occupancy"]["allocated"] + s["occupancy"]["unallocated"],
        "preemptions": s["preemptions"]["total"],
        "requeues": s["requeues"],
        "lost_gpu_h": s["gpu_hours_lost"]["preemption"],
        "max_dev": max(devs) if devs else None,
        "wall_s": s["wall_s"],
    }


def grid(a: argparse.Namespace) -> list[argparse.Namespace]:
    windows = a.sweep_window or [a.window]
    maxes = a.sweep_max_min_runtime or [a.max_min_runtime]
    hysts = a.sweep_hysteresis or [a.hysteresis]
    graces = a.sweep_unallocated_grace or [a.unallocated_grace]
    points = []
    for w, m, h, u in itertools.product(windows, maxes, hysts, graces):
        p = copy.copy(a)
        p.window, p.max_min_runtime, p.hysteresis, p.unallocated_grace = w, m, h, u
        p.sweep = False
        points.append(p)
    return points


def format_table(rows: list[dict]) -> str:
    head = (f"{'window':>8}{'max_min_rt':>11}{'hyst':>6}{'wait p95':>10}{'debug p95':>10}"
            f"{'debug p99':>10}{'alloc p95':>10}{'occup.':>8}{'preempt':>9}{'requeue':>9}"
            f"{'lost GPU-h':>11}{'max |dev|':>10}{'grace':>7}{'u.grace':>8}{'wall':>7}")
    lines = [head]
    for r in rows:
        dev = "-" if r["max_dev"] is None else f"{r['max_dev']:.1%}"
        lines.append(
            f"{human(r['window_s']):>8}{human(r['max_min_runtime_s']):>11}{r['hysteresis']:>6.2f}"
            f"{human(r['wait_p95_s']):>10}{human(r['debug_p95_s']):>10}"
            f"{human(r['debug_p99_s']):>10}"
            f"{human(r['allocated_p95_s']):>10}{r['occupancy']:>8.1%}{r['preemptions']:>9}"
            f"{r['requeues']:>9}{r['lost_gpu_h']:>11.1f}{dev:>10}{human(r['grace_s']):>7}"
            f"{human(r['unallocated_grace_s']):>8}{r['wall_s']:>6.1f}s"
        )
    lines.append("max |dev|: largest |delivered/entitlement - 1| of any leaf budget in any "
                 "full window after the first (a budget without demand is far below 1)")
    return "\n".join(lines)


def run_sweep(a: argparse.Namespace, run_one: Callable[[argparse.Namespace], Any]) -> str:
    """Run every point of the grid with ``run_one`` (the simulator's, passed in so that this
    module does not import the simulator that imports it) and print one table."""
    points = grid(a)
    workers = max(1, min(a.workers, len(points)))
    point = partial(_point, run_one=run_one)
    if workers == 1:
        rows = [point(p) for p in points]
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            rows = list(ex.map(point, points))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return format_table(rows) + f"\nwrote {out / 'sweep.json'}"
