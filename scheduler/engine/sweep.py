"""Parameter sweeps: a grid over policy x window x max min_runtime x grace x hysteresis x
unallocated grace, one simulation per point, gathered into one comparison table (the tool to
pick the lookback window, the maximum min_runtime and the graces).

A point is plain data (``vars`` of the simulator's arguments), so any executor runs it: the
local process pool here (``--sweep --workers N``), or the Celery tasks of the scheduler app,
one task per point. Both build their table with ``table_csv`` and ``format_table`` from the
rows ``point_row`` returns, so equal inputs give the same table on either."""

from __future__ import annotations

import argparse
import copy
import csv
import io
import itertools
import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from .summary import human

# what the table compares, in its CSV's column order: the point, then its figures. The wall
# time is left out of the CSV (it is the machine's, not the simulation's), so that the same
# grid gives the same bytes on any executor.
POINT_COLUMNS = ("policy", "window_s", "max_min_runtime_s", "grace_s", "hysteresis",
                 "unallocated_grace_s")
FIGURE_COLUMNS = ("wait_p95_s", "debug_p95_s", "debug_p99_s", "allocated_p95_s", "occupancy",
                  "preemptions", "requeues", "lost_gpu_h", "max_dev")
CSV_COLUMNS = POINT_COLUMNS + FIGURE_COLUMNS


def point_row(args: argparse.Namespace, run_one: Callable[[argparse.Namespace], Any]) -> dict:
    """Simulate one point of the grid and keep the figures the table compares."""
    res = run_one(args)
    s = res.summary
    devs = [
        max(abs(r["min"] - 1), abs(r["max"] - 1))
        for b in s["budgets"].values()
        if b["leaf"] and (r := b["ratio_after_first_window"])["min"] is not None
    ]
    return {
        "policy": args.policy,
        "window_s": args.window,
        "max_min_runtime_s": args.max_min_runtime,
        "grace_s": args.grace,
        "hysteresis": args.hysteresis,
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
    """Every point of the grid the ``--sweep-*`` lists span (each defaults to the single value
    of its parameter), in a fixed order: the table's row order."""
    axes = {
        "policy": a.sweep_policy or [a.policy],
        "window": a.sweep_window or [a.window],
        "max_min_runtime": a.sweep_max_min_runtime or [a.max_min_runtime],
        "grace": a.sweep_grace or [a.grace],
        "hysteresis": a.sweep_hysteresis or [a.hysteresis],
        "unallocated_grace": a.sweep_unallocated_grace or [a.unallocated_grace],
    }
    points = []
    for values in itertools.product(*axes.values()):
        p = copy.copy(a)
        for name, value in zip(axes, values, strict=True):
            setattr(p, name, value)
        p.sweep = False
        points.append(p)
    return points


def table_csv(rows: list[dict]) -> str:
    """The comparison table as CSV, one row per point in grid order (floats as Python's
    shortest exact repr, an empty cell for a missing figure)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow(["" if row[c] is None else row[c] for c in CSV_COLUMNS])
    return buffer.getvalue()


def format_table(rows: list[dict]) -> str:
    head = (f"{'window':>8}{'max_min_rt':>11}{'hyst':>6}{'wait p95':>10}{'debug p95':>10}"
            f"{'debug p99':>10}{'alloc p95':>10}{'occup.':>8}{'preempt':>9}{'requeue':>9}"
            f"{'lost GPU-h':>11}{'max |dev|':>10}{'grace':>7}{'u.grace':>8}{'policy':>15}"
            f"{'wall':>7}")
    lines = [head]
    for r in rows:
        dev = "-" if r["max_dev"] is None else f"{r['max_dev']:.1%}"
        lines.append(
            f"{human(r['window_s']):>8}{human(r['max_min_runtime_s']):>11}{r['hysteresis']:>6.2f}"
            f"{human(r['wait_p95_s']):>10}{human(r['debug_p95_s']):>10}"
            f"{human(r['debug_p99_s']):>10}"
            f"{human(r['allocated_p95_s']):>10}{r['occupancy']:>8.1%}{r['preemptions']:>9}"
            f"{r['requeues']:>9}{r['lost_gpu_h']:>11.1f}{dev:>10}{human(r['grace_s']):>7}"
            f"{human(r['unallocated_grace_s']):>8}{r['policy']:>15}{r['wall_s']:>6.1f}s"
        )
    lines.append("max |dev|: largest |delivered/entitlement - 1| of any leaf budget in any "
                 "full window after the first (a budget without demand is far below 1)")
    return "\n".join(lines)


def table(rows: list[dict]) -> dict:
    """The sweep's result: its rows (wall times included), the CSV and the printed table."""
    return {"rows": rows, "csv": table_csv(rows), "text": format_table(rows)}


def write_table(result: dict, out: str | Path) -> str:
    """Write ``sweep.csv`` and ``sweep.json`` (the rows) of a ``table`` into ``out``, and return
    the printed table."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep.csv").write_text(result["csv"], encoding="utf-8")
    (folder / "sweep.json").write_text(json.dumps(result["rows"], indent=1), encoding="utf-8")
    return result["text"] + f"\nwrote {folder / 'sweep.csv'}, {folder / 'sweep.json'}"


def run_sweep(a: argparse.Namespace, run_one: Callable[[argparse.Namespace], Any]) -> str:
    """Run every point of the grid with ``run_one`` (the simulator's, passed in so that this
    module does not import the simulator that imports it) on a local pool of ``a.workers``
    processes, and write and return one table."""
    points = grid(a)
    workers = max(1, min(a.workers, len(points)))
    point = partial(point_row, run_one=run_one)
    if workers == 1:
        rows = [point(p) for p in points]
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            rows = list(ex.map(point, points))
    return write_table(table(rows), a.out)
