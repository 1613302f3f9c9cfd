"""A simulator sweep on the Celery cluster: two real worker processes (on Redis when
CELERY_BROKER_URL names one) run its points, and its table is the local process pool's, byte
for byte. Both commands run in their own processes, as people run them (``manage.py sweep``
with the workers' settings)."""

import subprocess
import sys
from pathlib import Path

import pytest
from polling import wait_for

from scheduler.engine.traces import CHRONUS_MIX

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# 2 policies x 2 windows x 2 graces: 8 points, more than one worker's two processes take
GRID = ["--trace", str(CHRONUS_MIX), "--end", "60", "--cluster", "4x8", "--seed", "5",
        "--sweep-policy", "fairshare,fifo", "--sweep-window", "1h,1d", "--sweep-grace", "1m,5m"]


@pytest.fixture
def two_workers(celery_workers):
    workers = [celery_workers.start(), celery_workers.start()]
    wait_for(lambda: all("ready." in log.read_text() for log in celery_workers.logs),
             what="both workers to be ready")
    return celery_workers, workers


def sweep(celery_workers, out) -> None:
    """``manage.py sweep`` on the workers' broker."""
    subprocess.run([sys.executable, "manage.py", "sweep", *GRID, "--out", str(out)],
                   cwd=ROOT, env=celery_workers.env, check=True, capture_output=True,
                   text=True, timeout=600)


def test_a_sweep_on_two_workers_writes_the_local_pool_table(two_workers, tmp_path):
    subprocess.run([sys.executable, "-m", "scheduler.engine.simulate", *GRID, "--sweep",
                    "--workers", "2", "--out", str(tmp_path / "pool")],
                   cwd=ROOT, check=True, capture_output=True, timeout=600)
    sweep(two_workers[0], tmp_path / "by_workers")
    pool = (tmp_path / "pool" / "sweep.csv").read_bytes()
    assert pool.count(b"\n") == 1 + 8
    assert (tmp_path / "by_workers" / "sweep.csv").read_bytes() == pool


def test_both_workers_run_points_of_one_sweep(two_workers, tmp_path):
    celery_workers, _ = two_workers
    sweep(celery_workers, tmp_path / "by_workers")
    for log in celery_workers.logs:
        assert "scheduler.sweep_point" in log.read_text().split("ready.", 1)[-1]
