"""Moving clusters, hosts, host events and capacity rollups from ``scheduler`` to ``fleet``
keeps every row: a database seeded at the old layout, migrated forward, still holds each
row with its links, and the operators keep the right to operate the fleet."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# The leaf migrations of the layout before the move (fleet did not exist).
OLD = [
    ("scheduler", "0004_event_kind_at_index"),
    ("budgets", "0002_initial"),
    ("reports", "0001_initial"),
    ("fleet", None),
]
AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    # the models as of ``targets``, with every other app (auth, contenttypes) as it is today
    loader = MigrationExecutor(connection).loader
    moved = dict(OLD)
    others = [key for key in loader.graph.leaf_nodes() if key[0] not in moved]
    applied = [(app, name) for app, name in targets if name is not None]
    return loader.project_state(applied + others).apps


def latest():
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in dict(OLD)]


def seed_old_layout(apps) -> dict:
    """One row of every model the move touches, written with the old historical models."""
    model = apps.get_model
    operator = model("auth", "User").objects.create(username="operator")
    content_type = model("contenttypes", "ContentType").objects.get_or_create(
        app_label="scheduler", model="host"
    )[0]
    operate, _ = model("auth", "Permission").objects.get_or_create(
        content_type=content_type, codename="operate_fleet",
        defaults={"name": "Can drain, repair and operate hosts"},
    )
    operators = model("auth", "Group").objects.create(name="operators")
    operators.permissions.add(operate)
    operator.groups.add(operators)

    cluster = model("scheduler", "Cluster").objects.create(name="h100", gpu_type="H100", created=AT)
    host = model("scheduler", "Host").objects.create(cluster=cluster, name="h100-0", gpus=8)
    model("scheduler", "HostEvent").objects.create(
        host=host, at=AT, kind="drain_requested", reason="fan noise", by=operator
    )
    model("scheduler", "CapacityRollup").objects.create(
        cluster=cluster, hour=AT, gpu_seconds=8 * 3600
    )
    root = model("budgets", "BudgetNode").objects.create(
        name="Org", slug="org", kind="organisation", path="org"
    )
    project = model("budgets", "BudgetNode").objects.create(
        name="Project A", slug="proj-a", kind="project", parent=root, path="org/proj-a"
    )
    model("budgets", "Allocation").objects.create(node=project, cluster=cluster, shares=70)
    model("budgets", "AllocationChange").objects.create(
        node=project, cluster=cluster, changed_by=operator, changed_by_name="operator", at=AT,
        new_shares=70,
    )
    model("budgets", "ChangeRequest").objects.create(
        node=project, cluster=cluster, requested_by=operator, requested_shares=80,
        reason="more", created=AT,
    )
    workload = model("scheduler", "Workload").objects.create(
        name="train", owner=operator, budget=project, cluster=cluster, gpus=2, min_runtime=600,
        command="python train.py", submitted=AT,
    )
    run = model("scheduler", "Run").objects.create(
        workload=workload, number=1, allocated=True, gpus=2, started=AT, protected_until=AT,
        accounted_until=AT,
    )
    model("scheduler", "RunGPU").objects.create(run=run, host=host, index=3)
    model("scheduler", "UsageRollup").objects.create(
        cluster=cluster, budget=project, hour=AT, gpu_seconds=7200
    )
    model("scheduler", "OccupancySample").objects.create(
        cluster=cluster, at=AT, total=8, available=8, allocated=2, unallocated=0,
        pending_workloads=0, pending_gpus=0,
    )
    model("reports", "WhatIf").objects.create(cluster=cluster, requested_by=operator, created=AT)
    return {"cluster": cluster.pk, "host": host.pk, "workload": workload.pk}


@pytest.mark.django_db(transaction=True)
def test_every_row_survives_the_move_to_fleet():
    newest = latest()
    seeded = seed_old_layout(migrate(OLD))
    apps = migrate(newest)

    cluster = apps.get_model("fleet", "Cluster").objects.get(pk=seeded["cluster"])
    host = apps.get_model("fleet", "Host").objects.get(pk=seeded["host"])
    assert (cluster.name, host.cluster_id, host.name) == ("h100", cluster.pk, "h100-0")
    event = apps.get_model("fleet", "HostEvent").objects.get()
    assert (event.host_id, event.kind, event.by.username) == (host.pk, "drain_requested",
                                                              "operator")
    assert apps.get_model("fleet", "CapacityRollup").objects.get().cluster_id == cluster.pk
    for label in ("budgets.Allocation", "budgets.AllocationChange", "budgets.ChangeRequest",
                  "scheduler.Workload", "scheduler.UsageRollup", "scheduler.OccupancySample",
                  "reports.WhatIf"):
        assert apps.get_model(label).objects.get().cluster_id == cluster.pk, label
    gpu = apps.get_model("scheduler", "RunGPU").objects.get()
    assert (gpu.host_id, gpu.index, gpu.run.workload_id) == (host.pk, 3, seeded["workload"])


@pytest.mark.django_db(transaction=True)
def test_the_operator_keeps_the_right_to_operate_the_fleet():
    newest = latest()
    seed_old_layout(migrate(OLD))
    migrate(newest)

    operator = User.objects.get(username="operator")
    assert operator.has_perm("fleet.operate_fleet")
    assert not operator.has_perm("scheduler.operate_fleet")
