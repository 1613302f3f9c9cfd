"""Celery tasks: the beat ticks every cluster every few seconds; submit, cancel and every
operator action on a host ask for a tick of their cluster at once (after their transaction
commits), one queued tick per cluster at a time. And the simulator's parameter sweeps, one
task per point."""

from __future__ import annotations

import argparse
import logging
import time

from celery import chord, shared_task
from celery.result import AsyncResult
from django.core.cache import cache
from django.db import transaction
from django.dispatch import receiver

from fleet.models import Cluster
from fleet.signals import host_changed
from scheduler.tick_metrics import record_tick

log = logging.getLogger(__name__)

TICK_EXPIRES = 60  # seconds: a tick queued longer than this is stale (the beat sends another)
# Set while a tick of the cluster is queued and has not started. Asking for another one then
# adds nothing: the queued tick reads the database after it starts, so it sees the change
# that asked too. A burst of submissions thus queues one tick, not one each. The tick forgets
# the mark as it starts; the mark expires with the tick's message if that never runs.
QUEUED = "tick-queued:{}"


@shared_task(name="scheduler.tick_cluster", ignore_result=True)
def tick_cluster(cluster_id: int) -> dict:
    from scheduler.loop import tick

    _forget_queued(cluster_id)  # a change committed from now on may come after our reads
    started = time.perf_counter()
    report = tick(cluster_id)
    if not report.skipped:
        _record_duration(cluster_id, time.perf_counter() - started)
    if report.skipped:
        return {"cluster": cluster_id, "skipped": True}
    return {
        "cluster": cluster_id,
        "decisions": len(report.decisions),
        "finished": report.finished,
        "host_failures": report.host_failures,
    }


@shared_task(name="scheduler.tick_all", ignore_result=True)
def tick_all() -> int:
    ids = list(Cluster.objects.values_list("pk", flat=True))
    for cluster_id in ids:
        send_tick(cluster_id)
    return len(ids)


@shared_task(name="scheduler.compact_samples", ignore_result=True)
def compact_samples() -> int:
    from django.utils import timezone

    from scheduler.retention import compact_samples as compact

    now = timezone.now()
    return sum(compact(pk, now) for pk in Cluster.objects.values_list("pk", flat=True))


def _record_duration(cluster_id: int, seconds: float) -> None:
    """For the /metrics page (``scheduler.tick_metrics``)."""
    try:
        record_tick(cluster_id, seconds)
    except Exception:  # metrics never break the loop
        log.debug("could not record the tick duration", exc_info=True)


def send_tick(cluster_id: int) -> None:
    """Queue a tick of the cluster, unless one is queued and has not started yet."""
    try:
        if not cache.add(QUEUED.format(cluster_id), True, TICK_EXPIRES):
            return
    except Exception:  # without the cache, every request queues its own tick
        log.warning("could not mark a tick of cluster %s queued", cluster_id, exc_info=True)
    try:
        tick_cluster.apply_async((cluster_id,), expires=TICK_EXPIRES)
    except Exception:  # broker down: the beat's next tick does the same work
        log.warning("could not queue a tick of cluster %s", cluster_id, exc_info=True)
        _forget_queued(cluster_id)


def _forget_queued(cluster_id: int) -> None:
    try:
        cache.delete(QUEUED.format(cluster_id))
    except Exception:  # the mark expires by itself
        log.warning("could not forget the queued tick of cluster %s", cluster_id, exc_info=True)


def request_tick(cluster_id: int) -> None:
    """Tick ``cluster_id`` as soon as the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send_tick(cluster_id))


@receiver(host_changed, dispatch_uid="scheduler.tick_on_host_change")
def tick_on_host_change(sender, cluster_id: int, **kwargs) -> None:
    """A host was drained, returned or repaired: its cluster's work moves at once."""
    request_tick(cluster_id)


@shared_task(name="scheduler.collect_utilization", ignore_result=True)
def collect_utilization() -> int:
    """Read every cluster's GPU telemetry into the utilization rollups (scheduler.utilization)."""
    from django.utils import timezone

    from scheduler.utilization import collect

    now = timezone.now()
    collected = 0
    for cluster in Cluster.objects.exclude(telemetry="none"):
        try:
            collected += collect(cluster, now) is not None
        except Exception:  # one cluster's bad telemetry never stops the others
            log.exception("cluster %s: utilization collection failed", cluster.name)
    return collected


# ---------------------------------------------------------------------------------------------
# Simulator sweeps on the cluster: one task per point of the grid, a chord to gather the table.
# The points run the engine's own ``point_row`` and the chord its ``table``: the local pool of
# ``simulate --sweep --workers N`` calls the same two, so both give the same table.


@shared_task(name="scheduler.sweep_point", ignore_result=False)
def sweep_point(args: dict) -> dict:
    """Simulate one point (the simulator's arguments, as ``vars``) into its table row."""
    from scheduler.engine.simulate import run_one
    from scheduler.engine.sweep import point_row

    return point_row(argparse.Namespace(**args), run_one)


@shared_task(name="scheduler.sweep_table", ignore_result=False)
def sweep_table(rows: list[dict]) -> dict:
    """The chord's body: the rows of every point, in grid order, as one table."""
    from scheduler.engine.sweep import table

    return table(rows)


def start_sweep(a: argparse.Namespace) -> AsyncResult:
    """Queue the grid of ``a`` (the simulator's arguments) as a chord of point tasks: as many
    run at once as the workers listening have processes. ``.parent`` is the group of points
    (its ``completed_count()`` is the progress); ``.get()`` is the table."""
    from scheduler.engine.sweep import grid

    return chord(sweep_point.s(vars(point)) for point in grid(a))(sweep_table.s())
