"""Every operator action on a host goes through here: permission, validation, one
transaction under the cluster's lock, a host event with its reason, then the backend is told
after the commit. Views and the API call these functions.

- ``drain``, ``return_to_service``, ``repair``: operators.
- ``switch_backend``: a cluster changes backend; hosts the new one does not know retire.
- ``repair_summary``: the repairs that brought a host back, and the share that needed a human.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from common.errors import ServiceError
from fleet.backends import backend_for
from fleet.health import REASON_MAX
from fleet.locks import lock_cluster
from fleet.models import Cluster, Host, HostEvent
from fleet.permissions import can_operate
from fleet.signals import host_changed
from scheduler.engine import RepairFigure


class HostActionError(ServiceError):
    """A host action that is not possible in the host's state."""


def _operator(user) -> None:
    if not can_operate(user):
        raise PermissionDenied("Only operators drain, return and repair hosts.")


def _set_host(host: Host, state: str, reason: str, now) -> None:
    host.state = state
    host.state_reason = reason[:REASON_MAX]
    host.state_changed = now
    host.save(update_fields=["state", "state_reason", "state_changed", "failed_repairs"])


def _locked_host(host: Host) -> Host:
    lock_cluster(host.cluster_id)
    return Host.objects.select_for_update().select_related("cluster").get(pk=host.pk)


def drain(user, host: Host, reason: str) -> Host:
    """Place nothing new on ``host``; its work leaves by the contract (unallocated and
    preemptible work at once, protected work as its minimum runtime ends), then the host is
    DRAINED and repaired automatically."""
    _operator(user)
    reason = (reason or "").strip()
    if not reason:
        raise HostActionError("Say why the host is drained.", "reason")
    now = timezone.now()
    with transaction.atomic():
        current = _locked_host(host)
        if current.state != Host.State.AVAILABLE:
            raise HostActionError(
                f"{current.name} is {current.state}: only an AVAILABLE host can be drained.", None
            )
        _set_host(current, Host.State.DRAINING, f"drained by {user.get_username()}: {reason}", now)
        HostEvent.objects.create(
            host=current, at=now, kind=HostEvent.Kind.DRAIN_REQUESTED, reason=reason, by=user
        )
        cluster = current.cluster
        transaction.on_commit(lambda: backend_for(cluster).drain(current, reason))
        host_changed.send(sender=Host, cluster_id=current.cluster_id)
    return current


def _back_in_service(user, host: Host, allowed, refusal, verb: str, why: str, events):
    """An operator puts a host back to AVAILABLE: checked (``refusal(host)`` says why not),
    recorded, told to the fleet."""
    _operator(user)
    now = timezone.now()
    with transaction.atomic():
        current = _locked_host(host)
        if current.state not in allowed:
            raise HostActionError(f"{current.name} is {current.state}: {refusal(current)}", None)
        current.failed_repairs = 0
        _set_host(current, Host.State.AVAILABLE, f"{verb} by {user.get_username()}: {why}", now)
        HostEvent.objects.bulk_create(
            HostEvent(host=current, at=now, by=user, **event) for event in events
        )
        cluster = current.cluster
        transaction.on_commit(lambda: backend_for(cluster).resume(current))
        host_changed.send(sender=Host, cluster_id=current.cluster_id)
    return current


def return_to_service(user, host: Host, reason: str = "") -> Host:
    """Undo a drain: a DRAINING or DRAINED host takes work again (no repair needed). A host
    already in its automatic repair (an idle host gets there within a tick of its drain) is
    not returned: the refusal says how to put it back at once."""
    why = (reason or "").strip() or "drain cancelled"

    def refusal(current: Host) -> str:
        if current.state == Host.State.REPAIRING:
            return ("its automatic repair is under way and returns it when the health check "
                    f"passes; to put it back now, mark it repaired (hosts repair {current.name}).")
        return ("only a draining or drained host returns to service (mark an escalated, down "
                f"or repairing host repaired instead: hosts repair {current.name}).")

    return _back_in_service(
        user, host, (Host.State.DRAINING, Host.State.DRAINED), refusal,
        "returned", why, [{"kind": HostEvent.Kind.RETURNED, "reason": why}],
    )


def repair(user, host: Host, note: str = "") -> Host:
    """A human fixed an ESCALATED (or DOWN) host: it is back in service, and the repair is
    counted as one that needed a human."""
    why = (note or "").strip() or "repaired by hand"
    return _back_in_service(
        user, host, (Host.State.ESCALATED, Host.State.DOWN, Host.State.REPAIRING),
        lambda current: "only an escalated, down or repairing host is repaired by hand.",
        "repaired", why,
        [
            {"kind": HostEvent.Kind.REPAIR_SUCCEEDED, "reason": why, "needed_human": True},
            {"kind": HostEvent.Kind.RETURNED, "reason": "back in service after a human repair"},
        ],
    )


def switch_backend(cluster: Cluster, backend: str, known_hosts, user=None) -> list[str]:
    """``cluster`` now runs on ``backend`` (saved by the caller). Its hosts that ``backend``
    does not know (``known_hosts``: names; None when the backend has no inventory of its own,
    like the simulated fleet) retire, each with a host event saying why: from now on nothing
    is scheduled on them and no capacity or report counts them. Hosts it knows again come
    back. Returns the names retired."""
    now = timezone.now()
    old = Cluster.objects.filter(pk=cluster.pk).values_list("backend", flat=True).first()
    if known_hosts is None or old == backend:
        return []
    known = set(known_hosts)
    why = (f"the cluster's backend changed from {old} to {backend}, which does not know this "
           "host")[:REASON_MAX]
    retired = list(Host.objects.filter(cluster=cluster).exclude(name__in=known))
    for host in retired:
        host.retired = now
        host.save(update_fields=["retired"])
    HostEvent.objects.bulk_create(
        HostEvent(host=host, at=now, kind=HostEvent.Kind.RETIRED, reason=why, by=user)
        for host in retired
    )
    Host.with_retired.filter(cluster=cluster, name__in=known).exclude(retired=None).update(
        retired=None)
    if retired:
        host_changed.send(sender=Host, cluster_id=cluster.pk)
    return [h.name for h in retired]


def repair_summary(cluster: Cluster | None = None, since=None, until=None) -> dict:
    """The repair figure (``RepairFigure``) of ``[since, until)``: repairs that brought a host
    back (automatic ones pass the health check, a human's follow an escalation or are done by
    hand), how many needed a human, and the comparison with every failure needing one."""
    events = HostEvent.objects.filter(kind=HostEvent.Kind.REPAIR_SUCCEEDED)
    if cluster is not None:
        events = events.filter(host__cluster=cluster)
    if since is not None:
        events = events.filter(at__gte=since)
    if until is not None:
        events = events.filter(at__lt=until)
    counts = events.aggregate(total=Count("id"), human=Count("id", filter=Q(needed_human=True)))
    return RepairFigure(counts["total"], counts["human"]).as_dict()
