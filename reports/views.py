"""Review-meeting reports and dashboards. Each view renders its whole page, or for an htmx
request only the fragment that changes (the table, the charts, the budgets card)."""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from budgets import services as budget_services
from budgets.models import Allocation
from fleet.models import Cluster
from reports import (
    accounting,
    budget_history,
    charts,
    fleet_statistics,
    idle_allocations,
    pyramid,
    queue_statistics,
    review_report,
    tasks,
    trends,
    users,
)
from reports.forms import ComparisonForm, PeriodForm, RangeForm, WhatIfForm, parameter_sets
from reports.models import ReportSubscription, WhatIf, WhatIfComparison
from reports.permissions import (
    changeable_nodes,
    may_see_what_if,
    require_budget_rows,
    require_dashboards,
    require_what_if,
    visible_node_ids,
)
from scheduler.engine import percent
from scheduler.engine.spreadsheet import csv_writer


def _cluster(name):
    clusters = Cluster.objects.with_gpu_count()
    if name:
        return get_object_or_404(clusters, name=name)
    cluster = clusters.first()
    if cluster is None:
        raise Http404("No cluster yet.")
    return cluster


def _within(node, top) -> bool:
    return node.path == top.path or node.path.startswith(top.path + "/")


@login_required
def review(request, cluster=None, pk=None, fmt="html"):
    """The budget review report: one row per visible node in tree order, each row the subtotal
    of its subtree; `pk` narrows it to one node's subtree (the per-project view)."""
    visible = require_budget_rows(request.user)
    cluster = _cluster(cluster)
    form = PeriodForm(request.GET or None)
    start, end, period = form.bounds()
    tree = accounting.Tree()
    top = None
    if pk is not None:
        top = tree.by_pk.get(pk)
        if top is None:
            raise Http404("No such budget.")
        if pk not in visible:
            raise PermissionDenied("You may not see this budget's report.")

    def shown(report):
        return [row for row in report.rows
                if row.node.pk in visible and (top is None or _within(row.node, top))]

    if fmt == "csv":  # the table alone: no per-user rows to read
        report = review_report.budget_report(cluster, start, end, tree=tree)
        return _csv(cluster, start, end, top, review_report.table(shown(report)))
    report, by_budget = users.report_and_users(cluster, start, end, tree)
    rows = shown(report)
    cells = review_report.table(rows)
    context = {
        "top_users": users.top_users(by_budget, {row.node.pk: row.node.path for row in rows}),
        "budget_users": [(row.node, by_budget[row.node.pk]) for row in rows
                         if row.node.pk in by_budget],
        "cluster": cluster,
        "clusters": Cluster.objects.all(),
        "form": form,
        "period": period,
        "start": start,
        "last_day": end - timedelta(days=1),
        "report": report,
        "top": top,
        "columns": [label for _, label in review_report.COLUMNS],
        "lines": _lines(cluster, rows, cells, top, request.GET.urlencode()),
        "definitions": review_report.DEFINITIONS,
        "generated": timezone.now(),
        "query": request.GET.urlencode(),
    }
    template = "reports/_review_table.html" if request.htmx else "reports/review.html"
    return render(request, template, context)


@login_required
def review_trends(request, cluster=None):
    """The review over time and across clusters: period over period for every visible budget,
    demand against supply per period, and the institute roll-up (reports.trends)."""
    visible = require_budget_rows(request.user)
    cluster = _cluster(cluster)
    form = PeriodForm(request.GET or None)
    start, end, period = form.bounds()
    tree = accounting.Tree()
    now = timezone.now()
    history = trends.period_over_period(cluster, start, end, period, tree, now=now)
    shown = [node for node in tree.nodes if node.pk in visible]
    demand = trends.Trend("Demand / supply (x)", [f.demand_over_supply for f in history])
    clusters = list(Cluster.objects.with_gpu_count())
    institute = trends.institute(clusters, start, end, tree, visible, now=now,
                                 reports={cluster.pk: history[-1].report})
    context = {
        "cluster": cluster,
        "clusters": clusters,
        "form": form,
        "period": period,
        "start": start,
        "last_day": end - timedelta(days=1),
        "query": request.GET.urlencode(),
        "periods": [f.report.start for f in history],
        "demand": (demand, charts.sparkline_points(demand.values)),
        "nodes": [
            (node, [(t, charts.sparkline_points(t.values))
                    for t in trends.node_trends(history, node.pk)])
            for node in shown
        ],
        "institute": institute,
    }
    return render(request, "reports/review_trends.html", context)


def _lines(cluster, rows, cells, top, query):
    """Table rows for the template: the row, its per-budget link (none for the page's own
    node), the budget and kind cells and the numeric cells."""
    base = reverse("reports:node_review", args=[cluster.name, 0]).removesuffix("0/")
    suffix = f"?{query}" if query else ""
    return [
        (row, None if top is not None and row.node == top else f"{base}{row.node.pk}/{suffix}",
         cell[0], cell[1], cell[2:])
        for row, cell in zip(rows, cells, strict=True)
    ]


def _csv(cluster, start, end, top, cells) -> HttpResponse:
    scope = f"-{top.slug}" if top else ""
    last = end - timedelta(days=1)
    filename = f"timeshare-{cluster.name}{scope}-{start:%Y-%m-%d}-to-{last:%Y-%m-%d}.csv"
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv_writer(response)
    writer.writerow([label for _, label in review_report.COLUMNS])
    writer.writerows(cells)
    return response


TREND_DAYS = 14


@login_required
def dashboards(request):
    """Per cluster, the pyramid now and over the last week, with a daily trend."""
    require_dashboards(request.user)
    now = timezone.now()
    tree = accounting.Tree()
    cards = []
    for cluster in Cluster.objects.with_gpu_count():
        # one budget report when the fair-share window is the week (the default)
        week_report = review_report.budget_report(cluster, now - timedelta(days=7), now, now=now,
                                            tree=tree)
        window_report = week_report if cluster.window == 7 * 86400 else None
        current, sampled_at = pyramid.latest_pyramid(cluster, tree, now=now,
                                                     report=window_report)
        week = pyramid.pyramid(cluster, now - timedelta(days=7), now, tree, now=now,
                               report=week_report)
        trend = pyramid.pyramid_trend(cluster, tree, now, TREND_DAYS)
        cards.append({
            "cluster": cluster,
            "now": current,
            "sampled_at": sampled_at,
            "week": week,
            "figure": charts.pyramid_trend(trend["days"], trend),
            "figure_id": f"trend-{cluster.name}",
            "unusable": budget_services.unusable_shares(cluster),
        })
    return render(request, "reports/dashboards.html", {"cards": cards, "now": now})


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request):
    """The scheduled review report: subscribed or not (the mail's unsubscribe link)."""
    subscription = ReportSubscription.objects.filter(user=request.user).first()
    subscribed = subscription is None or subscription.weekly_review
    if request.method == "POST":
        subscribed = request.POST.get("weekly_review") == "on"
        ReportSubscription.objects.update_or_create(
            user=request.user, defaults={"weekly_review": subscribed, "changed": timezone.now()}
        )
        messages.success(request, "You will receive the weekly review report." if subscribed
                         else "You will no longer receive the weekly review report.")
        return redirect("reports:preferences")
    return render(request, "reports/preferences.html", {
        "subscribed": subscribed, "day": settings.REVIEW_REPORT_DAY,
        "hour": settings.REVIEW_REPORT_HOUR, "time_zone": settings.TIME_ZONE,
    })


@login_required
def idle(request):
    """Idle allocations: live allocated runs flagged idle, per budget the user may see."""
    visible = require_budget_rows(request.user)
    now = timezone.now()
    budgets = idle_allocations.idle_allocations(visible, now)
    return render(request, "reports/idle.html", {
        "budgets": budgets, "now": now,
        "gpus": sum(b.gpus for b in budgets),
        "idle_gpu_hours": sum(b.idle_gpu_hours for b in budgets),
    })


def _budget_card(request, cluster, tree, start, end, now, history):
    visible = visible_node_ids(request.user)
    if not visible:
        return {"budget_nodes": None}
    node_id = request.GET.get("node")
    if node_id:
        node = tree.by_pk.get(int(node_id)) if node_id.isdigit() else None
        if node is None:
            raise Http404("No such budget.")
        if node.pk not in visible:
            raise PermissionDenied("You may not see this budget's figures.")
    else:
        node = min((tree.by_pk[pk] for pk in visible), key=lambda n: (n.depth, n.path))
    children = [child for child in tree.children.get(node.pk, []) if child.pk in visible]
    shown = children or [node]
    series = budget_history.budget_series(
        cluster, tree, shown, start, end, now=now, history=history
    )
    standing = budget_history.window_standing(cluster, tree, now)
    siblings = sorted(tree.children.get(node.pk, []),
                      key=lambda n: standing.position.get(n.path, 0))
    rank = {child.pk: index + 1 for index, child in enumerate(siblings)}
    used = accounting.utilization_by_budget(cluster, start, end)
    measured = tree.subtree_sums({pk: b.measured for pk, b in used.items()})
    busy = tree.subtree_sums({pk: b.busy for pk, b in used.items()})
    rows = [
        {
            "node": n,
            "utilization": accounting.Busy(measured[n.pk], busy[n.pk]).fraction,
            "fraction": standing.tree.fraction(n.path),
            "ratio": percent(standing.ratio(n.path)),
            "rank": rank.get(n.pk),
            "of": len(siblings),
            "drill": bool(tree.children.get(n.pk)) and n is not node,
        }
        for n in ([node, *children] if children else [node])
    ]
    crumbs = [a for a in tree.nodes if a.pk in visible and _within(node, a) and a is not node]
    return {
        "budget_node": node,
        "budget_nodes": rows,
        "crumbs": crumbs,
        "budget_figure": charts.budgets(series["times"], shown, series["series"],
                                        span=charts.Span(start, end, now)),
        "window_days": cluster.window / 86400,
    }


@login_required
def cluster_dashboard(request, cluster):
    """Occupancy, budgets (with drill-down), queue and fleet of one cluster over a range."""
    require_dashboards(request.user)
    cluster = _cluster(cluster)
    now = timezone.now()
    form = RangeForm(request.GET or None)
    start, end, choice = form.bounds(now)
    tree = accounting.Tree()
    # shares, capacity and usage per bucket, from a fair-share window before the range: for
    # the budgets chart and the waits by budget ratio
    history = budget_history.History.load(cluster, tree, start, end, now)
    context = {
        "cluster": cluster,
        "clusters": Cluster.objects.all(),
        "form": form,
        "choice": choice,
        "start": start,
        "end": end,
        **_budget_card(request, cluster, tree, start, end, now, history),
    }
    if request.htmx and request.htmx.target == "budget-card":
        return render(request, "reports/_budget_card.html", context)
    queue = queue_statistics.queue_figures(cluster, tree, start, end, now=now, history=history)
    fleet = fleet_statistics.fleet_figures(cluster, start, end, now=now)
    span = charts.Span(start, end, now)
    context.update({
        "occupancy_figure": charts.occupancy(
            pyramid.occupancy_series(cluster, start, end, history.kind), span=span
        ),
        "queue": queue,
        "ratio_bands": queue_statistics.RATIO_BANDS,
        "pending_top": queue_statistics.PENDING_TOP,
        "waits_figure": charts.waits(queue["classes"]),
        "ratio_waits_figure": charts.waits(queue["bands"], "Queue wait by budget ratio (starts)",
                                           "budget ratio when the wait began"),
        "pending_figure": charts.pending(
            queue["times"], queue["pending"],
            f"Pending GPUs by budget (allocated work, top {queue_statistics.PENDING_TOP})",
            span=span,
        ),
        "preemptions_figure": charts.preemptions(
            queue["times"], queue["preemptions"], queue["requeues"], span=span
        ),
        "fleet": fleet,
        "host_states_figure": charts.host_states(fleet["times"], fleet["over_time"],
                                                 span=span),
        "fleet_figure": charts.host_events(fleet["times"], fleet["events"], span=span),
    })
    template = "reports/_cluster_charts.html" if request.htmx else "reports/cluster.html"
    return render(request, template, context)


# ---------------------------------------------------------------------------------------------
# What-if


@login_required
def what_if(request, cluster=None):
    """Ask for a what-if replay of the cluster's recent submissions (managers and the CEO; a
    manager changes shares only below the nodes they manage)."""
    require_what_if(request.user)
    cluster = _cluster(cluster)
    allowed_ids = set(changeable_nodes(request.user).values_list("pk", flat=True))
    nodes = [node for node in accounting.Tree().nodes if node.pk in allowed_ids]
    shares = dict(Allocation.objects.filter(cluster=cluster).values_list("node_id", "shares"))
    if request.method == "POST":
        allowed = {f"shares_{node.pk}" for node in nodes}
        if any(key.startswith("shares_") and key not in allowed for key in request.POST):
            raise PermissionDenied("You may only change allocations inside your subtree.")
        form = WhatIfForm(request.POST, cluster=cluster, nodes=nodes, shares=shares)
        if form.is_valid():
            with transaction.atomic():
                created = WhatIf.objects.create(cluster=cluster, requested_by=request.user,
                                                params=form.params())
                transaction.on_commit(lambda: tasks.run_what_if.delay(created.pk))
            return redirect("reports:what_if_detail", created.pk)
    else:
        form = WhatIfForm(cluster=cluster, nodes=nodes, shares=shares)
    recent = WhatIf.objects.filter(cluster=cluster, requested_by=request.user,
                                   comparison=None)[:10]
    comparisons = WhatIfComparison.objects.filter(cluster=cluster,
                                                  requested_by=request.user)[:10]
    return render(request, "reports/what_if.html", {
        "cluster": cluster, "clusters": Cluster.objects.all(), "form": form, "recent": recent,
        "comparisons": comparisons,
    })


@login_required
def what_if_compare(request, cluster):
    """Ask for several parameter sets replayed over the same days, side by side (managers
    and the CEO, like a what-if; today's shares in every set)."""
    require_what_if(request.user)
    cluster = _cluster(cluster)
    data = request.POST if request.method == "POST" else None
    form, sets = ComparisonForm(data), parameter_sets(data, cluster=cluster)
    if data is not None and all([form.is_valid(), sets.is_valid()]):  # both show their errors
        days = form.cleaned_data["days"]
        with transaction.atomic():
            comparison = WhatIfComparison.objects.create(
                cluster=cluster, requested_by=request.user, days=days)
            ids = [WhatIf.objects.create(cluster=cluster, requested_by=request.user,
                                         comparison=comparison,
                                         params={"days": days, **one.params()}).pk
                   for one in sets.filled()]
            transaction.on_commit(lambda: tasks.queue_comparison(ids))
        return redirect("reports:what_if_comparison", comparison.pk)
    return render(request, "reports/what_if_compare.html", {
        "cluster": cluster, "clusters": Cluster.objects.all(), "form": form, "sets": sets,
    })


def _in_form_units(params: dict) -> dict:
    """The parameters of a set as the form shows them (days, hours, minutes)."""
    return {"window_days": f"{params['window'] / 86400:.4g}",
            "max_min_runtime_hours": f"{params['max_min_runtime'] / 3600:.4g}",
            "grace_minutes": f"{params['grace'] / 60:.4g}",
            "hysteresis": f"{params['hysteresis']:.4g}"}


def _figures(side: dict) -> dict:
    """A replay's (or what happened's) line of the comparison: waits in minutes, occupancy in
    percent (none for what happened: the review report has no such figure)."""
    waits = side["waits"]
    occupancy = (None if "occupancy_allocated" not in side
                 else 100 * (side["occupancy_allocated"] + side["occupancy_unallocated"]))
    return {"p50_min": None if waits["p50"] is None else waits["p50"] / 60,
            "p95_min": None if waits["p95"] is None else waits["p95"] / 60,
            "preemptions": side["preemptions"], "occupancy_pct": occupancy}


def _comparison_sets(comparison) -> list[dict]:
    """Each set in the form's units, with its progress and, once replayed, its figures."""
    rows = []
    for number, one in enumerate(comparison.sets.order_by("pk"), start=1):
        replayed = (one.result or {}).get("what_if")
        rows.append({"number": number, "what_if": one, "percent": round(100 * one.progress),
                     "params": _in_form_units(one.params), "replayed": replayed,
                     "figures": _figures(replayed) if replayed else None})
    return rows


def _comparison_budgets(user, done, sets) -> list[dict]:
    """Per visible budget node: GPU-hours delivered actually, replayed as is, and per set."""
    visible = visible_node_ids(user)
    rows = []
    for node in accounting.Tree().nodes:
        if node.pk not in visible:
            continue
        actual = done["actual"]["budgets"].get(node.path)
        as_is = done["as_is"]["budgets"].get(node.path)
        per_set = [((one["replayed"] or {}).get("budgets", {}).get(node.path) or {})
                   .get("delivered_h") for one in sets]
        if actual or as_is:
            rows.append({"node": node, "actual": (actual or {}).get("delivered_h"),
                         "as_is": (as_is or {}).get("delivered_h"), "sets": per_set})
    return rows


@login_required
def what_if_comparison(request, pk):
    """A comparison: a progress bar per set while they run (htmx polls this view), then one
    table of every set next to what happened and to today's parameters."""
    require_what_if(request.user)
    found = get_object_or_404(
        WhatIfComparison.objects.select_related("cluster", "requested_by"), pk=pk)
    if not may_see_what_if(request.user, found):
        raise PermissionDenied("This comparison is someone else's.")
    sets = _comparison_sets(found)
    active = any(one["what_if"].active for one in sets)
    # every set replayed the same days: the first one done tells what happened, and as is
    done = None if active else next((one["what_if"].result for one in sets
                                     if one["what_if"].state == WhatIf.State.DONE), None)
    context = {
        "comparison": found, "cluster": found.cluster, "sets": sets, "active": active,
        "done": done,
        "actual": _figures(done["actual"]) if done else None,
        "as_is": {"params": _in_form_units(done["params"]["as_is"]),
                  "figures": _figures(done["as_is"])} if done else None,
        "budgets": _comparison_budgets(request.user, done, sets) if done else [],
    }
    template = ("reports/_what_if_comparison_status.html" if request.htmx
                else "reports/what_if_comparison.html")
    return render(request, template, context)


def _what_if_rows(user, what_if) -> list[dict]:
    """Per visible budget node: fraction, entitlement and delivered, actual and replayed."""
    result = what_if.result or {}
    visible = visible_node_ids(user)
    rows = []
    for node in accounting.Tree().nodes:
        if node.pk not in visible:
            continue
        sides = {side: (result.get(side) or {}).get("budgets", {}).get(node.path)
                 for side in ("actual", "as_is", "what_if")}
        if not any(sides.values()):
            continue
        rows.append({"node": node, **sides})
    return rows


def _what_if_parameters(what_if) -> list[dict]:
    """The parameters of both replays in the form's units (days and hours): the cluster's as
    they were when the replay ran, and the asked ones."""
    asked = what_if.params
    as_is = ((what_if.result or {}).get("params") or {}).get("as_is") or {
        key: getattr(what_if.cluster, key) for key in ("window", "max_min_runtime", "hysteresis")}
    rows = []
    for key, label, unit, scale in (("window", "Window", "days", 86400),
                                    ("max_min_runtime", "Maximum min_runtime", "hours", 3600),
                                    ("hysteresis", "Hysteresis", "", 1)):
        rows.append({"label": label, "unit": unit, "as_is": f"{as_is[key] / scale:.4g}",
                     "what_if": f"{asked.get(key, as_is[key]) / scale:.4g}"})
    return rows


@login_required
def what_if_detail(request, pk):
    """A what-if: its progress bar while it runs (htmx polls this view), then the replay next
    to what happened."""
    require_what_if(request.user)
    found = get_object_or_404(WhatIf.objects.select_related("cluster", "requested_by"), pk=pk)
    if not may_see_what_if(request.user, found):
        raise PermissionDenied("This what-if is someone else's.")
    context = {
        "what_if": found,
        "cluster": found.cluster,
        "percent": round(100 * found.progress),
        "rows": _what_if_rows(request.user, found) if found.state == WhatIf.State.DONE else [],
        "result": found.result,
        "parameters": _what_if_parameters(found),
    }
    template = "reports/_what_if_status.html" if request.htmx else "reports/what_if_detail.html"
    return render(request, template, context)
