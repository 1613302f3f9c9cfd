"""Parameter sweeps: a grid over window x max min_runtime x hysteresis, one process per point,
printed as one comparison table (the tool to pick the lookback window and the maximum
min_runtime)."""

from __future__ import annotations

import argparse
import copy
import itertools
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _point(args: argparse.Namespace) -> dict:
    from .simulate import run_one

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
    points = []
    for w, m, h in itertools.product(windows, maxes, hysts):
        p = copy.copy(a)
        p.window, p.max_min_runtime, p.hysteresis = w, m, h
        p.sweep = False
        points.append(p)
    return points


def _h(s):
    from .simulate import _h as fmt

    return fmt(s)


def format_table(rows: list[dict]) -> str:
    head = (f"{'window':>8}{'max_min_rt':>11}{'hyst':>6}{'wait p95':>10}{'debug p95':>10}"
            f"{'debug p99':>10}{'alloc p95':>10}{'occup.':>8}{'preempt':>9}{'requeue':>9}"
            f"{'lost GPU-h':>11}{'max |dev|':>10}{'grace':>7}{'wall':>7}")
    lines = [head]
    for r in rows:
        dev = "-" if r["max_dev"] is None else f"{r['max_dev']:.1%}"
        lines.append(
            f"{_h(r['window_s']):>8}{_h(r['max_min_runtime_s']):>11}{r['hysteresis']:>6.2f}"
            f"{_h(r['wait_p95_s']):>10}{_h(r['debug_p95_s']):>10}{_h(r['debug_p99_s']):>10}"
            f"{_h(r['allocated_p95_s']):>10}{r['occupancy']:>8.1%}{r['preemptions']:>9}"
            f"{r['requeues']:>9}{r['lost_gpu_h']:>11.1f}{dev:>10}{_h(r['grace_s']):>7}"
            f"{r['wall_s']:>6.1f}s"
        )
    lines.append("max |dev|: largest |delivered/entitlement - 1| of any leaf budget in any "
                 "full window after the first (a budget without demand is far below 1)")
    return "\n".join(lines)


def run_sweep(a: argparse.Namespace) -> str:
    points = grid(a)
    workers = max(1, min(a.workers, len(points)))
    if workers == 1:
        rows = [_point(p) for p in points]
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            rows = list(ex.map(_point, points))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return format_table(rows) + f"\nwrote {out / 'sweep.json'}"
