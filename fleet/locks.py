"""Named advisory locks: every lock key of the project lives here. PostgreSQL's two-key form
(namespace, object id) keeps them apart from anybody else's locks."""

from collections import Counter
from threading import Lock

from django.db import connection

LOCK_NAMESPACE = {
    "cluster": 0x7453_0001,  # one tick (or cancel / host action) per cluster at a time
    "budget_tree": 0x7453_0002,  # one change of the tree's shape (move, new child) at a time
    "launches": 0x7453_0003,  # held (shared) while a worker launches a cluster's runs
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


# Launches in flight. A tick that starts runs holds this lock (shared, so that several ticks'
# launches never wait on each other) from before its commit until every launch has answered;
# it is a session lock, so it outlives the commit and dies with the worker. A tick that finds
# runs the backend never heard of takes them back only when it can take the lock exclusively:
# then no launch of this cluster is in flight anywhere. SQLite (development, one process):
# a counter in the process.
_in_process: Counter = Counter()
_in_process_guard = Lock()


def _launch_lock(function: str, cluster_id: int):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [LOCK_NAMESPACE["launches"], cluster_id])
        return cursor.fetchone()[0]


def hold_launches(cluster_id: int) -> None:
    """Say that launches of the cluster are in flight until ``release_launches``."""
    if connection.vendor == "postgresql":
        _launch_lock("pg_advisory_lock_shared", cluster_id)
    else:
        with _in_process_guard:
            _in_process[cluster_id] += 1


def release_launches(cluster_id: int) -> None:
    if connection.vendor == "postgresql":
        _launch_lock("pg_advisory_unlock_shared", cluster_id)
    else:
        with _in_process_guard:
            _in_process[cluster_id] -= 1


def launches_in_flight(cluster_id: int) -> bool:
    """True while any worker is launching runs of the cluster (or about to, after its commit)."""
    if connection.vendor != "postgresql":
        return _in_process[cluster_id] > 0
    if not _launch_lock("pg_try_advisory_lock", cluster_id):
        return True
    _launch_lock("pg_advisory_unlock", cluster_id)
    return False
