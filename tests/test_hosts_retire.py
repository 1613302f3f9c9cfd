"""A cluster switched to another backend retires the hosts that backend does not know: each
gets a host event saying why, and from then on no tick schedules on it and no capacity,
cluster size or report counts it. Hosts the backend knows again come back."""

import json

from django.test import Client
from django.urls import reverse
from fixtures_loop import at, make_workload

from fleet import services as host_services
from fleet.models import Cluster, Host, HostEvent
from scheduler import loop
from scheduler.models import Event, OccupancySample, Run, RunGPU


def switch(lab, known, backend="slurm"):
    retired = host_services.switch_backend(lab.cluster, backend, known, lab.operator)
    Cluster.objects.filter(pk=lab.cluster.pk).update(backend=backend)
    return retired


def test_hosts_the_new_backend_does_not_know_retire_with_a_host_event(lab):
    assert switch(lab, {"lab-1"}) == ["lab-0"]
    host = Host.with_retired.get(name="lab-0")
    assert host.retired is not None
    event = HostEvent.objects.get(host=host)
    assert (event.kind, event.by) == ("retired", lab.operator)
    assert event.reason == ("the cluster's backend changed from simulated to slurm, which "
                            "does not know this host")
    assert Host.objects.get(name="lab-1").retired is None


def test_retired_hosts_count_in_no_cluster_size(lab):
    switch(lab, {"lab-1"})
    assert Cluster.objects.get(pk=lab.cluster.pk).gpu_count == 4
    assert Cluster.objects.with_gpu_count().get(pk=lab.cluster.pk).gpu_count == 4


def test_a_tick_counts_only_live_hosts_in_its_capacity(lab):
    # retired on the way to another backend; the tick still runs the simulated one here
    host_services.switch_backend(lab.cluster, "slurm", {"lab-1"})
    loop.tick(lab.cluster.pk, at(0))
    sample = OccupancySample.objects.get(cluster=lab.cluster)
    assert (sample.total, sample.available) == (4, 4)


def test_a_backend_without_an_inventory_retires_nothing(lab):
    Cluster.objects.filter(pk=lab.cluster.pk).update(backend="slurm")
    assert host_services.switch_backend(lab.cluster, "simulated", None) == []
    assert Host.objects.filter(cluster=lab.cluster).count() == 2


def test_a_host_the_backend_knows_again_comes_back(lab):
    switch(lab, {"lab-1"})
    switch(lab, {"lab-0", "lab-1"}, backend="other")
    assert Host.objects.filter(cluster=lab.cluster).count() == 2


def test_a_run_on_a_retired_host_is_lost_and_its_resumable_workload_requeued(lab):
    w = make_workload(lab, lab.a1, gpus=4, resumable=True, submitted=at(-10))
    loop.tick(lab.cluster.pk, at(0))
    run = Run.objects.get(workload=w)
    host = RunGPU.objects.filter(run=run).first().host.name
    host_services.switch_backend(lab.cluster, "slurm", {"lab-0", "lab-1"} - {host})
    loop.tick(lab.cluster.pk, at(10))
    run.refresh_from_db()
    assert run.end_reason == "host_failure"
    assert "its host was retired" in Event.objects.get(workload=w, kind="requeued").reason


def admin_change(lab, **fields):
    lab.operator.is_staff = lab.operator.is_superuser = True
    lab.operator.save()
    client = Client()
    client.force_login(lab.operator)
    c = lab.cluster
    data = {"name": c.name, "gpu_type": c.gpu_type, "description": c.description,
            "created_0": f"{c.created:%Y-%m-%d}", "created_1": f"{c.created:%H:%M:%S}",
            "max_min_runtime": c.max_min_runtime, "window": c.window,
            "hysteresis": c.hysteresis, "grace": c.grace, "backend": c.backend,
            "backend_config": json.dumps(c.backend_config),
            "unallocated_grace": c.unallocated_grace, "pass_interval": c.pass_interval,
            "telemetry": c.telemetry, "idle_threshold": c.idle_threshold,
            "idle_period": c.idle_period}
    data.update(fields)
    return client.post(reverse("admin:fleet_cluster_change", args=[c.pk]), data, follow=True)


def test_an_admin_switch_to_an_unreachable_slurm_retires_nothing_and_says_to_sync(lab):
    response = admin_change(lab, backend="slurm",
                            backend_config=json.dumps({"slurm_conf": "/nonexistent/slurm.conf"}))
    assert Cluster.objects.get(pk=lab.cluster.pk).backend == "slurm"
    assert Host.objects.filter(cluster=lab.cluster).count() == 2
    [message] = [str(m) for m in response.context["messages"] if "Hosts" in str(m)]
    assert message.startswith("Hosts not checked against the new backend (Slurm unreachable")
    assert message.endswith("run manage.py slurm_sync lab.")
