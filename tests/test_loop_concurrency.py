"""Racing ticks on PostgreSQL (threads, and a worker process killed mid-tick): no GPU is
ever assigned twice, no submission is lost, the state stays consistent. Skipped on SQLite,
whose single writer lock serialises everything anyway."""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, connections
from django.utils import timezone

from scheduler import loop, services
from scheduler.models import Run, RunGPU, Workload

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgresql_only(db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrency is tested on PostgreSQL (DATABASE_URL=postgres://...)")


def race(workers):
    errors = []
    start = threading.Barrier(len(workers))

    def wrap(fn):
        def run():
            try:
                start.wait()
                fn()
            except Exception as error:  # reported below
                errors.append(error)
            finally:
                connections.close_all()
        return run

    threads = [threading.Thread(target=wrap(fn)) for fn in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def consistent(lab):
    held = list(RunGPU.objects.filter(held=True).values_list("host_id", "index", "run_id"))
    assert len({(h, i) for h, i, _ in held}) == len(held)
    per_run = Counter(run_id for _, _, run_id in held)
    live = {r.pk: r for r in Run.objects.filter(ended=None)}
    assert set(per_run) == set(live)
    for run_id, n in per_run.items():
        assert live[run_id].gpus == n
    assert Counter(Run.objects.filter(ended=None).values_list("workload_id", flat=True)
                   ).most_common(1)[0][1] <= 1 if live else True
    for w in Workload.objects.filter(state__in=["RUNNING", "PREEMPTING"]):
        assert w.runs.filter(ended=None).count() == 1
    assert sum(per_run.values()) <= 8


def test_racing_ticks_and_submissions(lab):
    lab.cluster.backend_config["default_duration"] = 0.2
    lab.cluster.save()
    submitted = []

    def submitter(seed):
        rng = random.Random(seed)

        def go():
            for i in range(12):
                w = services.submit(
                    lab.alice, name=f"s{seed}-{i}", budget=rng.choice([lab.a1, lab.a2]),
                    cluster=lab.cluster, gpus=rng.randint(1, 4),
                    min_runtime=rng.choice([0, 1, 600]), resumable=True, command="x",
                    expected_duration=rng.choice([None, 1]),
                )
                submitted.append(w.pk)
        return go

    skipped = []

    def ticker():
        for _ in range(15):
            report = loop.tick(lab.cluster.pk)
            skipped.append(report.skipped)
            time.sleep(0.01)

    errors = race([submitter(s) for s in range(3)] + [ticker for _ in range(5)])
    assert errors == []
    assert sorted(submitted) == sorted(Workload.objects.values_list("pk", flat=True))
    assert len(submitted) == 36
    consistent(lab)
    loop.tick(lab.cluster.pk)
    pending = Workload.objects.filter(state="PENDING")
    assert all(w.queue_position and w.queue_reason for w in pending)
    assert not all(skipped)


def test_without_the_lock_the_database_still_refuses_a_double_assignment(lab, monkeypatch):
    """Belt and braces: with the lock switched off, racing ticks may fail, but all or nothing,
    and no GPU is ever held twice (the partial unique index ``gpu_held_once``)."""
    monkeypatch.setattr(loop, "lock_cluster", lambda cluster_id, wait=True: True)
    for i in range(16):
        Workload.objects.create(name=f"w{i}", owner=lab.alice, budget=lab.a1, cluster=lab.cluster,
                                gpus=1, min_runtime=600, resumable=True, command="x",
                                submitted=timezone.now())
    errors = race([lambda: loop.tick(lab.cluster.pk) for _ in range(6)])
    assert all(isinstance(e, DatabaseError) for e in errors), errors
    consistent(lab)
    assert RunGPU.objects.filter(held=True).count() == 8


KILLED_WORKER = """
import os, sys, time, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()
from scheduler import loop
original = loop._Tick.save
def save_then_hang(self):
    original(self)
    print("saved", flush=True)
    time.sleep(600)
loop._Tick.save = save_then_hang
loop.tick(int(sys.argv[1]))
"""


def test_a_worker_process_killed_mid_tick_leaves_a_consistent_state(lab):
    for i in range(3):
        Workload.objects.create(name=f"w{i}", owner=lab.alice, budget=lab.a1, cluster=lab.cluster,
                                gpus=2, min_runtime=600, resumable=True, command="x",
                                submitted=timezone.now())
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = dict(os.environ, DATABASE_URL=url)
    worker = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(lab.cluster.pk)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "saved"  # rows written, not committed
        assert loop.tick(lab.cluster.pk).skipped  # it holds the cluster's lock
        assert Run.objects.count() == 0
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        deadline = time.monotonic() + 30
        while True:  # the server notices the dead connection and drops its lock
            report = loop.tick(lab.cluster.pk)
            if not report.skipped or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert not report.skipped
    finally:
        if worker.poll() is None:
            worker.kill()
    consistent(lab)
    assert Run.objects.count() == 3 and RunGPU.objects.filter(held=True).count() == 6
