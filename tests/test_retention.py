"""Old occupancy samples are thinned to one a minute; recent ones stay at tick resolution."""

from datetime import UTC, datetime, timedelta

import pytest

from fleet.models import Cluster
from scheduler.models import OccupancySample
from scheduler.retention import compact_samples

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def sample(cluster, at):
    return OccupancySample.objects.create(
        cluster=cluster, at=at, total=8, available=8, allocated=4, unallocated=2,
        pending_workloads=1, pending_gpus=2,
    )


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="c1", gpu_type="H100")


def ticks(cluster, start, minutes):
    """A sample every 5 seconds for `minutes` minutes from `start`."""
    return [sample(cluster, start + timedelta(seconds=5 * i)) for i in range(12 * minutes)]


def test_samples_older_than_a_day_and_a_half_keep_the_last_of_each_minute(cluster):
    old = ticks(cluster, NOW - timedelta(hours=40), minutes=3)
    deleted = compact_samples(cluster.pk, NOW)
    assert deleted == 3 * 11
    kept = list(OccupancySample.objects.filter(cluster=cluster).order_by("at"))
    assert [s.pk for s in kept] == [old[11].pk, old[23].pk, old[35].pk]


def test_recent_samples_keep_their_tick_resolution(cluster):
    ticks(cluster, NOW - timedelta(hours=30), minutes=2)
    assert compact_samples(cluster.pk, NOW) == 0
    assert OccupancySample.objects.count() == 24


def test_compacting_twice_deletes_nothing_more(cluster):
    ticks(cluster, NOW - timedelta(hours=40), minutes=2)
    compact_samples(cluster.pk, NOW)
    assert compact_samples(cluster.pk, NOW) == 0
    assert OccupancySample.objects.count() == 2


def test_other_clusters_are_left_alone(cluster):
    other = Cluster.objects.create(name="c2", gpu_type="B200")
    ticks(other, NOW - timedelta(hours=40), minutes=1)
    assert compact_samples(cluster.pk, NOW) == 0
    assert OccupancySample.objects.filter(cluster=other).count() == 12
