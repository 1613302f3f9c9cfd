"""A REAL Celery worker process (with its embedded beat ticking every second) on the test's
own database and broker: Redis when CELERY_BROKER_URL is set, else the filesystem broker in a
temporary directory. PostgreSQL only: the worker must see the test's committed rows.

``celery_worker`` is one worker for the whole test; ``celery_workers`` starts and kills them
at the test's will (``start()``, ``kill(worker)``: SIGKILL to its whole process group, as a
crash would), for tests of what a dead worker leaves behind."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")


class Workers:
    """Worker processes on the test's database and broker, each logging to its own file."""

    def __init__(self, tmp_path):
        from portal.celery import app

        db = connection.settings_dict
        password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
        url = f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        self.tmp_path = tmp_path
        self.env = dict(os.environ, DATABASE_URL=url, TIMESHARE_VAR_DIR=str(tmp_path),
                        TIMESHARE_TICK_SECONDS="1", DJANGO_SETTINGS_MODULE="portal.settings")
        self.env.pop("CELERY_TASK_ALWAYS_EAGER", None)
        self.app = app
        self.saved = {k: app.conf.get(k) for k in ("broker_url", "broker_transport_options")}
        if not os.environ.get("CELERY_BROKER_URL"):
            queue, control = tmp_path / "celery" / "queue", tmp_path / "celery" / "control"
            for folder in (queue, control):
                folder.mkdir(parents=True, exist_ok=True)
            app.conf.broker_url = "filesystem://"
            app.conf.broker_transport_options = {
                "data_folder_in": str(queue), "data_folder_out": str(queue),
                "control_folder": str(control),
            }
        self.running: list[tuple[subprocess.Popen, object]] = []
        self.logs: list[Path] = []

    def start(self) -> subprocess.Popen:
        path = self.tmp_path / f"worker-{len(self.logs) + 1}.log"
        self.logs.append(path)
        log = open(path, "w")  # noqa: SIM115 - closed when the worker stops
        worker = subprocess.Popen(
            [str(CELERY), "-A", "portal", "worker", "--beat", "--loglevel=INFO",
             "--concurrency=2", "--schedule", str(self.tmp_path / "beat-schedule")],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.running.append((worker, log))
        return worker

    def kill(self, worker: subprocess.Popen) -> None:
        """SIGKILL the worker and everything it started (its pool, its Slurm commands)."""
        os.killpg(worker.pid, signal.SIGKILL)
        self._reap(worker)

    def _reap(self, worker) -> None:
        worker.wait(30)
        for entry in [e for e in self.running if e[0] is worker]:
            entry[1].close()
            self.running.remove(entry)

    def stop_all(self) -> None:
        for worker, _ in list(self.running):
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
            self._reap(worker)
        self.app.conf.update(self.saved)
        if os.environ.get("TIMESHARE_SHOW_WORKER_LOG"):
            for path in self.logs:
                print(path.read_text())


@pytest.fixture
def celery_workers(transactional_db, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("integration tests run on PostgreSQL (DATABASE_URL=postgres://...)")
    workers = Workers(tmp_path)
    try:
        yield workers
    finally:
        workers.stop_all()


@pytest.fixture
def celery_worker(celery_workers):
    return celery_workers.start()
