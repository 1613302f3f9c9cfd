from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from common.errors import ServiceError
from common.idempotency import once
from common.models import REPLAY_HEADER
from fleet import services as host_services
from fleet.models import Cluster, Host
from fleet.permissions import can_operate
from scheduler import services
from scheduler.charts import utilization_sparkline
from scheduler.engine.spreadsheet import csv_writer
from scheduler.filters import SCOPES, WorkloadFilterSet
from scheduler.forms import DrainForm, SubmitForm, format_duration
from scheduler.models import Event, RunGPU, UtilizationRollup, Workload, gpu_ranges
from scheduler.permissions import (
    can_cancel,
    can_view_fleet,
    restrict_workloads,
    visible_workload_ids,
)
from scheduler.status import tick_outage
from scheduler.templatetags.scheduler_extras import span
from scheduler.utilization import gib

UNPROCESSABLE = 422
PAGE_SIZE = 50


def _workloads():
    return Workload.objects.select_related("owner", "budget", "cluster")


def _visible_workloads(user):
    return restrict_workloads(_workloads(), user)


# Workloads


@login_required
def workload_list(request):
    """Workloads the user may see, filtered; htmx polls the table body while it is open."""
    filterset = WorkloadFilterSet(request.GET, _workloads(), request=request)
    page = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    _where(page.object_list)
    context = {
        "filterset": filterset, "page": page, "scopes": SCOPES,
        "page_numbers": page.paginator.get_elided_page_range(page.number, on_each_side=2,
                                                             on_ends=1),
    }
    template = "scheduler/_workload_rows.html" if request.htmx else "scheduler/workload_list.html"
    return render(request, template, context)


def _where(workloads) -> None:
    """For the running workloads of a page: where their live run is (``w.where``: "h100-007
    GPUs 0-3") and whether rebalancing may take it (``w.guard``, ``w.guard_title``). One
    query for the whole page, none when nothing on it runs."""
    running = {w.pk: w for w in workloads
               if w.state in (Workload.State.RUNNING, Workload.State.PREEMPTING)}
    if not running:
        return
    now = timezone.now()
    hosts: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    runs = {}
    for workload_id, host, index, allocated, protected_until, signalled_at in (
        RunGPU.objects.filter(held=True, run__ended=None, run__workload_id__in=list(running))
        .order_by("host__name", "index")
        .values_list("run__workload_id", "host__name", "index", "run__allocated",
                     "run__protected_until", "run__signalled_at")
    ):
        hosts[workload_id][host].append(index)
        runs[workload_id] = (allocated, protected_until, signalled_at)
    for pk, w in running.items():
        w.where = "; ".join(f"{host} {gpu_ranges(indices)}"
                            for host, indices in hosts.get(pk, {}).items())
        if pk not in runs:
            continue
        allocated, protected_until, signalled_at = runs[pk]
        if signalled_at is not None:
            w.guard, w.guard_title = "checkpointing", "preemption signalled: grace period"
        elif allocated and protected_until > now:
            left = span((protected_until - now).total_seconds())
            w.guard = f"protected for {left}"
            w.guard_title = f"protected from rebalancing until {protected_until:%Y-%m-%d %H:%M} UTC"
        else:
            w.guard = "preemptible"
            w.guard_title = ("unallocated: free, preemptible at any moment" if not allocated
                             else "past its minimum runtime: rebalancing may preempt it")


CSV_COLUMNS = [
    "id", "name", "owner", "budget", "cluster", "gpus", "min_runtime", "resumable", "state",
    "submitted", "finished", "exit_code", "queue_position", "queue_reason",
]


@login_required
def workload_export(request):
    """The list page's filters, as CSV (min_runtime in seconds, times in ISO 8601 UTC)."""
    filterset = WorkloadFilterSet(request.GET, _workloads(), request=request)
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="workloads.csv"'
    writer = csv_writer(response)
    writer.writerow(CSV_COLUMNS)
    for w in filterset.qs.iterator(chunk_size=2000):
        writer.writerow([
            w.pk, w.name, w.owner.get_username(), w.budget.path, w.cluster.name, w.gpus,
            w.min_runtime, int(w.resumable), w.state, w.submitted.isoformat(),
            w.finished.isoformat() if w.finished else "", _blank(w.exit_code),
            _blank(w.queue_position), w.queue_reason,
        ])
    return response


def _blank(value):
    return "" if value is None else value


@login_required
@require_http_methods(["GET", "POST"])
def workload_create(request):
    form = SubmitForm(request.POST or None, user=request.user,
                      initial={"min_runtime": "60", "cluster": request.GET.get("cluster")})

    def page(status):
        clusters = Cluster.objects.all()
        limits = [(c, format_duration(c.max_min_runtime)) for c in clusters]
        return render(request, "scheduler/workload_form.html", {"form": form, "limits": limits},
                      status=status)

    if request.method != "POST":
        return page(200)
    if not form.is_valid():
        return page(UNPROCESSABLE)
    data = dict(form.cleaned_data)
    token = data.pop("submit_token")

    def submit():
        try:
            workload = services.submit(request.user, **data)
        except services.SubmissionError as error:
            error.show_on(form)
            return page(UNPROCESSABLE)
        messages.success(request, f"{workload.name} submitted to {workload.cluster}.")
        return redirect("scheduler:workload", pk=workload.pk)

    # Any second POST of this form, whatever it holds, lands on the first one's workload; a
    # refused submission does not use the token up.
    response = once(request.user, f"submit-form:{token}", "", submit,
                    keep=lambda answer: answer.status_code == 302)
    if response.has_header(REPLAY_HEADER):
        messages.info(request, "This form was already submitted: here is its workload.")
    return response


@login_required
def workload_detail(request, pk):
    """The workload and its live timeline; htmx polls the timeline while the workload is active."""
    workload = get_object_or_404(_visible_workloads(request.user), pk=pk)
    runs = list(workload.runs.prefetch_related(
        Prefetch("assigned_gpus", queryset=RunGPU.objects.select_related("host"))
    ))
    context = {
        "workload": workload,
        "runs": runs,
        "utilization": _utilization(workload, runs),
        "timeline": _timeline(workload, runs, workload.events.all()),
        "can_cancel": workload.active and can_cancel(request.user, workload),
        "min_runtime": format_duration(workload.min_runtime),
    }
    template = "scheduler/_workload_live.html" if request.htmx else "scheduler/workload_detail.html"
    return render(request, template, context)


@login_required
@require_POST
def workload_cancel(request, pk):
    workload = get_object_or_404(_visible_workloads(request.user), pk=pk)
    if not can_cancel(request.user, workload):
        raise PermissionDenied("Only its owner, a manager of its budget or an operator may "
                               "cancel this workload.")
    try:
        services.cancel(request.user, workload)
    except services.SubmissionError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{workload.name} cancelled.")
    return redirect("scheduler:workload", pk=workload.pk)


def _utilization(workload, runs) -> dict | None:
    """The workload's GPU busy fraction from the utilization rollups: overall, per run
    (``run.busy``) and per clock hour for the sparkline; and the peak memory used on one GPU
    (``run.memory_gib``), where the telemetry knows it. None without telemetry."""
    hourly: dict = defaultdict(lambda: [0.0, 0.0])
    by_run: dict = defaultdict(lambda: [0.0, 0.0])
    memory_by_run: dict = {}
    for run_id, hour, measured, busy, memory in UtilizationRollup.objects.filter(
        run__workload=workload
    ).values_list(
        "run_id", "hour", "gpu_seconds", "busy_gpu_seconds", "memory_mib_max"
    ).order_by("hour"):
        for bucket in (hourly[hour], by_run[run_id]):
            bucket[0] += measured
            bucket[1] += busy
        if memory is not None:
            memory_by_run[run_id] = max(memory_by_run.get(run_id, 0.0), memory)
    for run in runs:
        measured, busy = by_run.get(run.pk, (0.0, 0.0))
        run.busy = busy / measured if measured else None
        run.memory_gib = gib(memory_by_run.get(run.pk))
    measured = sum(m for m, _ in hourly.values())
    if not measured:
        return None
    points = [(hour, busy / m) for hour, (m, busy) in hourly.items() if m]
    return {
        "busy": sum(b for _, b in hourly.values()) / measured,
        "memory_gib": gib(max(memory_by_run.values(), default=None)),
        "figure": utilization_sparkline(points, workload.cluster.idle_threshold),
        "idle": any(run.idle_flagged_at and run.ended is None for run in runs),
    }


class Entry:
    """One line of a workload's timeline."""

    def __init__(self, at, kind, label, reason="", placement=None, upcoming=False):
        self.at, self.kind, self.label, self.reason = at, kind, label, reason
        self.placement, self.upcoming = placement, upcoming


def _placement(run):
    by_host = defaultdict(list)
    for gpu in run.assigned_gpus.all():
        by_host[gpu.host.name].append(gpu.index)
    return [(host, ", ".join(map(str, sorted(indices)))) for host, indices in by_host.items()]


def _timeline(workload, runs, events):
    """Events with their reasons, plus what the runs say: where, protected until when."""
    now = timezone.now()
    by_run = {run.pk: run for run in runs}
    entries, started = [], set()
    for event in events:
        run = by_run.get(event.run_id)
        placement = None
        if event.kind == Event.Kind.STARTED and run:
            placement = _placement(run)
            started.add(run.pk)
        entries.append(Entry(event.at, event.kind, event.get_kind_display(), event.reason,
                             placement))
    for run in runs:
        if run.pk not in started:
            entries.append(Entry(run.started, "started", f"Started (run {run.number})",
                                 placement=_placement(run)))
        if not run.allocated:
            continue
        if run.protected_until > now and run.ended is None:
            entries.append(Entry(run.protected_until, "protected", "Protected until",
                                 "Its minimum runtime: no rebalancing may preempt it before.",
                                 upcoming=True))
        elif run.ended is None or run.ended > run.protected_until:
            entries.append(Entry(run.protected_until, "preemptible", "Preemptible since",
                                 "Past its minimum runtime: rebalancing may preempt it."))
    if not any(e.kind == Event.Kind.SUBMITTED for e in entries):
        entries.append(Entry(workload.submitted, "submitted", "Submitted"))
    if workload.finished and not any(e.kind in _FINAL for e in entries):
        entries.append(
            Entry(workload.finished, workload.state.lower(), workload.get_state_display())
        )
    entries.sort(key=lambda e: e.at)
    return entries


_FINAL = {Event.Kind.COMPLETED, Event.Kind.FAILED, Event.Kind.CANCELLED, Event.Kind.PREEMPTED}


# Hosts


def _require_fleet_reader(user):
    if not can_view_fleet(user):
        raise PermissionDenied("You have no role in this organisation.")


@login_required
def cluster_hosts(request, cluster=None):
    """Hosts of one cluster with their state and who holds their GPUs; htmx polls the table."""
    _require_fleet_reader(request.user)
    clusters = Cluster.objects.with_gpu_count().order_by("name")  # GROUP BY drops Meta.ordering
    cluster = get_object_or_404(clusters, name=cluster) if cluster else clusters.first()
    hosts = list(cluster.hosts.all()) if cluster else []
    holders = _holders(RunGPU.objects.filter(host__cluster=cluster, held=True), request.user)
    for host in hosts:
        host.holders = holders.get(host.pk, [])
        host.busy = sum(len(h.indices) for h in host.holders)
    context = {
        "cluster": cluster,
        "clusters": clusters,
        "hosts": hosts,
        "repairs": host_services.repair_summary(cluster) if cluster else None,
        "tick_outage": tick_outage(cluster) if cluster else "",
        "can_operate": can_operate(request.user),
    }
    template = "scheduler/_host_rows.html" if request.htmx else "scheduler/cluster_hosts.html"
    return render(request, template, context)


class Holder:
    """A run holding GPUs of a host. ``visible``: whether the viewer may see its workload;
    when not, the page names neither the workload nor its owner nor its budget."""

    def __init__(self, run):
        self.run, self.workload, self.indices, self.visible = run, run.workload, [], False


def _holders(gpus, user):
    """{host pk: [Holder(run, workload, GPU indices)]} for GPUs held right now."""
    gpus = gpus.select_related("run__workload__budget", "run__workload__owner").order_by(
        "host", "index"
    )
    by_host = defaultdict(dict)
    for gpu in gpus:
        holder = by_host[gpu.host_id].setdefault(gpu.run_id, Holder(gpu.run))
        holder.indices.append(gpu.index)
    holders = [h for runs in by_host.values() for h in runs.values()]
    visible = visible_workload_ids(user, {h.workload.pk for h in holders})
    for holder in holders:
        holder.visible = holder.workload.pk in visible
    return {host: list(runs.values()) for host, runs in by_host.items()}


def _host_page(request, host, drain_form=None, status=200):
    context = {
        "host": host,
        "holders": _holders(host.assigned_gpus.filter(held=True), request.user).get(host.pk, []),
        "history": host.events.select_related("by")[:200],
        "can_operate": can_operate(request.user),
        "drain_form": drain_form or DrainForm(),
    }
    return render(request, "scheduler/host_detail.html", context, status=status)


@login_required
def host_detail(request, pk):
    _require_fleet_reader(request.user)
    return _host_page(request, get_object_or_404(Host.objects.select_related("cluster"), pk=pk))


def _host_action(request, pk, act, done, form=None):
    """Operators only; the service does the work; its refusal becomes a message (or a form
    error, 422, when it is about the drain reason)."""
    if not can_operate(request.user):
        raise PermissionDenied("Only operators drain, repair and return hosts.")
    host = get_object_or_404(Host.objects.select_related("cluster"), pk=pk)
    if form is not None and not form.is_valid():
        return _host_page(request, host, form, status=UNPROCESSABLE)
    try:
        act(request.user, host, **(form.cleaned_data if form else {}))
    except ServiceError as error:
        if form is not None and error.field in form.fields:
            form.add_error(error.field, error.message)
            return _host_page(request, host, form, status=UNPROCESSABLE)
        messages.error(request, error.message)
    else:
        messages.success(request, f"{host.name}: {done}.")
    return redirect("scheduler:host", pk=host.pk)


@login_required
@require_POST
def host_drain(request, pk):
    return _host_action(request, pk, host_services.drain, "draining", DrainForm(request.POST))


@login_required
@require_POST
def host_return(request, pk):
    return _host_action(request, pk, host_services.return_to_service, "back in service")


@login_required
@require_POST
def host_repair(request, pk):
    return _host_action(request, pk, host_services.repair, "marked repaired")

