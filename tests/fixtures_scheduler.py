"""Workloads and hosts on top of conftest's `org`, for the scheduler pages' tests.

Memberships added here (conftest's tree has no leaf member yet):
    exp-1 (leaf under proj-a1): researcher, lead        proj-a2 (leaf): lead
    proj-b1 (leaf under prog-b): bob, a researcher of program B (a seventh persona)
A second cluster b200 (one host, 8 GPUs, maximum min_runtime 4 h) where no budget has shares.

Five workloads, by hand:
    run    researcher  exp-1    h100  RUNNING   2 GPUs on h100-0 GPU 0,1, min_runtime 1 h
    wait   lead        exp-1    h100  PENDING   #1 in the queue, 4 GPUs
    a2     lead        proj-a2  h100  PENDING   unallocated
    b      bob         proj-b1  h100  PENDING
    done   researcher  exp-1    h100  COMPLETED exit code 0
Who sees what (scheduler.permissions.restrict_workloads):
    ceo, operator: all five; pi (manages prog-a) and lead (manages proj-a1, member of proj-a2):
    run, wait, a2, done; researcher (owner + member of exp-1): run, wait, done; bob: b;
    outsider: none.
"""

import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from fleet.models import Cluster, Host, HostEvent
from scheduler.models import Event, Run, RunGPU, Workload

T0 = timezone.now().replace(microsecond=0) - timedelta(hours=3)


def workload_snapshot():
    """Everything a refused workload or host action must leave alone."""
    return {
        "workloads": sorted(Workload.objects.values_list("pk", "state", "finished")),
        "runs": sorted(Run.objects.values_list("pk", "ended", "signalled_at")),
        "gpus": sorted(RunGPU.objects.values_list("pk", "held")),
        "events": Event.objects.count(),
        "hosts": sorted(Host.objects.values_list("pk", "state", "state_reason")),
        "host_events": HostEvent.objects.count(),
    }


def form_data(fleet, **overrides):
    """What the submit form posts: 2 GPUs on h100 for exp-1, 1:30 protected, resumable, with a
    one-time token of its own."""
    data = {
        "submit_token": uuid.uuid4().hex,
        "name": "llama-debug",
        "budget": fleet.org.exp_1.pk,
        "cluster": fleet.org.cluster.pk,
        "gpus": "2",
        "min_runtime": "1:30",
        "resumable": "on",
        "command": "torchrun train.py --debug",
        "expected_duration": "120",
    }
    data.update(overrides)
    return {key: value for key, value in data.items() if value is not None}


@pytest.fixture
def nothing_written():
    """`with nothing_written(): ...` asserts the block changed no workload, run or host."""
    from contextlib import contextmanager

    @contextmanager
    def check():
        before = workload_snapshot()
        yield
        assert workload_snapshot() == before

    return check


@pytest.fixture
def fleet(org):
    bob = User.objects.create_user("bob", password="bob-password")
    org.users["bob"] = bob
    org.exp_1.members.add(org.researcher, org.lead)
    org.proj_a2.members.add(org.lead)
    org.proj_b1.members.add(bob)
    b200 = Cluster.objects.create(name="b200", gpu_type="B200", max_min_runtime=4 * 3600)
    Host.objects.create(cluster=b200, name="b200-0", gpus=8)
    h100_0, h100_1 = org.cluster.hosts.order_by("name")

    def workload(name, owner, budget, state, gpus=1, min_runtime=3600, **extra):
        created = Workload.objects.create(
            name=name, owner=owner, budget=budget, cluster=org.cluster, gpus=gpus,
            min_runtime=min_runtime, resumable=True, command="python train.py",
            state=state, submitted=T0, **extra,
        )
        Event.objects.create(workload=created, at=T0, kind=Event.Kind.SUBMITTED)
        return created

    run_w = workload("run", org.researcher, org.exp_1, Workload.State.RUNNING, gpus=2)
    started = T0 + timedelta(minutes=10)
    run = Run.objects.create(
        workload=run_w, number=1, allocated=True, gpus=2, started=started,
        protected_until=started + timedelta(hours=1), accounted_until=started,
    )
    for index in (0, 1):
        RunGPU.objects.create(run=run, host=h100_0, index=index)
    Event.objects.create(workload=run_w, run=run, at=started, kind=Event.Kind.STARTED,
                         reason="proj-a1 is at 20% of its entitlement, first in rank")
    wait = workload(
        "wait", org.lead, org.exp_1, Workload.State.PENDING, gpus=4, queue_position=1,
        queue_reason="needs 4 GPUs, 3 free on one host",
    )
    a2 = workload("a2", org.lead, org.proj_a2, Workload.State.PENDING, min_runtime=0)
    b = workload("b", bob, org.proj_b1, Workload.State.PENDING, queue_position=2,
                 queue_reason="prog-b is at 140% of its entitlement and ranks below prog-a")
    done = workload("done", org.researcher, org.exp_1, Workload.State.COMPLETED,
                    finished=T0 + timedelta(hours=1), exit_code=0)
    return SimpleNamespace(
        org=org, b200=b200, h100_0=h100_0, h100_1=h100_1, run_w=run_w, run=run, wait=wait,
        a2=a2, b=b, done=done, workloads={"run": run_w, "wait": wait, "a2": a2, "b": b,
                                          "done": done},
    )
