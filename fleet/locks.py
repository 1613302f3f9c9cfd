"""Named advisory locks: every lock key of the project lives here. PostgreSQL's two-key form
(namespace, object id) keeps them apart from anybody else's locks."""

from django.db import connection

LOCK_NAMESPACE = {
    "cluster": 0x7453_0001,  # one tick (or cancel / host action) per cluster at a time
    "budget_tree": 0x7453_0002,  # one change of the tree's shape (move, new child) at a time
}


def _advisory_xact_lock(namespace: str, object_id: int, wait: bool) -> bool:
    if not connection.in_atomic_block:
        raise RuntimeError(f"the {namespace} lock must be taken inside transaction.atomic()")
    if connection.vendor != "postgresql":
        return True
    function = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [LOCK_NAMESPACE[namespace], object_id])
        row = cursor.fetchone()
    return True if wait else bool(row[0])


def lock_cluster(cluster_id: int, wait: bool = True) -> bool:
    """Take the cluster's lock for the current transaction; False if busy and not ``wait``.

    PostgreSQL: a transaction-scoped advisory lock (released at commit or rollback, also when
    the worker dies). SQLite: settings open every transaction with BEGIN IMMEDIATE, which
    already holds the database's single write lock, so transactions are serial anyway."""
    return _advisory_xact_lock("cluster", cluster_id, wait)


def lock_budget_tree() -> None:
    """Serialise changes of the budget tree's shape for the current transaction: a check such
    as "the new parent is not a descendant" is only true while nobody else moves nodes. The
    database's cycle trigger takes the same lock (see budgets' migration), so the check and
    the trigger see the same tree."""
    _advisory_xact_lock("budget_tree", 0, wait=True)
