"""The cluster's idle policy in the live loop: off by default; on, an allocated run flagged
idle is signalled once past its minimum runtime and requeued after the grace period."""

from fixtures_loop import at, make_workload, refresh, tick

from scheduler.models import Event, Run, Workload


def idle_run(lab, min_runtime=600):
    workload = make_workload(lab, lab.a1, gpus=2, min_runtime=min_runtime)
    tick(lab, 0)
    run = Run.objects.get(workload=workload)
    # what the utilization collection writes for a run idle since it started
    Run.objects.filter(pk=run.pk).update(idle_since=at(0), idle_flagged_at=at(1800))
    return workload, run


def test_off_by_default_an_idle_run_keeps_its_gpus(lab):
    workload, run = idle_run(lab)
    tick(lab, 1800)
    assert refresh(run).signalled_at is None
    assert refresh(workload).state == Workload.State.RUNNING


def test_on_an_idle_run_past_its_minimum_runtime_is_signalled_with_the_reason(lab):
    lab.cluster.preempt_idle = True
    lab.cluster.save()
    workload, run = idle_run(lab)

    tick(lab, 1800)

    assert refresh(run).signalled_at == at(1800)
    assert refresh(workload).state == Workload.State.PREEMPTING
    reason = Event.objects.get(workload=workload, kind=Event.Kind.SIGNALLED).reason
    assert reason.startswith("preempted by the cluster's idle policy: its 2 GPU(s) stayed "
                             "below 10% busy for 30 min")


def test_on_the_idle_run_is_requeued_after_the_grace_period(lab):
    lab.cluster.preempt_idle = True
    lab.cluster.save()
    workload, run = idle_run(lab)

    tick(lab, 1800)
    tick(lab, 1800 + 300)

    assert refresh(run).end_reason == Run.EndReason.PREEMPTED
    assert Event.objects.filter(workload=workload, kind=Event.Kind.REQUEUED).exists()


def test_on_a_protected_idle_run_keeps_its_gpus(lab):
    lab.cluster.preempt_idle = True
    lab.cluster.save()
    workload, run = idle_run(lab, min_runtime=3600)
    tick(lab, 1800)
    assert refresh(run).signalled_at is None
