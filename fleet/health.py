"""Host health during a tick: which hosts count, a lost heartbeat, and the automatic repair
workflow (DRAINED/DOWN -> REPAIRING -> the backend's repair and health check -> AVAILABLE, or
ESCALATED to a human after ``max_repairs`` failed attempts in a row).

The live loop owns the tick; this module owns what happens to hosts in it. ``HostChanges``
collects every host state change and event of one tick and writes them in two statements."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import mail_admins

from fleet.backends import FleetBackend, HealthSignal
from fleet.models import Host, HostEvent
from fleet.signals import host_escalated

log = logging.getLogger(__name__)

HEALTHY = (Host.State.AVAILABLE, Host.State.DRAINING)  # hosts that count for capacity
ALIVE = (Host.State.AVAILABLE, Host.State.DRAINING, Host.State.DRAINED)
REASON_MAX = 500


class HostChanges:
    """The host state changes and host events of one tick at ``now``, saved together."""

    def __init__(self, now: datetime):
        self.now = now
        self.changed: dict[int, Host] = {}
        self.events: list[HostEvent] = []

    def set_state(self, host: Host, state: str, reason: str) -> None:
        host.state = state
        host.state_reason = reason[:REASON_MAX]
        host.state_changed = self.now
        self.changed[host.pk] = host

    def record(self, host: Host, kind: str, reason: str, needed_human: bool = False) -> None:
        self.events.append(HostEvent(
            host=host, at=self.now, kind=kind, reason=reason[:REASON_MAX],
            needed_human=needed_human,
        ))

    def save(self) -> None:
        if self.changed:
            Host.objects.bulk_update(
                [self.changed[pk] for pk in sorted(self.changed)],
                ["state", "state_reason", "state_changed", "failed_repairs"],
            )
        if self.events:
            HostEvent.objects.bulk_create(self.events)


def lost_heartbeat(host: Host, now: datetime) -> HealthSignal:
    return HealthSignal(host.name, "lost_heartbeat", now,
                        f"lost heartbeat: last seen {host.last_heartbeat:%Y-%m-%d %H:%M:%S}")


def advance_repairs(hosts, fleet: FleetBackend, changes: HostChanges, after_commit: list) -> None:
    """One step of the repair workflow for every host not already changed in this tick;
    what the backend must be told (resume) or a human (escalation) goes to ``after_commit``."""
    now = changes.now
    limit = int(fleet.config.get("max_repairs", getattr(settings, "TIMESHARE_MAX_REPAIRS", 3)))
    wait = timedelta(seconds=float(fleet.config.get("repair_seconds", 30)))
    for host in hosts:
        if host.pk in changes.changed:
            continue  # changed in this tick: next step at the next tick
        if host.state in (Host.State.DRAINED, Host.State.DOWN):
            changes.set_state(host, Host.State.REPAIRING, "automatic repair and health check")
            changes.record(host, HostEvent.Kind.REPAIR_STARTED,
                           f"automatic repair ({fleet.name} backend)")
        elif host.state == Host.State.REPAIRING and now >= host.state_changed + wait \
                and now > host.state_changed:
            if fleet.repair(host, now):
                host.failed_repairs = 0
                changes.set_state(host, Host.State.AVAILABLE, "repaired: health check passed")
                changes.record(host, HostEvent.Kind.REPAIR_SUCCEEDED,
                               "automatic repair: health check passed")
                changes.record(host, HostEvent.Kind.RETURNED, "back in service")
                after_commit.append(lambda h=host: fleet.resume(h))
                continue
            host.failed_repairs += 1
            n = host.failed_repairs
            tries = f"{n} failed repair{'s' if n > 1 else ''}"
            changes.record(host, HostEvent.Kind.REPAIR_FAILED,
                           f"automatic repair failed the health check ({tries})")
            if host.failed_repairs >= limit:
                why = f"{tries} in a row: needs a human"
                changes.set_state(host, Host.State.ESCALATED, why)
                changes.record(host, HostEvent.Kind.ESCALATED, why, needed_human=True)
                after_commit.append(lambda h=host, w=why: notify_escalation(h, w))
            else:
                changes.set_state(host, Host.State.REPAIRING, f"retrying repair ({tries})")


def notify_escalation(host: Host, why: str) -> None:
    log.warning("host %s escalated to a human: %s", host, why)
    mail_admins(f"Timeshare: host {host} needs a human", why, fail_silently=True)
    host_escalated.send_robust(sender=Host, host=host, reason=why)
