"""PostgreSQL refuses a budget node under its own descendant, whatever code writes the row.

The trigger first takes the budget tree's advisory lock (fleet.locks, namespace "budget_tree"),
so two crossed moves in concurrent transactions are serialised: the second one's ancestor walk
runs after the first committed and sees its new parent. SQLite has no recursive queries in
triggers; there the model's save() walks the ancestors (and writers are serial anyway)."""

from django.db import migrations

BUDGET_TREE_LOCK = 0x7453_0002

CREATE = f"""
CREATE FUNCTION budgets_refuse_cycle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent_id IS NULL OR NEW.parent_id IS NOT DISTINCT FROM OLD.parent_id THEN
        RETURN NEW;
    END IF;
    PERFORM pg_advisory_xact_lock({BUDGET_TREE_LOCK}, 0);
    IF EXISTS (
        WITH RECURSIVE ancestor(id, parent_id) AS (
            SELECT id, parent_id FROM budgets_budgetnode WHERE id = NEW.parent_id
            UNION
            SELECT node.id, node.parent_id
            FROM budgets_budgetnode node JOIN ancestor ON node.id = ancestor.parent_id
        )
        SELECT 1 FROM ancestor WHERE id = NEW.id
    ) THEN
        RAISE EXCEPTION 'budget node % cannot sit under its own descendant %', NEW.id,
            NEW.parent_id USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER budgets_budgetnode_no_cycle
    BEFORE UPDATE OF parent_id ON budgets_budgetnode
    FOR EACH ROW EXECUTE FUNCTION budgets_refuse_cycle();
"""

DROP = """
DROP TRIGGER IF EXISTS budgets_budgetnode_no_cycle ON budgets_budgetnode;
DROP FUNCTION IF EXISTS budgets_refuse_cycle();
"""


def on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, None)  # no parameters: the % are plpgsql

    return run


class Migration(migrations.Migration):
    dependencies = [("budgets", "0006_effective_dates_and_expiry")]

    operations = [migrations.RunPython(on_postgresql(CREATE), on_postgresql(DROP))]
