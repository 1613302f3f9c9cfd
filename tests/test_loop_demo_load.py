"""`manage.py demo_load` replays the Philly trace onto the demo budgets, deterministically,
and the loop schedules what it submits."""

from io import StringIO

import pytest
from django.core.management import call_command

from portal import demo
from scheduler import loop
from scheduler.engine.traces import TRACES_DIR
from scheduler.models import Cluster, Run, Workload

pytestmark = pytest.mark.skipif(not (TRACES_DIR / "philly_vc.csv").exists(),
                                reason="../shared/traces/philly_vc.csv not available")


def replay(**options):
    out = StringIO()
    options.setdefault("start_day", 30.0)  # a quiet night: a small, quick slice
    call_command("demo_load", "--once", "--window", "300", stdout=out, stderr=StringIO(),
                 **options)
    return out.getvalue()


def test_the_demo_load_submits_a_seeded_slice_and_the_loop_runs_it(db):
    demo.seed()
    text = replay()
    assert "VCs -> leaves" in text
    first = list(Workload.objects.order_by("pk").values_list(
        "name", "budget__path", "cluster__name", "gpus", "min_runtime", "resumable",
        "expected_duration"))
    assert len(first) > 5
    assert {b for _, b, *_ in first} <= set(
        Workload.objects.values_list("budget__path", flat=True))
    for cluster in Cluster.objects.all():
        loop.tick(cluster.pk)
    assert Run.objects.exists()
    Workload.objects.all().delete()
    replay()
    again = list(Workload.objects.order_by("pk").values_list(
        "name", "budget__path", "cluster__name", "gpus", "min_runtime", "resumable",
        "expected_duration"))
    assert again == first  # same seed, same load
