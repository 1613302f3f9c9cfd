"""Fleet statistics of a cluster over a range: host states now and over time, host events per
chart bucket, and the share of repairs that needed a human."""

from __future__ import annotations

import bisect
from collections import defaultdict
from datetime import datetime

from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from fleet.models import Host, HostEvent
from fleet.services import repair_summary
from reports.accounting import buckets, period_until, step_for
from reports.sql import Epoch

REPAIR_OUTCOMES = [
    HostEvent.Kind.FAILED, HostEvent.Kind.DRAINED, HostEvent.Kind.REPAIR_SUCCEEDED,
    HostEvent.Kind.REPAIR_FAILED, HostEvent.Kind.ESCALATED,
]


# The state a host is in after each kind of host event (the live loop's transitions).
STATE_AFTER = {
    HostEvent.Kind.DRAIN_REQUESTED: Host.State.DRAINING,
    HostEvent.Kind.HEALTH_SIGNAL: Host.State.DRAINING,
    HostEvent.Kind.DRAINED: Host.State.DRAINED,
    HostEvent.Kind.FAILED: Host.State.DOWN,
    HostEvent.Kind.REPAIR_STARTED: Host.State.REPAIRING,
    HostEvent.Kind.REPAIR_SUCCEEDED: Host.State.AVAILABLE,
    HostEvent.Kind.REPAIR_FAILED: Host.State.REPAIRING,  # retried, or escalated right after
    HostEvent.Kind.ESCALATED: Host.State.ESCALATED,
    HostEvent.Kind.RETURNED: Host.State.AVAILABLE,
}


def fleet_figures(cluster, start: datetime, end: datetime, now=None) -> dict:
    """Host states now and over time, host events per bucket, and the repair figure of the
    range (``fleet.services.repair_summary``: human repairs over all repairs).

    States over time replay the hosts' events: each host is, from the start of the range, in
    the state its last earlier event left it in (available without one; its state now if it
    has no event at all), then each event of the range moves it to `STATE_AFTER` its kind.
    The chart shows the mean number of hosts in each state per bucket."""
    now = now or timezone.now()
    until = period_until(start, end, now)
    step, kind = step_for(start, end)
    times = buckets(start, until, step)
    edges = [t.timestamp() for t in times] + [until.timestamp()]
    hosts = (
        cluster.hosts.annotate(
            before=Subquery(
                HostEvent.objects.filter(host=OuterRef("pk"), at__lt=start)
                .order_by("-at", "-id").values("kind")[:1]
            ),
            seen=Exists(HostEvent.objects.filter(host=OuterRef("pk"))),
        ).values_list("pk", "state", "before", "seen").order_by()
    )
    state: dict[int, str] = {}
    now_states: dict[str, int] = defaultdict(int)
    for pk, current, before, seen in hosts:
        now_states[current] += 1
        state[pk] = STATE_AFTER.get(before, Host.State.AVAILABLE) if seen else current
    events = (
        HostEvent.objects.filter(host__cluster=cluster, at__gte=start, at__lt=end)
        .order_by("at", "id").values_list("host_id", Epoch("at"), "kind")
    )
    counts: dict[str, list[int]] = {k: [0] * len(times) for k in REPAIR_OUTCOMES}
    hosts_in: dict[str, list[float]] = {k: [0.0] * len(times) for k in Host.State.values}
    since = {pk: edges[0] for pk in state}

    def stay(pk, a, b):
        """Host `pk` spent [a, b) in its current state: spread it over the buckets."""
        if b <= a or not times:
            return
        row = hosts_in[state[pk]]
        i = max(0, bisect.bisect_right(edges, a) - 1)
        while i < len(times) and edges[i] < b:
            lo, hi = max(a, edges[i]), min(b, edges[i + 1])
            if hi > lo:
                row[i] += (hi - lo) / (edges[i + 1] - edges[i])
            i += 1

    for host_id, at, event_kind in events:
        if event_kind in counts and at < edges[-1]:
            counts[event_kind][bisect.bisect_right(edges, at) - 1] += 1
        after = STATE_AFTER.get(event_kind)
        if host_id not in state or after is None or at >= edges[-1]:
            continue
        stay(host_id, since[host_id], at)
        state[host_id], since[host_id] = after, at
    for pk in state:
        stay(pk, since[pk], edges[-1])
    totals = {k: sum(counts[k]) for k in REPAIR_OUTCOMES}
    return {
        "times": times,
        "states": [(s, now_states.get(s, 0)) for s in Host.State.values],
        "over_time": hosts_in,
        "events": counts,
        "totals": totals,
        "repairs": repair_summary(cluster, start, until),
    }
