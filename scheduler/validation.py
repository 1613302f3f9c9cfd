"""What a submission is validated against, read once per change instead of once per request.

``contract.validate`` needs the cluster's hosts and its budget tree. Both change rarely and
every submission reads them, so they are kept in the shared cache as a
``ValidationSnapshot`` under the cluster's validation stamp, which database triggers renew
whenever a host, a budget node or one of the cluster's allocations changes
(``fleet.models.ValidationStamp``). A submission reads the stamp (one statement by primary
key, written by hand: composing it with the ORM cost five times the CPU of running it); the
first one after a change rebuilds the snapshot for every process.

A snapshot cached under a stamp is never older than that stamp: it is read after the stamp,
so a change committed in between only makes it newer, and renews the stamp for the next
submission anyway. The cache only saves work: when it is down, submissions read the
database as before."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection

from fleet.models import Cluster, Host, ValidationStamp
from scheduler.engine import BudgetTree
from scheduler.engine import Host as EngineHost
from scheduler.engine_views import budget_tree, engine_hosts

log = logging.getLogger(__name__)

KEPT_FOR = 24 * 3600  # seconds; a stamp nobody asks for any more just expires


@dataclass(frozen=True, slots=True)
class ValidationSnapshot:
    hosts: tuple[EngineHost, ...]
    tree: BudgetTree

    def is_leaf(self, path: str) -> bool:
        return not self.tree.children(path)


def validation_snapshot(cluster: Cluster) -> ValidationSnapshot:
    stamp = _stamp_of(cluster)
    key = f"validation-snapshot:{cluster.pk}:{stamp}"
    try:
        snapshot = cache.get(key)
    except Exception:  # an unreachable cache costs speed, never a submission
        log.warning("could not read the validation snapshot from the cache", exc_info=True)
        snapshot = None
    if snapshot is None:
        snapshot = ValidationSnapshot(
            hosts=tuple(engine_hosts(Host.objects.filter(cluster=cluster))),
            tree=budget_tree(cluster),
        )
        try:
            cache.set(key, snapshot, KEPT_FOR)
        except Exception:
            log.warning("could not keep the validation snapshot in the cache", exc_info=True)
    return snapshot


@functools.cache
def _stamp_sql() -> str:
    meta = ValidationStamp._meta
    quote = connection.ops.quote_name
    return (f"SELECT {quote(meta.get_field('stamp').column)} FROM {quote(meta.db_table)} "
            f"WHERE {quote(meta.pk.column)} = %s")


def _stamp_of(cluster: Cluster) -> str:
    with connection.cursor() as cursor:
        cursor.execute(_stamp_sql(), [cluster.pk])
        row = cursor.fetchone()
    if row is None:
        raise ValidationStamp.DoesNotExist(f"cluster {cluster.pk} has no validation stamp")
    return row[0]
