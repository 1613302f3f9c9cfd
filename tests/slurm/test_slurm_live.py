"""End to end on the live Slurm: a REAL Celery worker (beat ticking every second) schedules on
PostgreSQL, Slurm executes. Waits poll with deadlines; what is asserted is what happened and
in which order, never how fast."""

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from polling import wait_for
from slurm_helpers import job, job_state, nodes, slurm, use_hosts

from fleet.backends.slurm import SlurmFleet, job_gpus
from fleet.models import Host, HostEvent
from scheduler import loop, services
from scheduler.models import Event, Run, RunGPU, UsageRollup, Workload

pytestmark = [pytest.mark.slurm, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

SLEEP = "sleep 600"


@pytest.fixture
def live(slurm_lab, celery_worker):
    return slurm_lab


def state(w):
    return Workload.objects.get(pk=w.pk).state


def submit(lab, user, budget, command, **fields):
    defaults = dict(name="job", cluster=lab.cluster, resumable=True, gpus=1, min_runtime=60)
    defaults.update(fields)
    return services.submit(user, budget=budget, command=command, **defaults)


def running_job(w, number=None):
    """The workload's live run once its Slurm job is RUNNING (and, if given, its number)."""
    run = Run.objects.filter(workload=w, ended=None).exclude(backend_id="").first()
    if run is None or (number is not None and run.number != number):
        return None
    found = job(run.backend_id)
    return (run, found) if found and found["job_state"] == "RUNNING" else None


def held(run):
    out = {}
    for host, index in RunGPU.objects.filter(run=run, held=True).values_list("host__name",
                                                                              "index"):
        out.setdefault(host, []).append(index)
    return {h: sorted(i) for h, i in out.items()}


def output(lab, w) -> str:
    path: Path = SlurmFleet(lab.cluster).output_path(w)
    return path.read_text() if path.exists() else ""


def test_a_submitted_workload_runs_on_the_chosen_node_and_gpus(live):
    use_hosts(live, "n1", "n2")
    report = "echo NODE=$SLURMD_NODENAME GPUS=$CUDA_VISIBLE_DEVICES; " + SLEEP
    first = submit(live, live.alice, live.a1, report, gpus=5)
    wait_for(lambda: running_job(first), what="the first job running")
    second = submit(live, live.alice, live.a1, report, gpus=3)
    run, found = wait_for(lambda: running_job(second), what="the second job running")
    line = wait_for(lambda: next((x for x in output(live, second).splitlines()
                                  if x.startswith("NODE=")), None), what="the job's report")
    # What the job sees is what Timeshare holds for the run.
    wait_for(lambda: held(run) == job_gpus(job(run.backend_id)), what="GPUs reconciled")
    (host, indices), = held(run).items()
    assert line == f"NODE={host} GPUS={','.join(map(str, indices))}"
    assert found["nodes"] == host
    first_run = Run.objects.get(workload=first, ended=None)
    assert not set(held(first_run).get(host, [])) & set(indices)  # nobody else's GPUs


def test_a_higher_ranked_workload_preempts_after_min_runtime_with_term_and_grace(
        live, tmp_path):
    use_hosts(live, "n1")
    UsageRollup.objects.create(cluster=live.cluster, budget=live.b1,
                               hour=loop.floor_hour(live.cluster.created),
                               gpu_seconds=0.3 * 8 * 86400 * 3)  # proj-b1 at ~300%
    marker = tmp_path / "term"
    victim = submit(live, live.bob, live.b1,
                    f"trap 'echo TERM run $TIMESHARE_RUN_NUMBER >> {marker}' TERM\n"
                    "while true; do sleep 1 & wait $!; done", gpus=6, min_runtime=4)
    first, first_job = wait_for(lambda: running_job(victim), what="the victim running")
    alice = submit(live, live.alice, live.a1, "sleep 3", gpus=4, min_runtime=60)
    wait_for(lambda: state(alice) in ("RUNNING", "COMPLETED"), timeout=120,
             what="alice to get GPUs")
    first.refresh_from_db()
    assert first.signalled_at >= first.protected_until  # only after its minimum runtime
    assert first.ended >= first.signalled_at + loop.timedelta(seconds=live.cluster.grace)
    assert first.end_reason == "preempted"
    assert marker.read_text().startswith("TERM run 1")  # every process got TERM
    wait_for(lambda: job_state(first.backend_id) == "CANCELLED", what="the cancel")
    kinds = list(Event.objects.filter(workload=victim).values_list("kind", flat=True))
    assert kinds[:4] == ["submitted", "started", "signalled", "requeued"]
    # Alice finishes; the victim comes back as a new run, a new Slurm job.
    second, second_job = wait_for(lambda: running_job(victim, number=2), timeout=120,
                                  what="the victim requeued as a new job")
    assert second.backend_id != first.backend_id
    assert state(alice) == "COMPLETED"


def test_an_operator_drain_in_the_portal_drains_the_node_and_it_resumes_after_repair(live):
    use_hosts(live, "n3")
    host = Host.objects.get(cluster=live.cluster, name="n3")
    w = submit(live, live.bob, live.b1, SLEEP, min_runtime=0)  # unallocated: leaves at once
    wait_for(lambda: running_job(w), what="the job running")
    client = Client()
    client.force_login(live.operator)
    response = client.post(reverse("scheduler:host_drain", args=[host.pk]),
                           {"reason": "fan noise"})
    assert response.status_code in (200, 302)
    node = nodes()["n3"]
    assert "DRAIN" in node["state_flags"] and "fan noise" in node["reason"]
    wait_for(lambda: HostEvent.objects.filter(host=host, kind="returned").exists(),
             timeout=120, what="drained, repaired and back")
    kinds = list(HostEvent.objects.filter(host=host).order_by("at", "id")
                 .values_list("kind", flat=True))
    assert kinds[:2] == ["drain_requested", "drained"] and "repair_succeeded" in kinds
    wait_for(lambda: "DRAIN" not in (nodes()["n3"]["state_flags"] or []),
             what="the node resumed in Slurm")
    assert Host.objects.get(pk=host.pk).state == "AVAILABLE"
    first = Run.objects.get(workload=w, number=1)
    assert first.end_reason in ("preempted", "drained")


def test_a_node_set_down_in_slurm_is_noticed_and_its_resumable_work_requeued(live):
    use_hosts(live, "n2", "n4")
    w = submit(live, live.alice, live.a1, SLEEP, gpus=8)
    run, found = wait_for(lambda: running_job(w), what="the job running")
    node = found["nodes"]
    slurm("scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=cable pulled")
    host = Host.objects.get(cluster=live.cluster, name=node)
    wait_for(lambda: HostEvent.objects.filter(host=host, kind="failed").exists(),
             what="the failure noticed")
    run.refresh_from_db()
    assert run.end_reason == "host_failure"
    assert Event.objects.filter(workload=w, kind="requeued").exists()
    again, again_job = wait_for(lambda: running_job(w, number=2), timeout=120,
                                what="requeued as a new job")
    assert again.backend_id != run.backend_id
    wait_for(lambda: Host.objects.get(pk=host.pk).state == "AVAILABLE", timeout=120,
             what="the node repaired")


def test_a_failing_command_ends_failed_with_its_exit_code(live):
    w = submit(live, live.alice, live.a1, "echo about to fail; exit 7")
    wait_for(lambda: state(w) == "FAILED", what="the failure")
    w.refresh_from_db()
    assert w.exit_code == 7
    assert Run.objects.get(workload=w).exit_code == 7
    assert "about to fail" in output(live, w)
