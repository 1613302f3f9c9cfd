"""How long each cluster's last tick took: recorded by the Celery task around the loop, read
by the portal's /metrics. It is not in the database: Django's cache holds it (shared between
the worker and the portal when the cache is Redis; per process otherwise)."""

from __future__ import annotations

import time

from django.core.cache import cache

TICK_KEY = "timeshare:metrics:tick:{}"


def record_tick(cluster_id: int, seconds: float) -> None:
    """How long the last tick of a cluster took."""
    cache.set(TICK_KEY.format(cluster_id), (float(seconds), time.time()), timeout=None)


def last_tick_seconds(cluster_ids) -> dict[int, float]:
    """The last recorded tick duration of each cluster that has one."""
    ids = list(cluster_ids)
    found = cache.get_many([TICK_KEY.format(pk) for pk in ids])
    return {pk: found[TICK_KEY.format(pk)][0] for pk in ids if found.get(TICK_KEY.format(pk))}
