"""Celery tasks: the beat schedule ticks every cluster, submit/cancel ask for a tick after
commit, and a broker outage never breaks a submission."""

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from scheduler import services, tasks
from scheduler.models import Run, Workload


def test_the_beat_ticks_all_clusters_every_few_seconds():
    entry = settings.CELERY_BEAT_SCHEDULE["tick-all-clusters"]
    assert entry["task"] == "scheduler.tick_all" == tasks.tick_all.name
    assert 1 <= entry["schedule"] <= 10


def test_tick_all_queues_one_tick_per_cluster(lab, monkeypatch):
    sent = []
    monkeypatch.setattr(tasks.tick_cluster, "apply_async", lambda args, **kw: sent.append(args))
    assert tasks.tick_all() == 1
    assert sent == [(lab.cluster.pk,)]


def test_tick_cluster_runs_a_tick(lab):
    w = Workload.objects.create(name="x", owner=lab.alice, budget=lab.a1, cluster=lab.cluster,
                                gpus=1, min_runtime=60, resumable=True, command="x")
    result = tasks.tick_cluster(lab.cluster.pk)
    assert result["decisions"] >= 1
    assert Run.objects.filter(workload=w).exists()


def test_a_submission_survives_a_broker_outage(
    lab, monkeypatch, django_capture_on_commit_callbacks
):
    def down(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.tick_cluster, "apply_async", down)
    with django_capture_on_commit_callbacks(execute=True):
        w = services.submit(lab.alice, name="x", budget=lab.a1, cluster=lab.cluster, gpus=1,
                            min_runtime=60, resumable=True, command="x")
    assert Workload.objects.get(pk=w.pk).state == "PENDING"


def test_submit_in_eager_mode_starts_the_run_at_once(lab, django_capture_on_commit_callbacks):
    from portal.celery import app

    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            w = services.submit(lab.alice, name="x", budget=lab.a1, cluster=lab.cluster, gpus=1,
                                min_runtime=60, resumable=True, command="x")
    finally:
        app.conf.task_always_eager = False
    assert Workload.objects.get(pk=w.pk).state == "RUNNING"


def test_a_sweep_of_an_unreadable_trace_stops_before_queuing_anything(monkeypatch):
    queued = []
    monkeypatch.setattr(tasks, "start_sweep", queued.append)
    with pytest.raises(CommandError, match="cannot read /nonexistent.csv"):
        call_command("sweep", "--trace", "/nonexistent.csv", "--sweep-window", "1d,7d")
    assert queued == []


def test_a_sweep_with_a_negative_hysteresis_stops_before_queuing_anything(monkeypatch):
    queued = []
    monkeypatch.setattr(tasks, "start_sweep", queued.append)
    with pytest.raises(CommandError, match="--hysteresis must be >= 0"):
        call_command("sweep", "--cluster", "4x8", "--sweep-hysteresis", "0.1,-1")
    assert queued == []
