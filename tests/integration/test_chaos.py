"""Chaos on PostgreSQL with a real worker: while submissions, cancels and drains go on, the
worker is killed with SIGKILL in the middle of a tick (while it holds the cluster's lock)
several times and restarted. Then, in SQL: no GPU held twice, no two runs on one GPU at
overlapping times, usage charged equals the sum of the allocated runs, and no run is stuck
(every run the restarted worker inherited finishes). Bounded: it stops by itself."""

import contextlib
import random
import time

import pytest
from django.db import connection
from polling import wait_for

from fleet import services as host_services
from fleet.locks import LOCK_NAMESPACE
from fleet.models import Host
from scheduler import services
from scheduler.models import Run, RunGPU, UsageRollup, Workload

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

KILLS = 3
KILLS_AT_LEAST = 2  # a slow machine may restart the worker too slowly for all of them
CHAOS_SECONDS = 45  # at most; it ends as soon as the worker was killed KILLS times
# After a restart the worker works undisturbed until it has started a new run: a kill is worth
# something only once the new worker has done work a kill can break.
SETTLE_SECONDS = 5  # after the chaos, the restarted worker schedules on for this long
SEED = 14

RUN, GPU, USAGE, WORKLOAD = (m._meta.db_table for m in (Run, RunGPU, UsageRollup, Workload))


def sql(query, params=()):
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchall()


def tick_in_progress(cluster) -> bool:
    """Another session holds the cluster's advisory lock: a tick (or a cancel) is running."""
    return bool(sql(
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s "
        "AND objid = %s AND pid <> pg_backend_pid()",
        [LOCK_NAMESPACE["cluster"], cluster.pk],
    ))


def gpus_held_twice():
    return sql(f"SELECT host_id, index FROM {GPU} WHERE held GROUP BY host_id, index "
               "HAVING count(*) > 1")


@pytest.fixture
def chaos_lab(lab):
    lab.cluster.grace = 1
    lab.cluster.backend_config.update(repair_seconds=1, default_duration=3)
    lab.cluster.save()
    return lab


def act(lab, rng):
    """One thing a user or an operator does: mostly submit, sometimes cancel or drain."""
    roll = rng.random()
    if roll < 0.6:
        user, budget = rng.choice([(lab.alice, lab.a1), (lab.alice, lab.a2), (lab.bob, lab.b1)])
        services.submit(
            user, name="chaos", budget=budget, cluster=lab.cluster, gpus=rng.choice([1, 2, 4]),
            min_runtime=rng.choice([0, 2]), resumable=rng.random() < 0.7, command="x",
            expected_duration=rng.choice([1, 2, 3]),
        )
    elif roll < 0.85:
        active = list(Workload.objects.filter(state__in=Workload.ACTIVE_STATES))
        if active:
            victim = rng.choice(active)
            with contextlib.suppress(services.SubmissionError):  # it ended meanwhile
                services.cancel(victim.owner, victim)
    else:
        host = Host.objects.get(pk=rng.choice(lab.hosts).pk)
        if host.state == Host.State.AVAILABLE:
            host_services.drain(lab.operator, host, "chaos")
        elif host.state in (Host.State.DRAINED, Host.State.DRAINING):
            host_services.return_to_service(lab.operator, host, "chaos over")


def test_killing_the_worker_mid_tick_keeps_the_books(chaos_lab, celery_workers):
    lab, rng = chaos_lab, random.Random(SEED)
    worker = celery_workers.start()
    kills, double_booked = 0, []
    deadline = time.monotonic() + CHAOS_SECONDS
    runs_at_restart = 0
    while kills < KILLS and time.monotonic() < deadline:
        act(lab, rng)
        double_booked += gpus_held_twice()
        armed = Run.objects.count() > runs_at_restart
        watch_until = time.monotonic() + 0.5
        while armed and time.monotonic() < watch_until:
            if tick_in_progress(lab.cluster):
                celery_workers.kill(worker)
                kills += 1
                worker = celery_workers.start()
                runs_at_restart = Run.objects.count()
                break
            time.sleep(0.005)
        if not armed:
            time.sleep(0.3)
    assert kills >= KILLS_AT_LEAST, f"the worker was caught mid-tick only {kills} times"

    # Quiet: every host back, nothing new; the restarted worker must finish what it inherited.
    time.sleep(SETTLE_SECONDS)
    for host in Host.objects.filter(cluster=lab.cluster).exclude(state=Host.State.AVAILABLE):
        if host.state in (Host.State.DRAINED, Host.State.DRAINING):
            host_services.return_to_service(lab.operator, host, "chaos over")
    for pending in Workload.objects.filter(state=Workload.State.PENDING):
        with contextlib.suppress(services.SubmissionError):  # it started and ended meanwhile
            services.cancel(pending.owner, pending)
    wait_for(lambda: not Run.objects.filter(ended=None).exists(), timeout=60,
             what="every run to end after the chaos")

    assert double_booked == []
    assert gpus_held_twice() == []
    assert sql(f"SELECT count(*) FROM {GPU} WHERE held") == [(0,)]
    overlapping = sql(
        f"SELECT a.id, b.id FROM {GPU} a JOIN {GPU} b ON a.host_id = b.host_id "
        f"AND a.index = b.index AND a.id < b.id "
        f"JOIN {RUN} ra ON ra.id = a.run_id JOIN {RUN} rb ON rb.id = b.run_id "
        "WHERE ra.started < rb.ended AND rb.started < ra.ended"
    )
    assert overlapping == []
    assert sql(f"SELECT count(*) FROM {RUN} WHERE accounted_until <> ended") == [(0,)]
    [(charged,)] = sql(f"SELECT COALESCE(SUM(gpu_seconds), 0) FROM {USAGE} WHERE cluster_id = %s",
                       [lab.cluster.pk])
    [(ran,)] = sql(
        f"SELECT COALESCE(SUM(r.gpus * EXTRACT(EPOCH FROM r.ended - r.started)), 0) "
        f"FROM {RUN} r JOIN {WORKLOAD} w ON w.id = r.workload_id "
        "WHERE r.allocated AND w.cluster_id = %s",
        [lab.cluster.pk],
    )
    assert float(charged) == pytest.approx(float(ran), abs=1e-3)
    assert float(ran) > 0
    stuck = sql(f"SELECT id, state FROM {WORKLOAD} WHERE state IN ('PENDING', 'RUNNING', "
                "'PREEMPTING')")
    assert stuck == []
