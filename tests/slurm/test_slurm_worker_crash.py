"""A REAL Celery worker killed (SIGKILL to its whole process group, its Slurm commands
included) at the worst moments, then a new one started: what the dead worker left behind is
put right from Slurm's own records, and nobody is failed or charged for work Slurm never ran.
Likewise when Slurm cannot be reached at the moment of a launch."""

import shutil
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Sum
from polling import wait_for
from slurm_helpers import accounting_record, job, slurm

from scheduler import services
from scheduler.models import Event, Run, UsageRollup, Workload

pytestmark = [pytest.mark.slurm, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def accounted_lab(slurm_lab):
    if "slurmdbd" not in slurm("scontrol", "show", "config"):
        pytest.skip("the test cluster runs without accounting (TIMESHARE_SLURM_ACCOUNTING=0)")
    return slurm_lab


def submit(lab, command, *, resumable, name):
    return services.submit(lab.alice, budget=lab.a1, command=command, name=name,
                           cluster=lab.cluster, resumable=resumable, gpus=1, min_runtime=60)


def charged(lab) -> float:
    return UsageRollup.objects.filter(cluster=lab.cluster).aggregate(
        s=Sum("gpu_seconds"))["s"] or 0.0


def charges_of_runs() -> float:
    """What the runs in the database account for: GPUs x (charged until - started)."""
    return sum(r.gpus * (r.accounted_until - r.started).total_seconds()
               for r in Run.objects.filter(allocated=True))


def test_a_worker_killed_in_a_launch_burst_fails_and_charges_nothing_slurm_never_ran(
        accounted_lab, celery_workers):
    worker = celery_workers.start()
    with transaction.atomic():  # 24 one-GPU workloads at once: one burst of 24 launches
        workloads = [submit(accounted_lab, "sleep 600", resumable=i % 2 == 0, name=f"b{i}")
                     for i in range(24)]
    deadline = time.monotonic() + 120
    while not Run.objects.exclude(backend_id="").exists():  # the first "launched as job"
        assert time.monotonic() < deadline, "no launch within 120 s"
        time.sleep(0.02)
    celery_workers.kill(worker)
    cut_short = Run.objects.filter(ended=None, backend_id="").count()
    assert cut_short > 0, "the kill came after the whole burst: nothing was tested"

    second = celery_workers.start()

    def all_running():
        runs = list(Run.objects.filter(ended=None).exclude(backend_id=""))
        return len(runs) == 24 and all(
            (found := job(r.backend_id)) and found["job_state"] == "RUNNING" for r in runs)

    wait_for(all_running, timeout=180, what="all 24 workloads running in Slurm")
    assert set(Workload.objects.filter(pk__in=[w.pk for w in workloads])
               .values_list("state", flat=True)) == {"RUNNING"}
    assert not Event.objects.filter(kind="failed").exists()
    # Every run Timeshare keeps is a Slurm job; the ones Slurm never got were taken back.
    assert Run.objects.count() == 24
    celery_workers.kill(second)  # no tick between the two sums below
    assert charged(accounted_lab) == pytest.approx(charges_of_runs(), abs=0.01)


def test_jobs_that_end_while_the_worker_is_down_past_min_job_age_close_from_accounting(
        accounted_lab, celery_workers):
    worker = celery_workers.start()
    done = submit(accounted_lab, "sleep 4", resumable=True, name="finishes")
    failing = submit(accounted_lab, "sleep 4; exit 5", resumable=False, name="fails")

    def launched(w):
        run = Run.objects.filter(workload=w, ended=None).exclude(backend_id="").first()
        return run if run and (found := job(run.backend_id)) and \
            found["job_state"] == "RUNNING" else None

    runs = [wait_for(lambda w=w: launched(w), what=f"{w.name} running") for w in (done, failing)]
    celery_workers.kill(worker)
    for run in runs:  # ended, and past MinJobAge: squeue has forgotten them
        wait_for(lambda r=run: job(r.backend_id) is None, timeout=120,
                 what=f"job {run.backend_id} out of squeue")
    time.sleep(3)  # and the worker stays down a little longer still

    celery_workers.start()
    wait_for(lambda: not Workload.objects.filter(pk__in=[done.pk, failing.pk],
                                                 state="RUNNING").exists(),
             timeout=120, what="both workloads closed")
    done.refresh_from_db()
    failing.refresh_from_db()
    assert (done.state, done.exit_code) == ("COMPLETED", 0)
    assert (failing.state, failing.exit_code) == ("FAILED", 5)
    assert Run.objects.filter(workload=done).count() == 1  # it did not run a second time
    for run in runs:
        run.refresh_from_db()
        record = accounting_record(run.backend_id)
        assert run.ended == record["end"]
        assert run.accounted_until == run.ended  # not charged for the outage
    assert charged(accounted_lab) == pytest.approx(
        sum((r.ended - r.started) / timedelta(seconds=1) for r in runs), abs=0.01)


def test_a_launch_that_cannot_reach_slurm_waits_in_the_queue_until_it_can(
        accounted_lab, celery_workers, tmp_path):
    # The worker's Slurm client directory has every command but sbatch: the tick reads Slurm
    # as usual, and each launch fails to reach it.
    clients = tmp_path / "slurm-bin"
    clients.mkdir()
    for command in ("squeue", "sinfo", "scontrol", "scancel", "sacct"):
        (clients / command).symlink_to(shutil.which(command))
    cluster = accounted_lab.cluster
    cluster.backend_config = {**cluster.backend_config, "bin_dir": str(clients)}
    cluster.save()
    worker = celery_workers.start()
    w = submit(accounted_lab, "sleep 600", resumable=False, name="patient")
    wait_for(lambda: "could not be launched: Slurm unreachable: sbatch not found"
             in Workload.objects.get(pk=w.pk).queue_reason, what="the launch to fail")
    assert Workload.objects.get(pk=w.pk).state in ("PENDING", "RUNNING")  # it tries again

    (clients / "sbatch").symlink_to(shutil.which("sbatch"))  # Slurm answers again
    run = wait_for(lambda: Run.objects.filter(workload=w, ended=None).exclude(backend_id="")
                   .first(), what="the workload launched")
    assert run.number == 1  # the attempts that never reached Slurm left no run behind
    assert Event.objects.filter(workload=w, kind="requeued").exists()
    assert not Event.objects.filter(workload=w, kind="failed").exists()
    celery_workers.kill(worker)  # no tick between the two sums below
    assert charged(accounted_lab) == pytest.approx(charges_of_runs(), abs=0.01)
