"""A week of history built by hand, for the review report and the dashboards.

    org (organisation)             managers: ceo
    ├── prog-a  70                  managers: pi
    │   ├── proj-a1  50 -> 150 on Thu 6 March 12:00   managers: lead, members: researcher
    │   └── proj-a2  50
    └── prog-b  30 (-> 60 on 12 March, after the week)
        └── proj-b1  100

Cluster h100: 2 hosts x 5 GPUs. The week is Mon 3 March 2025 00:00 to Mon 10 March 00:00 UTC.
Healthy GPUs (occupancy samples): 10, except Saturday 8 March (5: one host down); the hourly
capacity rollups (what the reports integrate) say the same from the cluster's creation on
1 January to the end of March, as the live loop would have charged them.

Capacity: 120 h x 10 + 24 h x 5 + 24 h x 10 = 1560 GPU-h.
proj-a1: 0.35 for 84 h (840 GPU-h) then 0.7 x 150/200 = 0.525 for the rest (720 GPU-h):
entitlement 294 + 378 = 672; proj-a2 294 + 0.175 x 720 = 420; prog-b, proj-b1 0.3 x 1560 = 468.

Workloads (owner researcher):
  W1 proj-a1 4 GPUs alloc: submitted Mon 08:00, started 08:30 (wait 30 min), completed 11:00.
  W2 proj-a1 2 GPUs alloc 10 min (debug), resumable: submitted Wed 10:00, started 10:10;
     signalled 12:00, preempted 12:05 (lost 2 x 5 min), requeued, started 13:05 (wait 60 min).
  W3 proj-a2 8 GPUs alloc, not resumable: submitted Thu 00:00, started 02:00 (wait 120 min),
     signalled 05:00, preempted 05:05 (lost 8 x 3 h 05).
  W4 proj-b1 5 GPUs alloc: submitted Sun 20:00, never started, cancelled Mon 10 March 02:00.
  W5 proj-b1 3 GPUs unallocated: ran Sun 2 March 22:00 to Mon 3 March 02:00 (2 h in the week).
  W6 proj-a2 2 GPUs unallocated: ran Sun 9 March 22:00 to Mon 10 March 03:00 (2 h in the week).
  W7 proj-b1 1 GPU alloc: submitted Sun 2 March 22:00, started Mon 01:00 (wait 180 min).
Usage rollups (allocated GPU-h): proj-a1 10 (Mon 10:00) + 20 (Fri 10:00); proj-a2 4;
proj-b1 5 (Sun 23:00), plus 10 the hour before the week and 10 the hour after it.

`tiny`, for the what-if, two days of real submissions on one host:

    org  (ceo)
    ├── prog  1 share   (pi)
    │   ├── a  1 (-> 3 in the tests' what-ifs)
    │   └── b  1
    └── other  1

Cluster tiny: one host of 4 GPUs. T0 = 47 h ago (1 h into a 2-day replay):
  W1 a: 4 GPUs, min_runtime 2 h, resumable; submitted T0, ran T0 -> T0 + 2 h (completed).
  W2 b: 4 GPUs, min_runtime 1 h; submitted T0 + 30 min, ran T0 + 2 h -> T0 + 3 h (completed).
"""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from django.utils import timezone

from budgets.models import Allocation, AllocationChange, BudgetNode
from fleet.models import CapacityRollup, Cluster, Host
from scheduler.models import Event, OccupancySample, Run, UsageRollup, Workload

PERSONAS = ("ceo", "pi", "lead", "researcher", "outsider", "operator")
WEEK_START = datetime(2025, 3, 3, tzinfo=UTC)
WEEK_END = WEEK_START + timedelta(days=7)
CHANGE_AT = datetime(2025, 3, 6, 12, tzinfo=UTC)


def at(day, hour=0, minute=0, month=3):
    return datetime(2025, month, day, hour, minute, tzinfo=UTC)


def roll_up_capacity(cluster, start, end):
    """CapacityRollup rows for the hours of [start, end) as the live loop charges them: each
    occupancy sample's healthy GPUs until the next one; before the first, the hosts' GPUs."""
    samples = list(cluster.samples.order_by("at").values_list("at", "available"))
    gpus = cluster.gpu_count
    steps = [(start, next((a for t, a in reversed(samples) if t <= start), gpus))]
    steps += [(t, a) for t, a in samples if start < t < end]
    rows = {}
    for index, (t, available) in enumerate(steps):
        until = steps[index + 1][0] if index + 1 < len(steps) else end
        while t < until:
            hour = t.replace(minute=0, second=0, microsecond=0)
            stop = min(until, hour + timedelta(hours=1))
            rows[hour] = rows.get(hour, 0.0) + available * (stop - t).total_seconds()
            t = stop
    CapacityRollup.objects.bulk_create(
        CapacityRollup(cluster=cluster, hour=hour, gpu_seconds=value)
        for hour, value in rows.items()
    )


@pytest.fixture
def capacity_rollups():
    """`capacity_rollups(cluster, start, end)`: see roll_up_capacity."""
    return roll_up_capacity


@pytest.fixture
def history(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    users = {name: User.objects.create_user(name, password="x") for name in PERSONAS}
    operators = Group.objects.create(name="Operators")
    operators.permissions.add(Permission.objects.get(codename="operate_fleet"))
    users["operator"].groups.add(operators)

    cluster = Cluster.objects.create(name="h100", gpu_type="H100", created=at(1, month=1))
    for index in range(2):
        Host.objects.create(cluster=cluster, name=f"h100-{index}", gpus=5)

    def node(parent, slug, kind, managers=(), members=()):
        created = BudgetNode.objects.create(
            parent=parent, slug=slug, name=slug.replace("-", " ").title(), kind=kind
        )
        created.managers.add(*(users[u] for u in managers))
        created.members.add(*(users[u] for u in members))
        return created

    root = node(None, "org", "organisation", managers=["ceo"])
    prog_a = node(root, "prog-a", "program", managers=["pi"])
    proj_a1 = node(prog_a, "proj-a1", "project", ["lead"], ["researcher"])
    proj_a2 = node(prog_a, "proj-a2", "project")
    prog_b = node(root, "prog-b", "program")
    proj_b1 = node(prog_b, "proj-b1", "project")

    def change(budget, old, new, when):
        AllocationChange.objects.create(
            node=budget, cluster=cluster, changed_by=users["ceo"], changed_by_name="ceo",
            at=when, old_shares=old, new_shares=new, reason="test history",
        )

    for budget, shares in [(prog_a, 70), (proj_a1, 50), (proj_a2, 50), (prog_b, 30),
                           (proj_b1, 100)]:
        change(budget, None, shares, at(1, month=2))
    change(proj_a1, 50, 150, CHANGE_AT)
    change(prog_b, 30, 60, at(12))
    for budget, shares in [(prog_a, 70), (proj_a1, 150), (proj_a2, 50), (prog_b, 60),
                           (proj_b1, 100)]:
        Allocation.objects.create(node=budget, cluster=cluster, shares=shares)

    for when, available in [(at(2, 23), 10), (at(8), 5), (at(9), 10)]:
        OccupancySample.objects.create(
            cluster=cluster, at=when, total=10, available=available, allocated=0,
            unallocated=0, pending_workloads=0, pending_gpus=0,
        )
    roll_up_capacity(cluster, cluster.created, at(1, month=4))

    for budget, hour, gpu_hours in [
        (proj_a1, at(3, 10), 10), (proj_a1, at(7, 10), 20), (proj_a2, at(4), 4),
        (proj_b1, at(9, 23), 5), (proj_b1, at(2, 23), 10), (proj_b1, at(10), 10),
    ]:
        UsageRollup.objects.create(cluster=cluster, budget=budget, hour=hour,
                                   gpu_seconds=gpu_hours * 3600)

    def workload(name, budget, gpus, min_runtime, submitted, *, resumable=False, state="COMPLETED",
                 finished=None):
        w = Workload.objects.create(
            name=name, owner=users["researcher"], budget=budget, cluster=cluster, gpus=gpus,
            min_runtime=min_runtime, resumable=resumable, command="train.sh",
            submitted=submitted, state=state, finished=finished,
        )
        Event.objects.create(workload=w, at=submitted, kind="submitted")
        return w

    def run(w, number, started, ended, reason, signalled=None):
        r = Run.objects.create(
            workload=w, number=number, allocated=w.min_runtime > 0, gpus=w.gpus,
            started=started, protected_until=started + timedelta(seconds=w.min_runtime),
            signalled_at=signalled, ended=ended, end_reason=reason, accounted_until=ended,
        )
        Event.objects.create(workload=w, run=r, at=started, kind="started")
        return r

    w1 = workload("w1", proj_a1, 4, 3600, at(3, 8), finished=at(3, 11))
    run(w1, 1, at(3, 8, 30), at(3, 11), "completed")
    Event.objects.create(workload=w1, at=at(3, 11), kind="completed")

    w2 = workload("w2", proj_a1, 2, 600, at(5, 10), resumable=True, finished=at(5, 14))
    run(w2, 1, at(5, 10, 10), at(5, 12, 5), "preempted", signalled=at(5, 12))
    Event.objects.create(workload=w2, at=at(5, 12), kind="signalled")
    Event.objects.create(workload=w2, at=at(5, 12, 5), kind="requeued")
    run(w2, 2, at(5, 13, 5), at(5, 14), "completed")
    Event.objects.create(workload=w2, at=at(5, 14), kind="completed")

    w3 = workload("w3", proj_a2, 8, 7200, at(6), state="PREEMPTED", finished=at(6, 5, 5))
    run(w3, 1, at(6, 2), at(6, 5, 5), "preempted", signalled=at(6, 5))
    Event.objects.create(workload=w3, at=at(6, 5, 5), kind="preempted")

    w4 = workload("w4", proj_b1, 5, 3600, at(9, 20), state="CANCELLED", finished=at(10, 2))
    Event.objects.create(workload=w4, at=at(10, 2), kind="cancelled")

    w5 = workload("w5", proj_b1, 3, 0, at(2, 20), finished=at(3, 2))
    run(w5, 1, at(2, 22), at(3, 2), "completed")

    w6 = workload("w6", proj_a2, 2, 0, at(9, 21), finished=at(10, 3))
    run(w6, 1, at(9, 22), at(10, 3), "completed")

    w7 = workload("w7", proj_b1, 1, 3600, at(2, 22), finished=at(3, 4))
    run(w7, 1, at(3, 1), at(3, 4), "completed")

    clients = {}

    def client_for(persona):
        if persona not in clients:
            client = Client()
            client.force_login(users[persona])
            clients[persona] = client
        return clients[persona]

    return SimpleNamespace(
        users=users, cluster=cluster, root=root, prog_a=prog_a, proj_a1=proj_a1,
        proj_a2=proj_a2, prog_b=prog_b, proj_b1=proj_b1, client_for=client_for,
    )


@pytest.fixture
def recent(history, capacity_rollups):
    """169 hourly samples up to this hour (the first one, 7 days before this hour, puts a sample
    in the day seven days ago at any hour of today): 10 of 10 GPUs healthy (4 allocated, 2
    unallocated) except the last 24 hours, 5 healthy (3 allocated, 1 unallocated). proj-a1
    waited 1 h with 2 GPUs and was charged 6 GPU-h: attainment 6 / min(entitlement, 8) =
    75%."""
    now = timezone.now()
    base = now.replace(minute=0, second=0, microsecond=0)
    OccupancySample.objects.bulk_create(
        OccupancySample(
            cluster=history.cluster, at=base - timedelta(hours=k), total=10,
            available=5 if k < 24 else 10, allocated=3 if k < 24 else 4,
            unallocated=1 if k < 24 else 2, pending_workloads=0, pending_gpus=0,
        )
        for k in range(169)
    )
    capacity_rollups(history.cluster, base - timedelta(hours=168), base)
    w = Workload.objects.create(
        name="recent", owner=history.users["researcher"], budget=history.proj_a1,
        cluster=history.cluster, gpus=2, min_runtime=3600, command="x",
        submitted=now - timedelta(hours=5), state="RUNNING",
    )
    started = now - timedelta(hours=4)
    Run.objects.create(workload=w, number=1, allocated=True, gpus=2, started=started,
                       protected_until=started + timedelta(hours=1), accounted_until=now)
    Event.objects.create(workload=w, at=started, kind="started")
    UsageRollup.objects.create(cluster=history.cluster, budget=history.proj_a1,
                               hour=base - timedelta(hours=3), gpu_seconds=6 * 3600)
    history.now = now
    return history


HOUR = 3600


@pytest.fixture
def tiny(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    users = {name: User.objects.create_user(name, password="x")
             for name in ("ceo", "pi", "researcher", "outsider")}
    now = timezone.now()
    cluster = Cluster.objects.create(name="tiny", gpu_type="H100",
                                     created=now - timedelta(days=10))
    Host.objects.create(cluster=cluster, name="tiny-0", gpus=4)
    org = BudgetNode.objects.create(slug="org", name="Org", kind="organisation")
    org.managers.add(users["ceo"])
    prog = BudgetNode.objects.create(parent=org, slug="prog", name="Prog", kind="program")
    prog.managers.add(users["pi"])
    a = BudgetNode.objects.create(parent=prog, slug="a", name="A", kind="project")
    a.members.add(users["researcher"])
    b = BudgetNode.objects.create(parent=prog, slug="b", name="B", kind="project")
    other = BudgetNode.objects.create(parent=org, slug="other", name="Other", kind="project")
    for node in (prog, a, b, other):
        Allocation.objects.create(node=node, cluster=cluster, shares=1)
        AllocationChange.objects.create(  # the audit log the review report replays
            node=node, cluster=cluster, changed_by=users["ceo"], changed_by_name="ceo",
            at=cluster.created, old_shares=None, new_shares=1, reason="initial budget",
        )
    t0 = (now - timedelta(hours=47)).replace(microsecond=0)

    def workload(budget, min_runtime, submitted, started, hours, resumable):
        w = Workload.objects.create(
            name="w", owner=users["researcher"], budget=budget, cluster=cluster, gpus=4,
            min_runtime=min_runtime, resumable=resumable, command="x", submitted=submitted,
            state="COMPLETED", finished=started + timedelta(hours=hours))
        ended = started + timedelta(hours=hours)
        run = Run.objects.create(workload=w, number=1, allocated=True, gpus=4, started=started,
                                 protected_until=started + timedelta(seconds=min_runtime),
                                 ended=ended, end_reason="completed", accounted_until=ended)
        Event.objects.create(workload=w, run=run, at=started, kind="started")
        Event.objects.create(workload=w, run=run, at=ended, kind="completed")
        return w

    workload(a, 2 * HOUR, t0, t0, 2, True)
    workload(b, HOUR, t0 + timedelta(minutes=30), t0 + timedelta(hours=2), 1, False)
    hour = t0.replace(minute=0, second=0)
    for budget, offset, gpu_hours in [(a, 0, 4), (a, 1, 4), (b, 2, 4)]:
        UsageRollup.objects.create(cluster=cluster, budget=budget, gpu_seconds=gpu_hours * HOUR,
                                   hour=hour + timedelta(hours=offset))
    roll_up_capacity(cluster, cluster.created, now)
    clients = {}
    for name, user in users.items():
        clients[name] = Client()
        clients[name].force_login(user)
    return type("Tiny", (), {"cluster": cluster, "users": users, "clients": clients,
                             "a": a, "b": b, "prog": prog, "other": other})


def figures_of(report) -> dict:
    """Every figure of a review report, flat, for pytest.approx."""
    out = {"capacity_h": report.capacity_h, "until": report.until.timestamp()}
    for row in report.rows:
        for name in ("shares", "fraction", "entitlement_h", "delivered_h", "unallocated_h",
                     "demand_h", "preemptions", "lost_h"):
            out[f"{row.node.path} {name}"] = getattr(row, name)
        out[f"{row.node.path} measured"] = row.busy.measured
        out[f"{row.node.path} busy"] = row.busy.busy
        for index, wait in enumerate(sorted(row.waits)):
            out[f"{row.node.path} wait {index}"] = wait
    return out
