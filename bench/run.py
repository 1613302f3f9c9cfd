"""`make bench`: run every benchmark script, print its figures and record them in BENCHMARKS.md.

Each script prints result lines; this runner keeps them with the exact command and the machine."""

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = [
    ("engine pass", ["bench/engine_pass.py"]),
    ("simulator on the Philly trace", ["bench/simulate_philly.py"]),
    # the whole trace, as the goal is set; the 1x / 4x scaling runs on its first 21.5 days
    ("fair share under contention", ["bench/contention.py", "--scaling-days", "21.5"]),
    ("named policies: the Helios reference and contended FIFO", ["bench/policies.py"]),
    ("live tick on PostgreSQL", ["bench/tick.py"]),
    ("dashboard and report pages on a seeded year", ["bench/reports.py"]),
    ("API load: 50 concurrent clients submitting", ["bench/api_load.py"]),
    ("simulator sweep on 1 and 2 Celery workers", ["bench/sweep_workers.py"]),
]


def run(script: list[str]) -> tuple[str, int]:
    command = [sys.executable, *script]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    output = (result.stdout + result.stderr).strip()
    return output, result.returncode


def main() -> int:
    sections = []
    failed = False
    for title, script in BENCHMARKS:
        if not (ROOT / script[0]).exists():
            continue
        print(f"== {title}: python {' '.join(script)}", flush=True)
        started = time.perf_counter()
        output, code = run(script)
        elapsed = time.perf_counter() - started
        print(output, flush=True)
        failed |= code != 0
        status = "" if code == 0 else f" (exit code {code})"
        sections.append(
            f"## {title}{status}\n\nCommand: `.venv/bin/python {' '.join(script)}` "
            f"({elapsed:.1f} s in all)\n\n```\n{output}\n```\n"
        )
    header = (
        "# Benchmarks\n\nWritten by `make bench` (bench/run.py) on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"database {os.environ.get('DATABASE_URL', 'default (SQLite)').split('@')[-1]}.\n\n"
    )
    (ROOT / "BENCHMARKS.md").write_text(header + "\n".join(sections))
    print("written to BENCHMARKS.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
