"""Submit validation reads the budget tree and a cluster's allocations too: a change of either
renews the validation stamps (fleet.models.ValidationStamp, created by fleet's migration).
A new, removed or moved node changes every cluster's tree; an allocation only its cluster's.

PostgreSQL reuses fleet's trigger functions; SQLite gets one trigger per event."""

from django.db import migrations

ALLOCATION_COLUMNS = ["node_id", "cluster_id", "shares"]  # what budget_tree reads
NODE_COLUMNS = ["parent_id", "path"]

POSTGRESQL = """
CREATE TRIGGER budgets_allocation_restamp_added_or_removed
    AFTER INSERT OR DELETE ON budgets_allocation
    FOR EACH ROW EXECUTE FUNCTION fleet_restamp_row_clusters();
CREATE TRIGGER budgets_allocation_restamp_changed AFTER UPDATE ON budgets_allocation
    FOR EACH ROW WHEN (({allocation_old}) IS DISTINCT FROM ({allocation_new}))
    EXECUTE FUNCTION fleet_restamp_row_clusters();

CREATE FUNCTION budgets_restamp_every_cluster() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fleet_validationstamp SET stamp = fleet_new_validation_stamp()
    WHERE cluster_id IN (
        SELECT cluster_id FROM fleet_validationstamp ORDER BY cluster_id FOR UPDATE
    );
    RETURN NULL;
END
$$;
CREATE TRIGGER budgets_budgetnode_restamp_added_or_removed
    AFTER INSERT OR DELETE ON budgets_budgetnode
    FOR EACH STATEMENT EXECUTE FUNCTION budgets_restamp_every_cluster();
CREATE TRIGGER budgets_budgetnode_restamp_moved AFTER UPDATE ON budgets_budgetnode
    FOR EACH ROW WHEN (({node_old}) IS DISTINCT FROM ({node_new}))
    EXECUTE FUNCTION budgets_restamp_every_cluster();
""".format(
    allocation_old=", ".join(f"OLD.{c}" for c in ALLOCATION_COLUMNS),
    allocation_new=", ".join(f"NEW.{c}" for c in ALLOCATION_COLUMNS),
    node_old=", ".join(f"OLD.{c}" for c in NODE_COLUMNS),
    node_new=", ".join(f"NEW.{c}" for c in NODE_COLUMNS),
)

POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS budgets_budgetnode_restamp_moved ON budgets_budgetnode;
DROP TRIGGER IF EXISTS budgets_budgetnode_restamp_added_or_removed ON budgets_budgetnode;
DROP FUNCTION IF EXISTS budgets_restamp_every_cluster();
DROP TRIGGER IF EXISTS budgets_allocation_restamp_changed ON budgets_allocation;
DROP TRIGGER IF EXISTS budgets_allocation_restamp_added_or_removed ON budgets_allocation;
"""

STAMP = "lower(hex(randomblob(16)))"
RESTAMP = f"UPDATE fleet_validationstamp SET stamp = {STAMP}"


def changed(columns):
    return " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in columns)


SQLITE_TRIGGERS = {
    "budgets_allocation_restamp_added": f"""AFTER INSERT ON budgets_allocation
        BEGIN {RESTAMP} WHERE cluster_id = NEW.cluster_id; END""",
    "budgets_allocation_restamp_removed": f"""AFTER DELETE ON budgets_allocation
        BEGIN {RESTAMP} WHERE cluster_id = OLD.cluster_id; END""",
    "budgets_allocation_restamp_changed": f"""AFTER UPDATE ON budgets_allocation
        WHEN {changed(ALLOCATION_COLUMNS)}
        BEGIN {RESTAMP} WHERE cluster_id IN (OLD.cluster_id, NEW.cluster_id); END""",
    "budgets_budgetnode_restamp_added": f"""AFTER INSERT ON budgets_budgetnode
        BEGIN {RESTAMP}; END""",
    "budgets_budgetnode_restamp_removed": f"""AFTER DELETE ON budgets_budgetnode
        BEGIN {RESTAMP}; END""",
    "budgets_budgetnode_restamp_moved": f"""AFTER UPDATE ON budgets_budgetnode
        WHEN {changed(NODE_COLUMNS)} BEGIN {RESTAMP}; END""",
}


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL, None)  # no parameters: the % are plpgsql
    else:
        for name, body in SQLITE_TRIGGERS.items():
            schema_editor.execute(f"CREATE TRIGGER {name} {body}", None)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_DROP, None)
    else:
        for name in SQLITE_TRIGGERS:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}", None)


class Migration(migrations.Migration):
    dependencies = [
        ("budgets", "0008_review_cycles"),
        ("fleet", "0006_validation_stamp"),
    ]

    operations = [migrations.RunPython(create_triggers, drop_triggers)]
