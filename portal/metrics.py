"""/metrics: the portal in Prometheus text format, read from the database at scrape time.

Readable by operators (session or API token) and by a scraper that sends
``Authorization: Bearer $METRICS_TOKEN`` (the environment variable of the portal process);
anyone else gets 403.

Counters count from the beginning of the history (runs, events, host events stay in the
database), so ``rate()`` and ``histogram_quantile()`` work as usual. The tick duration is not
in the database: the scheduler records it (``scheduler.tick_metrics``) and the last tick's time is
read from the occupancy samples every tick writes.
"""

from __future__ import annotations

import hmac
import os
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Max, Sum
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from rest_framework.exceptions import AuthenticationFailed

from budgets.models import BudgetNode
from fleet.models import Cluster, HostEvent
from fleet.permissions import can_operate
from fleet.services import repair_summary
from portal.api.authentication import BearerTokenAuthentication
from reports.accounting import queue_stays
from scheduler import status
from scheduler.models import Event, OccupancySample, Run, UtilizationRollup, Workload
from scheduler.tick_metrics import last_tick_seconds

WAIT_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 2 * 3600, 6 * 3600, 12 * 3600, 86400)
WAIT_CLASSES = ("debug", "small", "large", "unallocated")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TimeshareCollector:
    def collect(self):
        started = time.perf_counter()
        now = timezone.now()
        clusters = list(Cluster.objects.with_gpu_count().order_by("name"))
        name = {c.pk: c.name for c in clusters}
        paths = dict(BudgetNode.objects.values_list("id", "path"))

        gpus = GaugeMetricFamily(
            "timeshare_gpus", "GPUs by state: held by allocated or unallocated runs, free on "
            "AVAILABLE hosts, or unavailable (idle on hosts that are not AVAILABLE)",
            labels=["cluster", "state"],
        )
        for cluster_id, states in status.gpu_states().items():
            for state, n in states.items():
                gpus.add_metric([name[cluster_id], state], n)
        yield gpus

        hosts = GaugeMetricFamily("timeshare_hosts", "Hosts by state", labels=["cluster", "state"])
        for cluster_id, states in status.host_states().items():
            for state, n in states.items():
                hosts.add_metric([name[cluster_id], state], n)
        yield hosts

        pending = GaugeMetricFamily(
            "timeshare_pending_workloads", "Pending workloads", labels=["cluster", "budget"]
        )
        pending_gpus = GaugeMetricFamily(
            "timeshare_pending_gpus", "GPUs asked for by pending workloads",
            labels=["cluster", "budget"],
        )
        for (cluster_id, budget_id), (n, g) in sorted(status.pending_by_budget().items()):
            labels = [name[cluster_id], paths.get(budget_id, str(budget_id))]
            pending.add_metric(labels, n)
            pending_gpus.add_metric(labels, g)
        yield pending
        yield pending_gpus

        workloads = GaugeMetricFamily(
            "timeshare_workloads", "Workloads by state", labels=["cluster", "state"]
        )
        for cluster_id, state, n in Workload.objects.values("cluster_id", "state").annotate(
            n=Count("id")
        ).values_list("cluster_id", "state", "n"):
            workloads.add_metric([name[cluster_id], state], n)
        yield workloads

        yield self._waits(clusters, now)

        preemptions = CounterMetricFamily(
            "timeshare_preemptions", "Runs ended by preemption", labels=["cluster"]
        )
        counts = dict(
            Run.objects.filter(end_reason=Run.EndReason.PREEMPTED)
            .values("workload__cluster_id").annotate(n=Count("id"))
            .values_list("workload__cluster_id", "n")
        )
        requeues = CounterMetricFamily(
            "timeshare_requeues", "Workloads requeued (preemption, drain or host failure)",
            labels=["cluster"],
        )
        requeued = dict(
            Event.objects.filter(kind=Event.Kind.REQUEUED)
            .values("workload__cluster_id").annotate(n=Count("id"))
            .values_list("workload__cluster_id", "n")
        )
        for cluster in clusters:
            preemptions.add_metric([cluster.name], counts.get(cluster.pk, 0))
            requeues.add_metric([cluster.name], requeued.get(cluster.pk, 0))
        yield preemptions
        yield requeues

        repairs = CounterMetricFamily(
            "timeshare_repairs", "Repairs that brought a host back, by whether a human was "
            "needed", labels=["cluster", "needed_human"],
        )
        host_events = CounterMetricFamily(
            "timeshare_host_events", "Host health and maintenance events by kind",
            labels=["cluster", "kind"],
        )
        by_kind: dict[tuple[int, str, bool], int] = defaultdict(int)
        for cluster_id, kind, human, n in HostEvent.objects.values(
            "host__cluster_id", "kind", "needed_human"
        ).annotate(n=Count("id")).values_list("host__cluster_id", "kind", "needed_human", "n"):
            by_kind[(cluster_id, kind, human)] += n
        for cluster in clusters:
            for human in (False, True):
                n = by_kind.get((cluster.pk, HostEvent.Kind.REPAIR_SUCCEEDED, human), 0)
                repairs.add_metric([cluster.name, str(human).lower()], n)
            for kind in HostEvent.Kind.values:
                n = sum(by_kind.get((cluster.pk, kind, h), 0) for h in (False, True))
                host_events.add_metric([cluster.name, kind], n)
        yield repairs
        yield host_events

        share = GaugeMetricFamily(
            "timeshare_human_repair_share", "Human repairs / all repairs that brought a host "
            "back, since the cluster exists (the hosts page's and dashboard's figure); absent "
            "before the first repair", labels=["cluster"],
        )
        for cluster in clusters:
            figure = repair_summary(cluster)
            if figure["share"] is not None:
                share.add_metric([cluster.name], figure["share"])
        yield share

        ratio = GaugeMetricFamily(
            "timeshare_budget_usage_ratio", "Usage over entitlement in the cluster's window "
            "(+Inf: no allocation, yet used)", labels=["cluster", "budget"],
        )
        fraction = GaugeMetricFamily(
            "timeshare_budget_fraction", "Fraction of the cluster", labels=["cluster", "budget"]
        )
        usage = GaugeMetricFamily(
            "timeshare_budget_usage_gpu_seconds", "Allocated GPU-seconds charged to the "
            "budget's subtree in the cluster's window", labels=["cluster", "budget"],
        )
        for cluster in clusters:
            standing = status.current_standing(cluster, now)
            for path in standing.tree.nodes:
                ratio.add_metric([cluster.name, path], standing.ratio(path))
                fraction.add_metric([cluster.name, path], standing.tree.fraction(path))
                usage.add_metric([cluster.name, path], standing.usage.get(path, 0.0))
        yield ratio
        yield fraction
        yield usage

        yield from self._utilization(clusters, now)

        last_tick = GaugeMetricFamily(
            "timeshare_last_tick_timestamp_seconds", "When the loop last ticked the cluster",
            labels=["cluster"],
        )
        for cluster_id, at in OccupancySample.objects.values("cluster_id").annotate(
            at=Max("at")
        ).values_list("cluster_id", "at"):
            last_tick.add_metric([name[cluster_id]], at.timestamp())
        yield last_tick
        ticks = last_tick_seconds(c.pk for c in clusters)
        tick = GaugeMetricFamily(
            "timeshare_tick_duration_seconds", "How long the cluster's last tick took",
            labels=["cluster"],
        )
        for cluster in clusters:
            if cluster.pk in ticks:
                tick.add_metric([cluster.name], ticks[cluster.pk])
        yield tick

        yield GaugeMetricFamily(
            "timeshare_scrape_duration_seconds", "How long this scrape took to compute",
            value=time.perf_counter() - started,
        )

    def _utilization(self, clusters, now):
        """The GPU busy fraction of every run's GPUs over the current and the previous clock
        hour (the pyramid's "now"), and the live runs flagged idle, per cluster that reports
        telemetry."""
        utilization = GaugeMetricFamily(
            "timeshare_gpu_utilization", "GPU busy fraction (0-1) of the GPUs runs hold, from "
            "the fleet's telemetry, over the current and the previous clock hour",
            labels=["cluster"],
        )
        idle = GaugeMetricFamily(
            "timeshare_idle_runs", "Live runs flagged idle (below the cluster's idle threshold "
            "for its idle period)", labels=["cluster"],
        )
        since = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
        busy = {
            cluster_id: (measured, used)
            for cluster_id, measured, used in UtilizationRollup.objects.filter(
                hour__gte=since, hour__lte=now
            ).values("cluster_id").annotate(
                measured=Sum("gpu_seconds"), used=Sum("busy_gpu_seconds")
            ).values_list("cluster_id", "measured", "used").order_by()
        }
        flagged = dict(
            Run.objects.filter(ended__isnull=True, idle_flagged_at__isnull=False)
            .values("workload__cluster_id").annotate(n=Count("id"))
            .values_list("workload__cluster_id", "n").order_by()
        )
        for cluster in clusters:
            if cluster.telemetry == "none":
                continue
            measured, used = busy.get(cluster.pk, (0.0, 0.0))
            if measured:
                utilization.add_metric([cluster.name], used / measured)
            idle.add_metric([cluster.name], flagged.get(cluster.pk, 0))
        yield utilization
        yield idle

    def _waits(self, clusters, now):
        family = HistogramMetricFamily(
            "timeshare_queue_wait_seconds",
            "Queue waits from submission or requeue to start, by class: debug (<= 2 GPUs, "
            "min_runtime <= 15 min), small (fits one host), large, unallocated",
            labels=["cluster", "class"],
        )
        for cluster in clusters:
            host_gpus = max((h.gpus for h in cluster.hosts.all()), default=8)
            waits: dict[str, list[float]] = defaultdict(list)
            for stay in queue_stays(cluster, EPOCH, now):
                if stay.started and stay.closed is not None:
                    waited = stay.closed - stay.opened  # seconds, or a timedelta
                    waits[stay.kind(host_gpus)].append(
                        waited.total_seconds() if hasattr(waited, "total_seconds") else waited
                    )
            for kind in WAIT_CLASSES:
                values = waits.get(kind, [])
                buckets = [
                    (str(float(bound)), sum(1 for v in values if v <= bound))
                    for bound in WAIT_BUCKETS
                ]
                buckets.append(("+Inf", len(values)))
                family.add_metric([cluster.name, kind], buckets, sum(values))
        return family


def _allowed(request) -> bool:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scraper = os.environ.get("METRICS_TOKEN", "")
    if (
        scraper
        and header.lower().startswith("bearer ")
        and hmac.compare_digest(header[7:].strip().encode(), scraper.encode())
    ):
        return True
    user = request.user
    if header:
        try:
            found = BearerTokenAuthentication().authenticate(request)
        except AuthenticationFailed:
            return False
        if found:
            user = found[0]
    return bool(user and user.is_authenticated and can_operate(user))


def metrics(request):
    if not _allowed(request):
        return HttpResponse(
            "Only operators or the configured scraper token may read the metrics.\n",
            status=403, content_type="text/plain; charset=utf-8",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TimeshareCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


