from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from budgets import services
from budgets.forms import ChangeRequestForm, ChildForm, DecisionForm, MoveForm, SharesForm
from budgets.models import Allocation, AllocationChange, BudgetNode, ChangeRequest
from budgets.permissions import (
    can_decide,
    can_edit_shares,
    can_request_change,
    roles,
)
from fleet.models import Cluster

UNPROCESSABLE = 422


def _require_role(user):
    if not roles(user).any:
        raise PermissionDenied("You have no role in this organisation's budgets.")


def _cluster(request, name=None):
    clusters = Cluster.objects.with_gpu_count()
    if name:
        return get_object_or_404(clusters, name=name)
    return clusters.first()


@login_required
@require_http_methods(["GET", "POST"])
def tree(request, cluster=None):
    """The budget tree of one cluster; managers edit shares inline (htmx swaps the table body)."""
    _require_role(request.user)
    cluster = _cluster(request, cluster)
    form, status, editing = None, 200, request.GET.get("edit")
    if request.method == "POST" and cluster:
        form = SharesForm(request.POST)
        editing = request.POST.get("node")
        if form.is_valid():
            node = get_object_or_404(BudgetNode, pk=form.cleaned_data["node"])
            try:
                services.set_shares(
                    request.user, node, cluster, form.cleaned_data["shares"],
                    reason=form.cleaned_data["reason"],
                    expected_version=form.cleaned_data["version"],
                )
            except services.BudgetError as error:
                form.add_error(error.field if error.field in form.fields else None, str(error))
            else:
                if not request.htmx:
                    messages.success(
                        request, f"{node.name} now has {form.cleaned_data['shares']} shares."
                    )
                    return redirect("budgets:tree", cluster=cluster.name)
                form, editing = None, None
        if form is not None:
            status = UNPROCESSABLE
    rows = services.tree_rows(cluster) if cluster else []
    for row in rows:
        row.can_edit = can_edit_shares(request.user, row.node)
        row.can_request = can_request_change(request.user, row.node)
        row.editing = str(row.node.pk) == str(editing) and row.can_edit
    context = {
        "cluster": cluster,
        "clusters": Cluster.objects.all(),
        "rows": rows,
        "form": form,
        "unusable": services.unusable_shares(cluster, rows) if cluster else [],
    }
    template = "budgets/_tree_body.html" if request.htmx else "budgets/tree.html"
    return render(request, template, context, status=status)


@login_required
def node_detail(request, pk):
    _require_role(request.user)
    node = get_object_or_404(BudgetNode.objects.prefetch_related("managers", "members"), pk=pk)
    clusters = list(Cluster.objects.with_gpu_count())
    allocations = []
    for cluster in clusters:
        row = next(r for r in services.tree_rows(cluster) if r.node.pk == node.pk)
        allocations.append((cluster, row))
    context = {
        "node": node,
        "ancestors": node.ancestors(),
        "children": node.children.order_by("name"),
        "allocations": allocations,
        "can_request": can_request_change(request.user, node),
        "can_move": can_edit_shares(request.user, node),
        "can_add_child": roles(request.user).manages(node.path),
        "can_read_history": BudgetNode.objects.restrict(request.user, "history")
        .filter(pk=node.pk)
        .exists(),
        "requests": ChangeRequest.objects.restrict(request.user)
        .filter(node=node)
        .select_related("cluster", "requested_by", "decided_by")[:20],
    }
    return render(request, "budgets/node_detail.html", context)


def _history_page(request, entries, node=None):
    cluster_name = request.GET.get("cluster")
    if cluster_name:
        entries = entries.filter(cluster__name=cluster_name)
    entries = entries.select_related("node", "cluster", "request")
    page = Paginator(entries, 50).get_page(request.GET.get("page"))
    context = {"page": page, "node": node, "clusters": Cluster.objects.all(),
               "cluster_name": cluster_name}
    template = "budgets/_history_table.html" if request.htmx else "budgets/history.html"
    return render(request, template, context)


@login_required
def node_history(request, pk):
    node = get_object_or_404(BudgetNode.objects.restrict(request.user, "history"), pk=pk)
    entries = AllocationChange.objects.filter(node__in=BudgetNode.objects.subtree(node.path))
    return _history_page(request, entries, node)


@login_required
def history(request):
    _require_role(request.user)
    visible = BudgetNode.objects.restrict(request.user, "history")
    return _history_page(request, AllocationChange.objects.filter(node__in=visible))


@login_required
def request_list(request):
    _require_role(request.user)
    visible = ChangeRequest.objects.restrict(request.user).select_related(
        "node", "node__parent", "cluster", "requested_by", "decided_by"
    )
    to_decide = list(ChangeRequest.objects.restrict(request.user, "decide").select_related(
        "node", "node__parent", "cluster", "requested_by"
    ))
    nodes = list(BudgetNode.objects.all()) if to_decide else []
    allocations_by_cluster = {}
    for change_request in to_decide:
        if change_request.cluster_id not in allocations_by_cluster:
            allocations_by_cluster[change_request.cluster_id] = {
                a.node_id: a
                for a in Allocation.objects.filter(cluster_id=change_request.cluster_id)
            }
        change_request.effects = services.effect_of(
            change_request, nodes=nodes,
            allocations=allocations_by_cluster[change_request.cluster_id],
        )
    context = {
        "to_decide": to_decide,
        "mine": visible.filter(requested_by=request.user),
        "others": visible.exclude(requested_by=request.user)[:100],
    }
    return render(request, "budgets/requests.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def request_create(request, pk):
    node = get_object_or_404(BudgetNode, pk=pk)
    if not can_request_change(request.user, node):
        raise PermissionDenied(f"Only the managers of {node.path} may ask to change its share.")
    form = ChangeRequestForm(request.POST or None, initial={"cluster": request.GET.get("cluster")})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                change_request = services.request_change(
                    request.user, node, data["cluster"], reason=data["reason"],
                    shares=data["shares"], percent=data["percent"],
                )
            except services.BudgetError as error:
                form.add_error(error.field if error.field in form.fields else None, str(error))
            else:
                messages.success(request, f"Request #{change_request.pk} sent for approval.")
                return redirect("budgets:request", pk=change_request.pk)
        status = UNPROCESSABLE
    return render(request, "budgets/request_form.html", {"node": node, "form": form}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def request_detail(request, pk):
    change_request = get_object_or_404(
        ChangeRequest.objects.restrict(request.user).select_related(
            "node", "node__parent", "cluster", "requested_by", "decided_by"
        ),
        pk=pk,
    )
    form = DecisionForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if not can_decide(request.user, change_request):
            if change_request.state != ChangeRequest.State.PENDING:
                return render(request, "budgets/request_detail.html", {
                    "change_request": change_request, "form": None,
                    "error": f"This request was already {change_request.state}.",
                }, status=409)
            raise PermissionDenied("You may not decide this request.")
        if form.is_valid():
            try:
                services.decide(
                    request.user, change_request,
                    approve=form.cleaned_data["decision"] == "approve",
                    comment=form.cleaned_data["comment"],
                )
            except services.BudgetError as error:
                form.add_error(error.field if error.field in form.fields else None, str(error))
            else:
                messages.success(request, f"Request #{change_request.pk} {change_request.state}.")
                return redirect("budgets:requests")
        status = UNPROCESSABLE
    context = {
        "change_request": change_request,
        "effects": services.effect_of(change_request),
        "form": form if can_decide(request.user, change_request) else None,
        "can_withdraw": change_request.requested_by_id == request.user.pk
        and change_request.state == ChangeRequest.State.PENDING,
    }
    return render(request, "budgets/request_detail.html", context, status=status)


@login_required
@require_POST
def request_withdraw(request, pk):
    change_request = get_object_or_404(ChangeRequest.objects.restrict(request.user), pk=pk)
    try:
        services.withdraw(request.user, change_request)
    except services.BudgetError as error:
        messages.error(request, str(error))
        return redirect("budgets:request", pk=pk)
    messages.success(request, f"Request #{pk} withdrawn.")
    return redirect("budgets:requests")


@login_required
@require_http_methods(["GET", "POST"])
def node_move(request, pk):
    node = get_object_or_404(BudgetNode, pk=pk)
    if not can_edit_shares(request.user, node):
        raise PermissionDenied(f"You do not manage a budget above {node.path}.")
    parents = BudgetNode.objects.restrict(request.user, "history").exclude(pk=node.pk)
    form = MoveForm(request.POST or None, parents=parents)
    if request.method == "POST" and form.is_valid():
        try:
            services.move_node(
                request.user, node, form.cleaned_data["parent"], reason=form.cleaned_data["reason"]
            )
        except services.BudgetError as error:
            form.add_error("parent", str(error))
        else:
            messages.success(request, f"{node.name} moved.")
            return redirect("budgets:node", pk=node.pk)
    status = UNPROCESSABLE if request.method == "POST" else 200
    return render(request, "budgets/node_move.html", {"node": node, "form": form}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def node_add_child(request, pk):
    parent = get_object_or_404(BudgetNode, pk=pk)
    if not roles(request.user).manages(parent.path):
        raise PermissionDenied(f"You do not manage {parent.path}.")
    form = ChildForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            child = services.add_child(
                request.user, parent, name=data["name"], slug=data["slug"], kind=data["kind"],
                description=data["description"],
            )
        except services.BudgetError as error:
            form.add_error(error.field, str(error))
        else:
            messages.success(request, f"{child.name} added under {parent.name}; give it shares.")
            return redirect("budgets:node", pk=child.pk)
    status = UNPROCESSABLE if request.method == "POST" else 200
    return render(request, "budgets/node_add_child.html", {"parent": parent, "form": form},
                  status=status)
