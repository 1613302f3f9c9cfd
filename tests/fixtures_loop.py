"""The lab: a small cluster for the live loop's tests, with a controlled clock.

    org (organisation)
    ├── prog-a  70        ├── proj-a1  50  members: alice
    │                     └── proj-a2  50  members: alice
    └── prog-b  30        └── proj-b1 100  members: bob
    lab cluster: hosts lab-0 and lab-1, 4 GPUs each (8 GPUs), grace 300 s, max min_runtime 8 h,
    created at T0 - 1 day; the simulated fleet never fails a host, finishes runs only when they
    declare an expected duration (default 10 days) and repairs at the first attempt.

By hand: prog-a 70%, proj-a1 35%, proj-a2 35%, prog-b 30%, proj-b1 30% of the cluster.
``overuse(lab, budget, ratio)`` writes usage rollups so that the budget's ratio over the
window is about ``ratio`` at T0.

The fixture is registered for the whole suite by tests/conftest.py; the helpers are imported
from here (``from fixtures_loop import at, make_workload``).
"""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone

from budgets import services as budget_services
from budgets.models import BudgetNode
from fleet.models import Host, HostEvent
from scheduler import loop
from scheduler.models import Event, OccupancySample, Run, RunGPU, UsageRollup, Workload

# A controlled clock a little ahead of real time (submissions through the services are
# stamped with the real time, so the lab's ticks come after them).
T0 = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=2)
DAY = 86400.0


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(name="lab")
def lab_fixture(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    from fleet.models import Cluster

    users = {n: User.objects.create_user(n, password="pw") for n in
             ("ceo", "alice", "bob", "operator", "outsider")}
    operators = Group.objects.create(name="Operators")
    operators.permissions.add(Permission.objects.get(codename="operate_fleet"))
    users["operator"].groups.add(operators)
    cluster = Cluster.objects.create(
        name="lab", gpu_type="H100", grace=300, created=T0 - timedelta(days=1),
        backend_config={
            "failure_rate_per_host_day": 0, "default_duration": 10 * DAY,
            "repair_success": 1.0, "repair_seconds": 30,
        },
    )
    hosts = [Host.objects.create(cluster=cluster, name=f"lab-{i}", gpus=4, group="rail-1")
             for i in range(2)]

    def node(parent, slug, kind, members=()):
        n = BudgetNode.objects.create(parent=parent, slug=slug, name=slug, kind=kind)
        n.members.add(*(users[u] for u in members))
        return n

    root = node(None, "org", "organisation")
    root.managers.add(users["ceo"])
    prog_a = node(root, "prog-a", "program")
    a1 = node(prog_a, "proj-a1", "project", ["alice"])
    a2 = node(prog_a, "proj-a2", "project", ["alice"])
    prog_b = node(root, "prog-b", "program")
    b1 = node(prog_b, "proj-b1", "project", ["bob"])
    for budget, shares in [(prog_a, 70), (a1, 50), (a2, 50), (prog_b, 30), (b1, 100)]:
        budget_services.set_shares(users["ceo"], budget, cluster, shares, reason="lab")
    return SimpleNamespace(
        cluster=cluster, hosts=hosts, users=users, root=root, prog_a=prog_a, a1=a1, a2=a2,
        prog_b=prog_b, b1=b1, **users,
    )


lab = lab_fixture  # for conftests that import the fixture by its name (tests/slurm)


def make_workload(lab, budget, *, gpus=1, min_runtime=3600, resumable=True, submitted=None,
                  owner=None, name=None, expected_duration=None, command="python train.py"):
    """A workload straight into the database (the services' checks are tested on their own)."""
    w = Workload.objects.create(
        name=name or f"w-{Workload.objects.count() + 1}",
        owner=owner or (lab.bob if budget == lab.b1 else lab.alice),
        budget=budget, cluster=lab.cluster, gpus=gpus, min_runtime=min_runtime,
        resumable=resumable, command=command, expected_duration=expected_duration,
        submitted=submitted or at(-60),
    )
    Event.objects.create(workload=w, at=w.submitted, kind=Event.Kind.SUBMITTED)
    return w


def overuse(lab, budget, ratio: float, now=T0):
    """Rollups that put ``budget`` at about ``ratio`` of its entitlement at ``now``."""
    tree = loop.budget_tree(lab.cluster)
    capacity = loop.window_capacity_estimate(lab.cluster, now)
    total = ratio * tree.fraction(budget.path) * capacity
    hours = 10
    for h in range(1, hours + 1):
        UsageRollup.objects.create(
            cluster=lab.cluster, budget=budget, hour=loop.floor_hour(now) - timedelta(hours=h),
            gpu_seconds=total / hours,
        )


def tick(lab, seconds: float):
    return loop.tick(lab.cluster.pk, at(seconds))


def refresh(*objects):
    for o in objects:
        o.refresh_from_db()
    return objects[0] if len(objects) == 1 else objects


def state_snapshot():
    """Every row a tick writes."""
    return {
        "workloads": sorted(Workload.objects.values_list(
            "pk", "state", "finished", "queue_position", "queue_reason")),
        "runs": sorted(Run.objects.values_list(
            "pk", "ended", "signalled_at", "end_reason", "accounted_until")),
        "gpus": sorted(RunGPU.objects.values_list("pk", "run_id", "host_id", "index", "held")),
        "events": sorted(Event.objects.values_list("pk", "kind", "reason")),
        "hosts": sorted(Host.objects.values_list("pk", "state", "failed_repairs")),
        "host_events": HostEvent.objects.count(),
        "rollups": sorted(UsageRollup.objects.values_list("budget_id", "hour", "gpu_seconds")),
        "samples": OccupancySample.objects.count(),
    }


def held_gpus():
    return sorted(RunGPU.objects.filter(held=True).values_list("host__name", "index"))


def test_lab_fractions_are_the_documented_ones(lab):
    tree = loop.budget_tree(lab.cluster)
    assert tree.fraction("org/prog-a/proj-a1") == pytest.approx(0.35)
    assert tree.fraction("org/prog-b/proj-b1") == pytest.approx(0.30)
    assert lab.cluster.gpu_count == 8
