"""Equal inputs, equal outputs: the same trace and parameters give byte-identical jobs.csv and
runs.csv, run after run, whatever the interpreter's string-hash seed (which decides the order of
sets and of dicts built from them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.engine.traces import CHRONUS_MIX, PROJECT_ROOT

CASES = {
    # fair share under contention, with host failures, repairs and squatters preempted
    "fairshare": ["--cluster", "8x8/2", "--failure-rate", "4", "--idle-share", "0.2",
                  "--idle-policy", "10m"],
    # every Philly VC on its own hosts
    "partitions": ["--cluster", "philly", "--policy", "partitions"],
}


def replay(out: Path, hash_seed: str, args: list[str]) -> tuple[bytes, bytes]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    subprocess.run(
        [sys.executable, "-m", "scheduler.engine.simulate", "--trace", str(CHRONUS_MIX),
         "--end", "3m", "--no-html", "--quiet", "--out", str(out), *args],
        cwd=PROJECT_ROOT, env=env, check=True, capture_output=True,
    )
    return (out / "jobs.csv").read_bytes(), (out / "runs.csv").read_bytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_runs_write_the_same_bytes(tmp_path, case):
    first = replay(tmp_path / "first", "1", CASES[case])
    second = replay(tmp_path / "second", "2", CASES[case])
    assert first[1].count(b"\n") > 100  # enough runs to order
    assert first == second
