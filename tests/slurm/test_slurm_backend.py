"""The Slurm backend against a live Slurm, ticks run in the test's own process: discovery,
launch, polling, and the reconciliation of every tick (each case has its test)."""

import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from fixtures_loop import make_workload
from polling import wait_for
from slurm_helpers import job, job_state, jobs, nodes, slurm, use_hosts

from fleet import services as host_services
from fleet.backends.slurm import SlurmFleet
from fleet.models import Cluster, Host, HostEvent
from scheduler import loop, services
from scheduler.models import Event, Run, RunGPU, UsageRollup, Workload

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def tick(lab):
    report = loop.tick(lab.cluster.pk)
    assert not report.error, report.error
    return report


def ticking(lab, predicate, what, timeout=60.0):
    """Tick (in this process) until ``predicate()`` holds."""

    def once():
        tick(lab)
        return predicate()

    return wait_for(once, timeout=timeout, what=what)


def workload(lab, command, *, gpus=1, resumable=True, min_runtime=60, budget=None):
    w = make_workload(lab, budget or lab.a1, gpus=gpus, resumable=resumable,
                      min_runtime=min_runtime, command=command,
                      submitted=timezone.now() - timedelta(seconds=1))
    return w


def live_run(w) -> Run:
    return Run.objects.get(workload=w, ended=None)


def held(run) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for host, index in RunGPU.objects.filter(run=run, held=True).values_list("host__name",
                                                                              "index"):
        out.setdefault(host, []).append(index)
    return {h: sorted(i) for h, i in out.items()}


def started_in_slurm(lab, w) -> Run:
    """Tick until the workload's live run has a RUNNING Slurm job; the run."""

    def ready():
        run = Run.objects.filter(workload=w, ended=None).first()
        if run and run.backend_id:
            found = job(run.backend_id)
            return run if found and found["job_state"] == "RUNNING" else None
        return None

    return ticking(lab, ready, f"{w.name} running in Slurm")


SLEEP = "sleep 600"


# -- discovery ---------------------------------------------------------------------------------


def test_sync_imports_the_nodes_and_gpus_and_never_duplicates(slurm_lab):
    hosts = {h.name: h.gpus for h in Host.objects.filter(cluster=slurm_lab.cluster)}
    assert hosts == {"n1": 8, "n2": 8, "n3": 8, "n4": 8}
    Host.objects.filter(name="n4").update(gpus=2)
    out = StringIO()
    call_command("slurm_sync", slurm_lab.cluster.name, stdout=out)
    assert "0 created, 1 updated, 3 unchanged" in out.getvalue()
    assert Host.objects.filter(cluster=slurm_lab.cluster).count() == 4
    assert Host.objects.get(cluster=slurm_lab.cluster, name="n4").gpus == 8


def test_sync_creates_a_cluster_with_its_gpu_type(clean_slurm, db):
    out = StringIO()
    call_command("slurm_sync", "fresh", "--create", "--slurm-conf", clean_slurm, stdout=out)
    fresh = Cluster.objects.get(name="fresh")
    assert fresh.backend == "slurm" and fresh.gpu_type == "H100"
    assert fresh.backend_config["slurm_conf"] == clean_slurm
    assert fresh.hosts.count() == 4 and fresh.gpu_count == 32


# -- launch and poll ----------------------------------------------------------------------------


def test_a_run_is_one_job_on_the_chosen_host_and_gpus_with_its_environment(slurm_lab):
    use_hosts(slurm_lab, "n1", "n2")
    first = workload(slurm_lab, f"echo first; {SLEEP}", gpus=3)
    second = workload(slurm_lab, "echo GPUS=$CUDA_VISIBLE_DEVICES RUN=$TIMESHARE_RUN_ID "
                      f"RES=$TIMESHARE_RESUMABLE CKPT=$TIMESHARE_CHECKPOINT_DIR; {SLEEP}", gpus=2)
    run1, run2 = started_in_slurm(slurm_lab, first), started_in_slurm(slurm_lab, second)
    for run in (run1, run2):
        found = job(run.backend_id)
        assert found["name"] == f"{slurm_lab.cluster.backend_config['job_prefix']}-{run.pk}"
        assert found["partition"] == "timeshare"
    # Slurm's GPU indices are the run's GPUs (after the reconciling ticks).
    ticking(slurm_lab, lambda: all(
        held(r) == {job(r.backend_id)["nodes"]: _indices(job(r.backend_id))}
        for r in (run1, run2)), "Timeshare's GPUs to match Slurm's")
    fleet = SlurmFleet(slurm_lab.cluster)
    out = fleet.output_path(second)
    line = wait_for(lambda: next((x for x in _lines(out) if x.startswith("GPUS=")), None),
                    what="the job's output")
    (host, indices), = held(run2).items()
    assert f"GPUS={','.join(map(str, indices))} " in line
    assert f"RUN={run2.pk} RES=1 CKPT={fleet.checkpoint_dir(second)}" in line
    assert set(held(run1)) == set(held(run2)) == {host}  # packed on one host
    assert not set(held(run1)[host]) & set(indices)


def test_a_failing_command_ends_failed_with_its_exit_code(slurm_lab):
    w = workload(slurm_lab, "echo failing; exit 3")
    ticking(slurm_lab, lambda: Workload.objects.get(pk=w.pk).state == "FAILED", "the failure")
    w.refresh_from_db()
    run = Run.objects.get(workload=w)
    assert w.exit_code == 3 and run.exit_code == 3 and run.end_reason == "failed"
    assert job_state(run.backend_id) == "FAILED"
    assert "code 3" in Event.objects.get(workload=w, kind="failed").reason


def test_a_command_that_succeeds_completes(slurm_lab):
    w = workload(slurm_lab, "echo done")
    ticking(slurm_lab, lambda: Workload.objects.get(pk=w.pk).state == "COMPLETED", "completion")
    assert Workload.objects.get(pk=w.pk).exit_code == 0
    assert "done" in SlurmFleet(slurm_lab.cluster).output_path(w).read_text()


def test_cancel_cancels_the_job(slurm_lab):
    w = workload(slurm_lab, SLEEP)
    run = started_in_slurm(slurm_lab, w)
    services.cancel(slurm_lab.alice, w)
    wait_for(lambda: job_state(run.backend_id) == "CANCELLED", what="the job cancelled")


def test_preemption_signals_every_process_then_cancels_after_the_grace(slurm_lab, tmp_path):
    marker = tmp_path / "term"
    w = workload(slurm_lab, f"trap 'echo TERM >> {marker}' TERM\necho trapping\n"
                 "while true; do sleep 1 & wait $!; done")
    run = started_in_slurm(slurm_lab, w)
    fleet = SlurmFleet(slurm_lab.cluster)
    wait_for(lambda: "trapping" in _lines(fleet.output_path(w)), what="the trap set")
    fleet.signal(run)
    wait_for(lambda: marker.exists(), what="the TERM marker")
    assert job(run.backend_id)["job_state"] == "RUNNING"  # trapped: keeps running
    fleet.stop(run)
    wait_for(lambda: job_state(run.backend_id) == "CANCELLED", what="the cancel")


# -- reconciliation ------------------------------------------------------------------------------


def test_a_job_timeshare_does_not_know_is_cancelled(slurm_lab):
    foreign = slurm("sbatch", "--parsable", "-p", "timeshare", "-w", "n3", "--gres=gpu:1",
                    "-J", "somebody-else", "-o", "/dev/null", input="#!/bin/bash\nsleep 600\n")
    foreign = foreign.strip()
    wait_for(lambda: job(foreign) and job(foreign)["job_state"] == "RUNNING", what="the job")
    tick(slurm_lab)
    wait_for(lambda: job_state(foreign) == "CANCELLED", what="the foreign job cancelled")
    slurm_lab.cluster.refresh_from_db()
    assert slurm_lab.cluster.backend_error == ""  # fixed, nothing left to report


def test_with_unknown_jobs_report_a_foreign_job_is_left_and_shown_on_the_cluster(slurm_lab):
    slurm_lab.cluster.backend_config["unknown_jobs"] = "report"
    slurm_lab.cluster.save()
    foreign = slurm("sbatch", "--parsable", "-p", "timeshare", "-w", "n3", "--gres=gpu:1",
                    "-J", "somebody-else", "-o", "/dev/null",
                    input="#!/bin/bash\nsleep 600\n").strip()
    wait_for(lambda: job(foreign) and job(foreign)["job_state"] == "RUNNING", what="the job")
    tick(slurm_lab)
    assert job(foreign)["job_state"] == "RUNNING"
    slurm_lab.cluster.refresh_from_db()
    assert f"Slurm job {foreign} (somebody-else" in slurm_lab.cluster.backend_error
    slurm("scancel", foreign)
    wait_for(lambda: job_state(foreign) != "RUNNING", what="the job to end")
    tick(slurm_lab)
    slurm_lab.cluster.refresh_from_db()
    assert slurm_lab.cluster.backend_error == ""


def test_a_job_of_a_run_that_ended_in_timeshare_is_cancelled(slurm_lab):
    w = workload(slurm_lab, SLEEP)
    run = started_in_slurm(slurm_lab, w)
    # The run ended in Timeshare but its scancel never happened (Slurm was down, say).
    Run.objects.filter(pk=run.pk).update(ended=timezone.now(), end_reason="cancelled")
    RunGPU.objects.filter(run=run).update(held=False)
    Workload.objects.filter(pk=w.pk).update(state="CANCELLED", finished=timezone.now())
    tick(slurm_lab)
    wait_for(lambda: job_state(run.backend_id) == "CANCELLED", what="the stale job")


def test_a_resumable_run_slurm_lost_is_requeued_as_a_new_job(slurm_lab):
    w = workload(slurm_lab, SLEEP, resumable=True)
    run = started_in_slurm(slurm_lab, w)
    old_job = run.backend_id
    Run.objects.filter(pk=run.pk).update(backend_id="999999")  # Slurm has no such job
    slurm("scancel", old_job)  # (and the real one is gone)
    tick(slurm_lab)
    run.refresh_from_db()
    assert run.ended is not None and "Slurm lost job 999999" in Event.objects.get(
        workload=w, kind="requeued").reason
    again = started_in_slurm(slurm_lab, w)
    assert again.number == 2 and again.backend_id not in (old_job, "999999")


def test_a_non_resumable_run_slurm_lost_ends_failed(slurm_lab):
    w = workload(slurm_lab, SLEEP, resumable=False)
    run = started_in_slurm(slurm_lab, w)
    Run.objects.filter(pk=run.pk).update(backend_id="999998")
    slurm("scancel", run.backend_id)
    tick(slurm_lab)
    w.refresh_from_db()
    assert w.state == "FAILED"
    assert "Slurm lost job 999998" in Event.objects.get(workload=w, kind="failed").reason


def test_a_launch_slurm_refuses_ends_failed_with_the_refusal_and_is_not_charged(slurm_lab):
    slurm_lab.cluster.backend_config["sbatch_args"] = ["--no-such-option"]  # sbatch refuses
    slurm_lab.cluster.save()
    w = workload(slurm_lab, SLEEP, resumable=True)
    ticking(slurm_lab, lambda: Workload.objects.get(pk=w.pk).state == "FAILED", "the refusal")
    assert "Slurm refused the job" in Event.objects.get(workload=w, kind="failed").reason
    assert not Run.objects.filter(workload=w).exists()  # it never started
    assert not UsageRollup.objects.filter(budget=slurm_lab.a1, gpu_seconds__gt=0.001).exists()


def test_gpus_are_rewritten_to_what_slurm_assigned(slurm_lab):
    use_hosts(slurm_lab, "n1")
    w = workload(slurm_lab, SLEEP, gpus=2)
    run = started_in_slurm(slurm_lab, w)
    assert held(run) == {"n1": [0, 1]}
    # Timeshare's record disagrees with Slurm's (say, the engine had picked 5 and 6).
    RunGPU.objects.filter(run=run, index=0).update(index=5)
    RunGPU.objects.filter(run=run, index=1).update(index=6)
    tick(slurm_lab)
    assert held(run) == {"n1": [0, 1]}


def test_a_node_drained_by_someone_else_drains_the_host(slurm_lab):
    slurm("scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=bad fan")
    host = Host.objects.get(cluster=slurm_lab.cluster, name="n3")
    tick(slurm_lab)
    host.refresh_from_db()
    assert host.state in ("DRAINING", "DRAINED")
    signal = host.events.get(kind="health_signal")
    assert signal.reason == "drained in Slurm by root: bad fan"
    assert nodes()["n3"]["reason"] == "bad fan"  # their reason stays visible in Slurm


def test_an_operator_drain_drains_the_node_with_the_reason_and_a_repair_resumes_it(slurm_lab):
    host = Host.objects.get(cluster=slurm_lab.cluster, name="n2")
    host_services.drain(slurm_lab.operator, host, "fan noise")
    node = nodes()["n2"]
    assert "DRAIN" in node["state_flags"] and node["reason"] == "timeshare: fan noise"
    ticking(slurm_lab, lambda: Host.objects.get(pk=host.pk).state == "AVAILABLE",
            "drained, repaired, back")
    assert "DRAIN" not in (nodes()["n2"]["state_flags"] or [])


def test_node_states_are_put_back_in_agreement(slurm_lab):
    host = Host.objects.get(cluster=slurm_lab.cluster, name="n4")
    Host.objects.filter(pk=host.pk).update(state="ESCALATED", state_reason="needs a human")
    tick(slurm_lab)
    node = nodes()["n4"]
    assert "DRAIN" in node["state_flags"]
    assert node["reason"].startswith("timeshare: ESCALATED: needs a human")
    Host.objects.filter(pk=host.pk).update(state="AVAILABLE", state_reason="")
    tick(slurm_lab)
    assert "DRAIN" not in (nodes()["n4"]["state_flags"] or [])


def test_the_repair_command_is_configurable(slurm_lab):
    host = Host.objects.get(cluster=slurm_lab.cluster, name="n1")
    now = timezone.now()
    config = slurm_lab.cluster.backend_config
    config["repair_command"] = "test {host} = n2"
    assert not SlurmFleet(slurm_lab.cluster).repair(host, now)
    config["repair_command"] = "test {host} = n1 && test {partition} = timeshare"
    assert SlurmFleet(slurm_lab.cluster).repair(host, now)
    slurm("scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=maintenance")
    assert not SlurmFleet(slurm_lab.cluster).repair(host, now)  # someone else's drain


def test_a_node_set_down_loses_its_runs_and_starts_the_repair_workflow(slurm_lab):
    use_hosts(slurm_lab, "n2")
    keep = workload(slurm_lab, SLEEP, resumable=True)
    lose = workload(slurm_lab, SLEEP, resumable=False)
    started_in_slurm(slurm_lab, keep), started_in_slurm(slurm_lab, lose)
    slurm("scontrol", "update", "NodeName=n2", "State=DOWN", "Reason=test failure")
    ticking(slurm_lab, lambda: Workload.objects.get(pk=lose.pk).state == "FAILED", "the loss")
    first = Run.objects.get(workload=keep, number=1)
    assert first.end_reason == "host_failure"
    assert Event.objects.filter(workload=keep, kind="requeued").exists()
    host = Host.objects.get(cluster=slurm_lab.cluster, name="n2")
    assert host.events.filter(kind="failed").exists()
    ticking(slurm_lab, lambda: Host.objects.get(pk=host.pk).state == "AVAILABLE", "the repair")
    again = started_in_slurm(slurm_lab, keep)
    assert again.number == 2


def test_a_successful_tick_clears_an_old_error(slurm_lab):
    Cluster.objects.filter(pk=slurm_lab.cluster.pk).update(
        backend_error="Slurm unreachable: earlier", backend_error_at=timezone.now())
    tick(slurm_lab)
    assert Cluster.objects.get(pk=slurm_lab.cluster.pk).backend_error == ""


def _indices(found) -> list[int]:
    from fleet.backends.slurm import job_gpus

    (indices,) = job_gpus(found).values()
    return indices


def _lines(path):
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        time.sleep(0.1)
        return []


def test_jobs_helper_sees_the_partition(clean_slurm):
    assert all(j["partition"] == "timeshare" for j in jobs())


def test_switching_a_simulated_cluster_to_slurm_retires_the_hosts_slurm_does_not_have(
        lab, clean_slurm):
    simulated = {h.name for h in lab.hosts}
    call_command("slurm_sync", lab.cluster.name, "--slurm-conf", clean_slurm,
                 stdout=StringIO())
    assert {h.name for h in Host.objects.filter(cluster=lab.cluster)} == {"n1", "n2", "n3", "n4"}
    assert Cluster.objects.get(pk=lab.cluster.pk).gpu_count == 32
    retired = HostEvent.objects.filter(kind="retired")
    assert {e.host.name for e in retired} == simulated


def test_the_users_log_says_the_grace_started_and_when_the_cancel_came(slurm_lab):
    w = workload(slurm_lab, "trap 'echo got TERM' TERM\necho trapping\n"
                 "while true; do sleep 1 & wait $!; done")
    run = started_in_slurm(slurm_lab, w)
    fleet = SlurmFleet(slurm_lab.cluster)
    wait_for(lambda: "trapping" in _lines(fleet.output_path(w)), what="the trap set")
    Run.objects.filter(pk=run.pk).update(signalled_at=timezone.now())
    run.refresh_from_db()
    fleet.signal(run)
    wait_for(lambda: "got TERM" in _lines(fleet.output_path(w)), what="the TERM")
    fleet.stop(run)
    wait_for(lambda: job_state(run.backend_id) == "CANCELLED", what="the cancel")
    lines = _lines(fleet.output_path(w))
    grace = next(i for i, x in enumerate(lines) if "for its grace of 3 s" in x)
    term = lines.index("got TERM")
    over = next(i for i, x in enumerate(lines) if "grace over at" in x)
    assert grace < term < over
