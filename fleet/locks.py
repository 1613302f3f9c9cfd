"""Named advisory locks: every lock key of the project lives here. PostgreSQL's two-key form
(namespace, object id) keeps them apart from anybody else's locks."""

from django.db import connection

LOCK_NAMESPACE = {
    "cluster": 0x7453_0001,  # one tick (or cancel / host action) per cluster at a time
}


def lock_cluster(cluster_id: int, wait: bool = True) -> bool:
    """Take the cluster's lock for the current transaction; False if busy and not ``wait``.

    PostgreSQL: a transaction-scoped advisory lock (released at commit or rollback, also when
    the worker dies). SQLite: settings open every transaction with BEGIN IMMEDIATE, which
    already holds the database's single write lock, so transactions are serial anyway."""
    if not connection.in_atomic_block:
        raise RuntimeError("lock_cluster() must run inside transaction.atomic()")
    if connection.vendor != "postgresql":
        return True
    function = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [LOCK_NAMESPACE["cluster"], cluster_id])
        row = cursor.fetchone()
    return True if wait else bool(row[0])
