"""Benchmark (not a test): one simulator sweep on the Celery cluster (``manage.py sweep``: a
task per point, a chord for the table) with 1 worker, then 2 workers, each of one process,
and the same grid on the simulator's local process pool (2 processes) for reference.

    .venv/bin/python bench/sweep_workers.py [--end 90] [--windows 1h,1d]

The broker is the environment's (Redis with CELERY_BROKER_URL), else the embedded filesystem
broker in a temporary directory. The workers start, and answer a ping, before the clock runs:
the wall time is from queuing the grid to the table written. The sweeps must give the same
table; the script fails otherwise.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELERY = Path(sys.executable).with_name("celery")


def grid(a: argparse.Namespace) -> list[str]:
    return ["--trace", str(ROOT / "data" / "traces" / "chronus_philly_mix1.csv.gz"),
            "--end", str(a.end), "--cluster", "4x8", "--sweep-policy", "fairshare,fifo",
            "--sweep-window", a.windows, "--no-html"]


def start_workers(count: int, env: dict, logs: Path) -> list[subprocess.Popen]:
    workers = []
    for number in range(1, count + 1):
        log = open(logs / f"worker-{count}-{number}.log", "w")  # noqa: SIM115 - the worker's
        workers.append(subprocess.Popen(
            [str(CELERY), "-A", "portal", "worker", "--concurrency=1", "--loglevel=WARNING",
             "-n", f"bench{number}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return workers


def answering(env: dict) -> int:
    probe = ("from portal.celery import app; "
             "print(len(app.control.ping(timeout=1.0) or []))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return int(done.stdout.strip() or 0)


def stop(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        os.killpg(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.wait(30)


def timed(command: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--end", type=float, default=90, help="trace slice, seconds (default 90)")
    ap.add_argument("--windows", default="1h,1d", help="windows swept (default 1h,1d)")
    a = ap.parse_args()
    points = 2 * len(a.windows.split(","))
    with tempfile.TemporaryDirectory() as var:
        env = dict(os.environ, TIMESHARE_VAR_DIR=var, DJANGO_SETTINGS_MODULE="portal.settings")
        env.pop("CELERY_TASK_ALWAYS_EAGER", None)
        broker = env.get("CELERY_BROKER_URL") or env.get("REDIS_URL") or "filesystem"
        print(f"grid: {points} points (fairshare, fifo x windows {a.windows}) of the Chronus "
              f"mix's first {a.end:g} s on 4x8 GPUs; broker {broker.split('@')[-1]}")
        tables = {}
        for count in (1, 2):
            workers = start_workers(count, env, Path(var))
            try:
                deadline = time.monotonic() + 120
                while answering(env) < count:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{count} workers did not answer within 120 s")
                out = Path(var) / f"celery-{count}"
                wall = timed([sys.executable, "manage.py", "sweep", *grid(a), "--out", str(out)],
                             env)
            finally:
                stop(workers)
            tables[f"{count} worker(s)"] = (out / "sweep.csv").read_bytes()
            print(f"Celery, {count} worker{'s' if count > 1 else ''} x 1 process: "
                  f"{wall:6.1f} s wall")
        out = Path(var) / "pool"
        wall = timed([sys.executable, "-m", "scheduler.engine.simulate", *grid(a), "--sweep",
                      "--workers", "2", "--out", str(out)], env)
        tables["local pool"] = (out / "sweep.csv").read_bytes()
        print(f"local process pool, 2 processes: {wall:6.1f} s wall (Python start-up "
              "included, as for the command above)")
        same = len(set(tables.values())) == 1
        print("tables: " + ("byte-identical" if same else "DIFFERENT"))
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
