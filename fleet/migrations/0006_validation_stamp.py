"""A validation stamp per cluster (fleet.models.ValidationStamp), renewed by triggers whenever
what submit validation reads of the cluster changes: here a new cluster and its hosts (the
columns ``engine_hosts`` reads); budgets' migration adds the tree and the allocations.

PostgreSQL locks the stamps it renews in cluster order, so two writers never wait on each
other crosswise. SQLite has no PL/pgSQL: one trigger per event there."""

import secrets

import django.db.models.deletion
from django.db import migrations, models

# What validation reads of a host: a change of anything else (heartbeats) keeps the stamp.
HOST_COLUMNS = ["cluster_id", "name", "gpus", "group", "state", "retired"]

POSTGRESQL = """
CREATE FUNCTION fleet_new_validation_stamp() RETURNS text LANGUAGE sql VOLATILE
    AS $$ SELECT md5(random()::text || clock_timestamp()::text) $$;

CREATE FUNCTION fleet_stamp_new_cluster() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fleet_validationstamp (cluster_id, stamp)
        VALUES (NEW.id, fleet_new_validation_stamp());
    RETURN NULL;
END
$$;
CREATE TRIGGER scheduler_cluster_validation_stamp AFTER INSERT ON scheduler_cluster
    FOR EACH ROW EXECUTE FUNCTION fleet_stamp_new_cluster();

-- Renews the stamps of the clusters the row belonged to and belongs to (tables with a
-- cluster_id column: hosts here, allocations in budgets' migration).
CREATE FUNCTION fleet_restamp_row_clusters() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fleet_validationstamp SET stamp = fleet_new_validation_stamp()
    WHERE cluster_id IN (
        SELECT cluster_id FROM fleet_validationstamp
        WHERE cluster_id IN (OLD.cluster_id, NEW.cluster_id)
        ORDER BY cluster_id FOR UPDATE
    );
    RETURN NULL;
END
$$;
CREATE TRIGGER scheduler_host_restamp_added_or_removed AFTER INSERT OR DELETE ON scheduler_host
    FOR EACH ROW EXECUTE FUNCTION fleet_restamp_row_clusters();
CREATE TRIGGER scheduler_host_restamp_changed AFTER UPDATE ON scheduler_host
    FOR EACH ROW WHEN (({old}) IS DISTINCT FROM ({new}))
    EXECUTE FUNCTION fleet_restamp_row_clusters();
""".format(
    old=", ".join(f'OLD."{c}"' for c in HOST_COLUMNS),
    new=", ".join(f'NEW."{c}"' for c in HOST_COLUMNS),
)

POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS scheduler_host_restamp_changed ON scheduler_host;
DROP TRIGGER IF EXISTS scheduler_host_restamp_added_or_removed ON scheduler_host;
DROP TRIGGER IF EXISTS scheduler_cluster_validation_stamp ON scheduler_cluster;
DROP FUNCTION IF EXISTS fleet_restamp_row_clusters();
DROP FUNCTION IF EXISTS fleet_stamp_new_cluster();
DROP FUNCTION IF EXISTS fleet_new_validation_stamp();
"""

SQLITE_STAMP = "lower(hex(randomblob(16)))"
SQLITE_HOST_CHANGED = " OR ".join(f'OLD."{c}" IS NOT NEW."{c}"' for c in HOST_COLUMNS)
SQLITE = [
    f"""CREATE TRIGGER scheduler_cluster_validation_stamp AFTER INSERT ON scheduler_cluster
    BEGIN INSERT INTO fleet_validationstamp (cluster_id, stamp) VALUES (NEW.id, {SQLITE_STAMP});
    END""",
    f"""CREATE TRIGGER scheduler_host_restamp_added AFTER INSERT ON scheduler_host
    BEGIN UPDATE fleet_validationstamp SET stamp = {SQLITE_STAMP}
    WHERE cluster_id = NEW.cluster_id; END""",
    f"""CREATE TRIGGER scheduler_host_restamp_removed AFTER DELETE ON scheduler_host
    BEGIN UPDATE fleet_validationstamp SET stamp = {SQLITE_STAMP}
    WHERE cluster_id = OLD.cluster_id; END""",
    f"""CREATE TRIGGER scheduler_host_restamp_changed AFTER UPDATE ON scheduler_host
    WHEN {SQLITE_HOST_CHANGED}
    BEGIN UPDATE fleet_validationstamp SET stamp = {SQLITE_STAMP}
    WHERE cluster_id IN (OLD.cluster_id, NEW.cluster_id); END""",
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {name}" for name in (
        "scheduler_cluster_validation_stamp", "scheduler_host_restamp_added",
        "scheduler_host_restamp_removed", "scheduler_host_restamp_changed",
    )
]


def create_triggers(apps, schema_editor):
    ValidationStamp = apps.get_model("fleet", "ValidationStamp")
    Cluster = apps.get_model("fleet", "Cluster")
    ValidationStamp.objects.bulk_create(
        ValidationStamp(cluster=cluster, stamp=secrets.token_hex(16))
        for cluster in Cluster.objects.all()
    )
    run(schema_editor, POSTGRESQL, SQLITE)


def drop_triggers(apps, schema_editor):
    run(schema_editor, POSTGRESQL_DROP, SQLITE_DROP)


def run(schema_editor, postgresql: str, sqlite: list[str]) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(postgresql, None)  # no parameters: the % are plpgsql
    else:
        for statement in sqlite:
            schema_editor.execute(statement, None)


class Migration(migrations.Migration):

    dependencies = [
        ("fleet", "0005_cluster_unallocated_grace_and_pass_interval"),
    ]

    operations = [
        migrations.CreateModel(
            name="ValidationStamp",
            fields=[
                ("cluster", models.OneToOneField(
                    on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                    related_name="validation_stamp", serialize=False, to="fleet.cluster",
                )),
                ("stamp", models.CharField(max_length=32)),
            ],
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
