"""Occupancy samples are written every tick, a few seconds apart, for the live charts. Once
they are older than a day and a half, one a minute is all any chart or report reads (capacity
and usage have their own hourly rollups), so the others are deleted: the table grows by
~1,440 rows per cluster and day instead of ~17,000."""

from datetime import datetime, timedelta

from django.db.models import Max
from django.db.models.functions import TruncMinute

from scheduler.models import OccupancySample

FULL_RESOLUTION = timedelta(hours=36)
# Each pass looks this far behind the full-resolution edge, so an hourly task that missed a
# day of runs (a stopped beat) still catches up.
LOOKBACK = timedelta(days=2)


def compact_samples(cluster_id: int, now: datetime) -> int:
    """Keep the latest sample of every minute older than FULL_RESOLUTION; return how many
    samples were deleted. Running it twice deletes nothing the second time."""
    edge = now - FULL_RESOLUTION
    old = OccupancySample.objects.filter(
        cluster_id=cluster_id, at__gte=edge - LOOKBACK, at__lt=edge
    )
    latest_per_minute = (
        old.annotate(minute=TruncMinute("at")).values("minute").annotate(last=Max("pk"))
    )
    deleted, _ = old.exclude(pk__in=latest_per_minute.values("last")).delete()
    return deleted
