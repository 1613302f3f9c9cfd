"""Jobs that left ``squeue`` while no tick ran, read back from Slurm accounting (slurmdbd on
the test cluster's MariaDB, MinJobAge 2 s), and runs whose launch never reached Slurm. Ticks
run in the test's own process, so that each test decides when Timeshare looks."""

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone
from fixtures_loop import make_workload
from polling import wait_for
from slurm_helpers import accounting_record, job, slurm, use_hosts

from fleet.locks import LOCK_NAMESPACE
from fleet.models import Cluster, Host
from scheduler import loop
from scheduler.models import Event, Run, RunGPU, UsageRollup, Workload

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def accounted_lab(slurm_lab):
    if "slurmdbd" not in slurm("scontrol", "show", "config"):
        pytest.skip("the test cluster runs without accounting (TIMESHARE_SLURM_ACCOUNTING=0)")
    return slurm_lab


def tick(lab):
    report = loop.tick(lab.cluster.pk)
    assert not report.error, report.error
    return report


def ticking(lab, predicate, what, timeout=60.0):
    def once():
        tick(lab)
        return predicate()

    return wait_for(once, timeout=timeout, what=what)


def workload(lab, command, *, resumable=True, gpus=1, min_runtime=60, budget=None):
    return make_workload(lab, budget or lab.a1, gpus=gpus, resumable=resumable,
                         min_runtime=min_runtime, command=command,
                         submitted=timezone.now() - timedelta(seconds=1))


def launched(lab, w) -> Run:
    """Tick until the workload's live run has a Slurm job id; the run."""
    return ticking(lab, lambda: Run.objects.filter(workload=w, ended=None)
                   .exclude(backend_id="").first(), f"{w.name} launched")


def gone_from_squeue(job_id) -> None:
    wait_for(lambda: job(job_id) is None, timeout=60, what=f"job {job_id} out of squeue")


def charged(lab, budget) -> float:
    return UsageRollup.objects.filter(cluster=lab.cluster, budget=budget).aggregate(
        s=Sum("gpu_seconds"))["s"] or 0.0


def seconds(a, b) -> float:
    return (b - a).total_seconds()


def test_a_job_that_failed_while_no_tick_ran_ends_with_its_exit_code_and_end_time(
        accounted_lab):
    w = workload(accounted_lab, "sleep 1; exit 3", resumable=False)
    run = launched(accounted_lab, w)
    gone_from_squeue(run.backend_id)  # no tick meanwhile: only accounting remembers it
    tick(accounted_lab)
    record = accounting_record(run.backend_id)
    w.refresh_from_db()
    run.refresh_from_db()
    assert (w.state, w.exit_code, run.exit_code) == ("FAILED", 3, 3)
    assert run.ended == record["end"]


def test_a_job_that_completed_while_no_tick_ran_completes_and_does_not_run_again(
        accounted_lab):
    w = workload(accounted_lab, "sleep 1", resumable=True)
    run = launched(accounted_lab, w)
    gone_from_squeue(run.backend_id)
    tick(accounted_lab)
    w.refresh_from_db()
    assert w.state == "COMPLETED" and w.exit_code == 0
    assert Run.objects.filter(workload=w).count() == 1


def test_a_job_whose_id_was_never_recorded_is_found_by_name_in_accounting(accounted_lab):
    w = workload(accounted_lab, "sleep 1", resumable=False)
    run = launched(accounted_lab, w)
    real_id = run.backend_id
    # The worker died between sbatch's answer and writing the id down.
    Run.objects.filter(pk=run.pk).update(backend_id="")
    gone_from_squeue(real_id)
    tick(accounted_lab)
    run.refresh_from_db()
    assert run.backend_id == real_id
    assert Workload.objects.get(pk=w.pk).state == "COMPLETED"


def test_charges_stop_at_the_end_slurm_recorded(accounted_lab):
    w = workload(accounted_lab, "sleep 2", resumable=False)
    run = launched(accounted_lab, w)
    gone_from_squeue(run.backend_id)
    tick(accounted_lab)
    run.refresh_from_db()
    record = accounting_record(run.backend_id)
    assert charged(accounted_lab, accounted_lab.a1) == pytest.approx(
        seconds(run.started, record["end"]) * run.gpus)


def orphan_run(lab, w, *, started_ago: float, charged_for: float) -> Run:
    """The state a worker killed between the commit and sbatch leaves: a live run holding its
    GPUs, charged by a later tick, with no Slurm job."""
    now = timezone.now()
    host = Host.objects.get(cluster=lab.cluster, name="n1")
    started = now - timedelta(seconds=started_ago)
    run = Run.objects.create(workload=w, number=1, allocated=True, gpus=w.gpus, started=started,
                             protected_until=started + timedelta(seconds=w.min_runtime),
                             accounted_until=started)
    RunGPU.objects.bulk_create(RunGPU(run=run, host=host, index=i) for i in range(w.gpus))
    Workload.objects.filter(pk=w.pk).update(state="RUNNING", queue_position=None)
    # what the earlier tick charged
    loop.charge_usage([run], started + timedelta(seconds=charged_for))
    Run.objects.filter(pk=run.pk).update(accounted_until=run.accounted_until)
    return run


def test_a_run_that_never_reached_slurm_goes_back_to_the_queue_unfailed_and_uncharged(
        accounted_lab):
    use_hosts(accounted_lab, "n1")
    w = workload(accounted_lab, "sleep 600", resumable=False, gpus=2)
    orphan = orphan_run(accounted_lab, w, started_ago=30, charged_for=20)
    assert charged(accounted_lab, accounted_lab.a1) == pytest.approx(40)
    tick(accounted_lab)
    assert not Run.objects.filter(pk=orphan.pk).exists()
    requeued = Event.objects.get(workload=w, kind="requeued")
    assert f"no job named ts-test-{os.getpid()}-{orphan.pk} in squeue or Slurm accounting" \
        in requeued.reason
    assert not Event.objects.filter(workload=w, kind="failed").exists()
    # Taken back and started again at once (n1 is free): only the new run is charged.
    again = Run.objects.get(workload=w, ended=None)
    assert again.number == 1 and again.started > orphan.started + timedelta(seconds=29)
    assert charged(accounted_lab, accounted_lab.a1) == pytest.approx(
        seconds(again.started, again.accounted_until) * 2, abs=0.01)


def test_a_run_is_not_taken_back_while_a_launch_is_in_flight(accounted_lab):
    use_hosts(accounted_lab, "n1")
    w = workload(accounted_lab, "sleep 600", resumable=False)
    orphan = orphan_run(accounted_lab, w, started_ago=5, charged_for=0)
    other = connection.copy()  # another worker, launching this cluster's runs
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock_shared(%s, %s)",
                           [LOCK_NAMESPACE["launches"], accounted_lab.cluster.pk])
        tick(accounted_lab)
        assert Run.objects.filter(pk=orphan.pk, ended=None).exists()
    finally:
        other.close()  # the other worker is gone: its lock with it
    tick(accounted_lab)
    assert not Run.objects.filter(pk=orphan.pk).exists()


def test_slurm_unreachable_during_a_launch_leaves_the_workload_waiting_with_the_reason(
        accounted_lab, tmp_path):
    # The cluster reads its own copy of slurm.conf; the controller moves away just as the
    # launch starts (the copy names a port nobody listens on): sbatch cannot reach it.
    conf = tmp_path / "slurm.conf"
    good = Path(accounted_lab.cluster.backend_config["slurm_conf"]).read_text()
    conf.write_text(good)
    cluster = Cluster.objects.get(pk=accounted_lab.cluster.pk)
    cluster.backend_config = {**cluster.backend_config, "slurm_conf": str(conf)}
    cluster.save()
    accounted_lab.cluster = cluster
    w = workload(accounted_lab, "sleep 600", resumable=False)

    def controller_gone():
        conf.write_text("\n".join("SlurmctldPort=16999" if line.startswith("SlurmctldPort=")
                                  else line for line in good.splitlines()))

    with transaction.atomic():
        transaction.on_commit(controller_gone)  # before the tick's own: just before sbatch
        report = loop.tick(cluster.pk)
    assert not report.error and report.decisions  # the tick itself reached Slurm, and started it
    w.refresh_from_db()
    assert w.state == "PENDING"
    assert "could not be launched: Slurm unreachable" in w.queue_reason
    assert not Run.objects.filter(workload=w).exists()
    assert not Event.objects.filter(workload=w, kind="failed").exists()
    assert charged(accounted_lab, accounted_lab.a1) == 0
    conf.write_text(good)  # the controller is back
    run = launched(accounted_lab, w)
    assert run.number == 1


def test_a_run_starts_when_slurm_started_its_job(accounted_lab):
    use_hosts(accounted_lab, "n1")
    # An unallocated job that ignores TERM holds n1 until Slurm kills it (KillWait 5 s).
    victim = workload(accounted_lab, "trap '' TERM; while true; do sleep 1; done",
                      min_runtime=0, gpus=8)
    launched(accounted_lab, victim)
    w = workload(accounted_lab, "sleep 600", gpus=8, min_runtime=60)
    run = ticking(accounted_lab, lambda: Run.objects.filter(workload=w, ended=None)
                  .exclude(backend_id="").first(), "the preempting run launched")
    decided = run.started
    found = wait_for(lambda: (j := job(run.backend_id)) and j["job_state"] == "RUNNING" and j,
                     what="its job running")
    tick(accounted_lab)
    run.refresh_from_db()
    slurm_start = datetime.fromtimestamp(found["start_time"], tz=UTC)
    assert slurm_start > decided  # it waited for the victim's job to end
    assert run.started == slurm_start
    assert run.protected_until == slurm_start + timedelta(seconds=60)
