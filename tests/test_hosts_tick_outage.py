"""Without Slurm accounting, a job that ends while no tick runs for longer than MinJobAge is
gone from squeue: the cluster page says what that costs, and the portal warns once the ticks
have stopped for that long."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from fleet.models import Cluster
from scheduler.models import OccupancySample

NO_ACCOUNTING = {"accounting": False, "min_job_age": 300}


def slurm_cluster(fleet, facts, last_tick_ago):
    cluster = Cluster.objects.get(name="h100")
    cluster.backend, cluster.backend_facts = "slurm", facts
    cluster.save()
    OccupancySample.objects.create(
        cluster=cluster, at=timezone.now() - timedelta(seconds=last_tick_ago), total=10,
        available=10, allocated=0, unallocated=0, pending_workloads=0, pending_gpus=0)
    return cluster


def test_the_cluster_page_says_what_a_worker_outage_costs_without_accounting(fleet, client_for):
    slurm_cluster(fleet, NO_ACCOUNTING, last_tick_ago=5)
    page = client_for("operator").get(reverse("scheduler:hosts", args=["h100"]))
    text = page.content.decode()
    assert "No Slurm accounting: a finished job stays in squeue only 300 s" in text
    assert 'id="tick-outage"' not in text


def test_the_portal_warns_when_ticks_stopped_longer_than_min_job_age(fleet, client_for):
    slurm_cluster(fleet, NO_ACCOUNTING, last_tick_ago=11 * 60)
    for url in (reverse("scheduler:hosts", args=["h100"]), reverse("home")):
        text = client_for("operator").get(url).content.decode()
        assert "No scheduling tick on h100 for 11 min, longer than Slurm&#x27;s MinJobAge " \
               "(300 s)" in text, url


def test_with_accounting_a_long_outage_is_no_warning(fleet, client_for):
    slurm_cluster(fleet, {"accounting": True, "min_job_age": 300}, last_tick_ago=3600)
    text = client_for("operator").get(reverse("scheduler:hosts", args=["h100"])).content.decode()
    assert "Slurm accounting (slurmdbd)" in text
    assert "No scheduling tick" not in text
