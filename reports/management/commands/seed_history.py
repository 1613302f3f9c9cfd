"""A year of history for a 1,024-GPU cluster, for the reports benchmark.

    manage.py seed_history [--cluster big] [--days 365] [--hosts 128] [--per-day 100]

Builds its own budget tree under the first root (4 programs x 4 projects x 2 researchers)
unless the root already has children, gives every node shares on the cluster with a few
changes over the year in the audit log, and writes 10-minute occupancy samples, hourly usage
and capacity rollups, workloads with runs and events, and host failures and repairs, with
bulk_create. Capacity is charged from the samples as the live loop does
(``scheduler.history.capacity_rollups``, shared with the demo's seeded week, which replays
the Philly trace through the simulator instead: ``manage.py seed_demo``).
"""

import random
from datetime import timedelta

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from budgets.models import Allocation, AllocationChange, BudgetNode
from fleet.models import CapacityRollup, Cluster, Host, HostEvent
from scheduler.history import bulk, capacity_rollups
from scheduler.models import (
    Event,
    OccupancySample,
    Run,
    UsageRollup,
    UtilizationRollup,
    Workload,
)

BATCH = 5000


class Command(BaseCommand):
    help = "Seed a year of history for a 1,024-GPU cluster (reports benchmark)."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default="big")
        parser.add_argument("--days", type=int, default=365)
        parser.add_argument("--hosts", type=int, default=128)
        parser.add_argument("--per-day", type=int, default=100)
        parser.add_argument("--seed", type=int, default=7)

    @transaction.atomic
    def handle(self, *args, cluster, days, hosts, per_day, seed, **options):
        rng = random.Random(seed)
        if Cluster.objects.filter(name=cluster).exists():
            raise CommandError(f"cluster {cluster} exists already")
        now = timezone.now().replace(minute=0, second=0, microsecond=0)
        start = now - timedelta(days=days)
        big = Cluster.objects.create(name=cluster, gpu_type="H100", created=start)
        Host.objects.bulk_create(
            Host(cluster=big, name=f"{cluster}-{i:03d}", gpus=8, group=f"rail-{i // 32}")
            for i in range(hosts)
        )
        host_list = list(big.hosts.all())
        gpus = 8 * hosts
        owner, _ = User.objects.get_or_create(username="bench-ceo")
        root = BudgetNode.objects.filter(parent=None).order_by("pk").first()
        if root is None:
            root = BudgetNode.objects.create(slug="org", name="Organisation", kind="organisation")
        root.managers.add(owner)
        if not root.children.exists():
            for p in range(4):
                program = BudgetNode.objects.create(parent=root, slug=f"prog-{p}",
                                                    name=f"Program {p}", kind="program")
                for q in range(4):
                    project = BudgetNode.objects.create(
                        parent=program, slug=f"proj-{p}{q}", name=f"Project {p}{q}",
                        kind="project")
                    for r in range(2):
                        BudgetNode.objects.create(parent=project, slug=f"res-{p}{q}{r}",
                                                  name=f"Researcher {p}{q}{r}", kind="researcher")
        nodes = list(BudgetNode.objects.subtree(root.path).exclude(pk=root.pk))
        parents = {n.parent_id for n in nodes}
        leaves = [n for n in nodes if n.pk not in parents]
        shares = {n.pk: rng.randint(10, 100) for n in nodes}
        changes = [
            AllocationChange(node=n, cluster=big, changed_by=owner, changed_by_name="bench-ceo",
                             at=start, old_shares=None, new_shares=shares[n.pk], reason="seed")
            for n in nodes
        ]
        for _ in range(40):
            n = rng.choice(nodes)
            new = rng.randint(10, 100)
            changes.append(AllocationChange(
                node=n, cluster=big, changed_by=owner, changed_by_name="bench-ceo",
                at=start + timedelta(seconds=rng.randint(0, days * 86400)),
                old_shares=shares[n.pk], new_shares=new, reason="seed change"))
            shares[n.pk] = new
        AllocationChange.objects.bulk_create(changes, batch_size=BATCH)
        Allocation.objects.bulk_create(
            Allocation(node=n, cluster=big, shares=shares[n.pk]) for n in nodes
        )

        samples, t = [], start
        while t < now:
            available = gpus - 8 * rng.choice([0, 0, 0, 1, 2])
            allocated = int(available * rng.uniform(0.6, 0.9))
            unallocated = int((available - allocated) * rng.uniform(0, 0.8))
            pending = rng.randint(0, 300)
            samples.append(OccupancySample(
                cluster=big, at=t, total=gpus, available=available, allocated=allocated,
                unallocated=unallocated, pending_workloads=pending // 8, pending_gpus=pending))
            t += timedelta(minutes=10)
        OccupancySample.objects.bulk_create(samples, batch_size=BATCH)
        # what the live loop charges between ticks: each sample's healthy GPUs until the next
        bulk(CapacityRollup, capacity_rollups(big, samples, now))

        rollups, hour = [], start
        while hour < now:
            for leaf in leaves:
                rollups.append(UsageRollup(cluster=big, budget=leaf, hour=hour,
                                           gpu_seconds=rng.uniform(0, 40) * 3600))
            hour += timedelta(hours=1)
        UsageRollup.objects.bulk_create(rollups, batch_size=BATCH)

        workloads = []
        for day in range(days):
            for _ in range(per_day):
                submitted = start + timedelta(days=day, seconds=rng.randint(0, 86399))
                size = rng.choice([1, 1, 2, 4, 8, 8, 16, 32])
                workloads.append(Workload(
                    name="seeded", owner=owner, budget=rng.choice(leaves), cluster=big,
                    gpus=size, min_runtime=rng.choice([0, 600, 3600, 4 * 3600]),
                    resumable=rng.random() < 0.5, command="train", submitted=submitted,
                    state="COMPLETED"))
        Workload.objects.bulk_create(workloads, batch_size=BATCH)
        workloads = list(Workload.objects.filter(cluster=big).order_by("pk"))
        runs, events, finished = [], [], []
        for w in workloads:
            started = w.submitted + timedelta(seconds=rng.expovariate(1 / 1800))
            ended = started + timedelta(seconds=rng.randint(600, 6 * 3600))
            preempted = rng.random() < 0.05
            runs.append(Run(
                workload=w, number=1, allocated=w.min_runtime > 0, gpus=w.gpus, started=started,
                protected_until=started + timedelta(seconds=w.min_runtime),
                signalled_at=ended - timedelta(minutes=5) if preempted else None, ended=ended,
                end_reason="preempted" if preempted else "completed", accounted_until=ended))
            events += [Event(workload=w, at=w.submitted, kind="submitted"),
                       Event(workload=w, at=started, kind="started"),
                       Event(workload=w, at=ended, kind="preempted" if preempted else "completed")]
            w.finished = ended
            finished.append(w)
        Run.objects.bulk_create(runs, batch_size=BATCH)
        Event.objects.bulk_create(events, batch_size=BATCH)
        # the fleet's telemetry of every run, hour by hour: most busy, some squatting idle
        busy_rollups = []
        for run in runs:
            level = rng.uniform(0.0, 0.05) if rng.random() < 0.15 else rng.uniform(0.4, 0.97)
            t = run.started
            while t < run.ended:
                hour_start = t.replace(minute=0, second=0, microsecond=0)
                stop = min(run.ended, hour_start + timedelta(hours=1))
                measured = run.gpus * (stop - t).total_seconds()
                busy_rollups.append(UtilizationRollup(
                    run=run, cluster=big, budget_id=run.workload.budget_id, owner=owner,
                    allocated=run.allocated, hour=hour_start, gpu_seconds=measured,
                    busy_gpu_seconds=measured * level))
                t = stop
        UtilizationRollup.objects.bulk_create(busy_rollups, batch_size=BATCH)
        Workload.objects.bulk_update(finished, ["finished"], batch_size=BATCH)

        host_events = []
        for day in range(days):
            for _ in range(rng.randint(0, 3)):
                host = rng.choice(host_list)
                at = start + timedelta(days=day, seconds=rng.randint(0, 80000))
                host_events += [
                    HostEvent(host=host, at=at, kind="failed"),
                    HostEvent(host=host, at=at + timedelta(minutes=10), kind="repair_started"),
                    HostEvent(host=host, at=at + timedelta(minutes=40),
                              kind="escalated" if rng.random() < 0.1 else "repair_succeeded"),
                ]
        HostEvent.objects.bulk_create(host_events, batch_size=BATCH)
        self.stdout.write(
            f"{cluster}: {gpus} GPUs, {len(samples)} samples, {len(rollups)} rollups, "
            f"{len(workloads)} workloads, {len(busy_rollups)} utilization rollups, "
            f"{len(host_events)} host events; "
            f"log in as bench-ceo (manager of {root.path})"
        )
