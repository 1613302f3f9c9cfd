"""A REAL Celery worker process (with its embedded beat ticking every second) on the test's
own database and broker: Redis when CELERY_BROKER_URL is set, else the filesystem broker in a
temporary directory. PostgreSQL only: the worker must see the test's committed rows."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")


class Worker:
    """The worker process (a process group: the main process and its pool). ``kill()`` is a
    ``kill -9`` of the whole group, as when a machine dies; ``start()`` starts a new one."""

    def __init__(self, env, tmp_path):
        self.env = env
        self.tmp_path = tmp_path
        self.log = open(tmp_path / "worker.log", "a")  # noqa: SIM115 - closed in stop()
        self.process = None
        self.start()

    @property
    def pid(self):
        return self.process.pid

    def start(self):
        self.process = subprocess.Popen(
            [str(CELERY), "-A", "portal", "worker", "--beat", "--loglevel=INFO",
             "--concurrency=2", "--schedule", str(self.tmp_path / "beat-schedule")],
            cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self):
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.log.close()


@pytest.fixture
def celery_worker(transactional_db, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("integration tests run on PostgreSQL (DATABASE_URL=postgres://...)")
    from portal.celery import app

    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    url = f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = dict(os.environ, DATABASE_URL=url, TIMESHARE_VAR_DIR=str(tmp_path),
               TIMESHARE_TICK_SECONDS="1", DJANGO_SETTINGS_MODULE="portal.settings")
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    saved = {k: app.conf.get(k) for k in ("broker_url", "broker_transport_options")}
    if not os.environ.get("CELERY_BROKER_URL"):
        queue, control = tmp_path / "celery" / "queue", tmp_path / "celery" / "control"
        for folder in (queue, control):
            folder.mkdir(parents=True, exist_ok=True)
        app.conf.broker_url = "filesystem://"
        app.conf.broker_transport_options = {
            "data_folder_in": str(queue), "data_folder_out": str(queue),
            "control_folder": str(control),
        }
    worker = Worker(env, tmp_path)
    try:
        yield worker
    finally:
        worker.stop()
        app.conf.update(saved)
        if os.environ.get("TIMESHARE_SHOW_WORKER_LOG"):
            print((tmp_path / "worker.log").read_text())
