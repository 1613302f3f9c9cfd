from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from budgets import people, reviews, services
from budgets.forms import (
    AddPersonForm,
    ChangeRequestForm,
    ChildForm,
    CommentForm,
    DecisionForm,
    MoveForm,
    RemovePersonForm,
    ReviewCycleForm,
    ReviewDecisionForm,
    SharesForm,
)
from budgets.models import (
    Allocation,
    AllocationChange,
    BudgetNode,
    ChangeRequest,
    MembershipChange,
    ReviewCycle,
    ReviewItem,
    ScheduledShareChange,
)
from budgets.permissions import (
    can_decide,
    can_edit_shares,
    can_follow_reviews,
    can_manage_people,
    can_pass_up,
    can_request_change,
    can_review,
    can_schedule_reviews,
    roles,
)
from common.errors import ServiceError
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
            data = form.cleaned_data
            try:
                if data["effective_at"]:
                    services.schedule_shares(
                        request.user, node, cluster, data["shares"], data["effective_at"],
                        reason=data["reason"], expires_at=data["expires_at"],
                    )
                    done = (f"{node.name} gets {data['shares']} shares from "
                            f"{data['effective_at']:%Y-%m-%d %H:%M} UTC.")
                else:
                    services.set_shares(
                        request.user, node, cluster, data["shares"], reason=data["reason"],
                        expected_version=data["version"], expires_at=data["expires_at"],
                    )
                    done = f"{node.name} now has {data['shares']} shares."
            except services.BudgetError as error:
                error.show_on(form)
            else:
                if not request.htmx:
                    messages.success(request, done)
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
    node = get_object_or_404(BudgetNode, pk=pk)
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
        "scheduled": ScheduledShareChange.objects.filter(node=node, applied_at=None)
        .select_related("cluster"),
        **_people_context(request.user, node),
    }
    return render(request, "budgets/node_detail.html", context)


PEOPLE_LOG_ROWS = 20


def _movable_to(user):
    """Leaves a manager may move a leaving member's pending work to."""
    return BudgetNode.objects.restrict(user, "people").filter(children__isnull=True)


def _people_context(user, node, add_form=None, error=None):
    may_manage = can_manage_people(user, node)
    log = MembershipChange.objects.filter(node=node) if (
        BudgetNode.objects.restrict(user, "history").filter(pk=node.pk).exists()
    ) else MembershipChange.objects.none()
    return {
        "people": [
            (role, label, list(people.people_of(node, role).order_by("username")))
            for role, label in MembershipChange.Role.choices
        ],
        "may_manage_people": may_manage,
        "add_form": add_form or (AddPersonForm() if may_manage else None),
        "move_targets": list(_movable_to(user).exclude(pk=node.pk)) if may_manage else [],
        "people_error": error,
        "people_log": log[:PEOPLE_LOG_ROWS],
    }


def _people_fragment(request, node, *, add_form=None, error=None, status=200):
    context = {"node": node, **_people_context(request.user, node, add_form, error)}
    return render(request, "budgets/_people.html", context, status=status)


def _after_people_change(request, node, message):
    if request.htmx:
        return _people_fragment(request, node)
    messages.success(request, message)
    return redirect("budgets:node", pk=node.pk)


def _people_refused(request, node, error_text, add_form=None):
    if request.htmx:
        return _people_fragment(request, node, add_form=add_form, error=error_text,
                                status=UNPROCESSABLE)
    messages.error(request, error_text)
    return redirect("budgets:node", pk=node.pk)


@login_required
@require_POST
def node_people_add(request, pk):
    """A manager at or above the node gives someone a role on it (htmx swaps #people)."""
    node = get_object_or_404(BudgetNode, pk=pk)
    if not can_manage_people(request.user, node):
        raise PermissionDenied(f"You do not manage {node.path} or a budget above it.")
    form = AddPersonForm(request.POST)
    if not form.is_valid():
        return _people_refused(request, node, "Give a username or email and a role.", form)
    data = form.cleaned_data
    try:
        change = people.add_person(request.user, node, data["person"], data["role"],
                                   reason=data["reason"])
    except people.PeopleError as error:
        return _people_refused(request, node, str(error), form)
    return _after_people_change(
        request, node, f"{change.person_name} is now a {change.role} of {node.name}."
    )


@login_required
@require_POST
def node_people_remove(request, pk):
    node = get_object_or_404(BudgetNode, pk=pk)
    if not can_manage_people(request.user, node):
        raise PermissionDenied(f"You do not manage {node.path} or a budget above it.")
    form = RemovePersonForm(request.POST, leaves=_movable_to(request.user).exclude(pk=node.pk))
    if not form.is_valid():
        return _people_refused(request, node, "Choose a person, a role and where their "
                               "pending work goes.")
    data = form.cleaned_data
    try:
        change = people.remove_person(
            request.user, node, data["person"], data["role"], reason=data["reason"],
            move_to=data["move_to"],
        )
    except ServiceError as error:
        return _people_refused(request, node, str(error))
    done = f" ({change.outcome})" if change.outcome else ""
    return _after_people_change(
        request, node, f"{change.person_name} is no longer a {change.role} of {node.name}{done}."
    )


@login_required
def people_search(request):
    """Suggestions for the add-person field: `<option>`s of a datalist, for managers."""
    found = people.search_people(request.user, request.GET.get("person", ""))
    return render(request, "budgets/_people_options.html", {"found": found})


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
        raise PermissionDenied(
            f"Only the managers and members of {node.path} may ask for more for it."
        )
    form = ChangeRequestForm(request.POST or None, initial={
        "cluster": request.GET.get("cluster"), "kind": request.GET.get("kind", "shares"),
    })
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                change_request = services.request_change(
                    request.user, node, data["cluster"], reason=data["reason"],
                    shares=data["shares"], percent=data["percent"], kind=data["kind"],
                    boost_until=data["boost_until"], child_name=data["child_name"],
                    child_slug=data["child_slug"],
                )
            except services.BudgetError as error:
                error.show_on(form)
            else:
                messages.success(request, f"Request #{change_request.pk} sent for approval.")
                return redirect("budgets:request", pk=change_request.pk)
        status = UNPROCESSABLE
    return render(request, "budgets/request_form.html", {"node": node, "form": form}, status=status)


REQUEST_RELATED = ("node", "node__parent", "cluster", "requested_by", "decided_by",
                   "deciding_node")


def _request_context(user, change_request, form=None, comment_form=None):
    return {
        "change_request": change_request,
        "effects": services.effect_of(change_request),
        "form": form if can_decide(user, change_request) else None,
        "can_pass_up": can_pass_up(user, change_request),
        "can_withdraw": change_request.requested_by_id == user.pk
        and change_request.state == ChangeRequest.State.PENDING,
        "entries": change_request.entries.all(),
        "comment_form": comment_form or CommentForm(),
    }


@login_required
@require_http_methods(["GET", "POST"])
def request_detail(request, pk):
    change_request = get_object_or_404(
        ChangeRequest.objects.restrict(request.user).select_related(*REQUEST_RELATED), pk=pk
    )
    form = DecisionForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if change_request.state != ChangeRequest.State.PENDING:
            return _decided_already(request, change_request)
        if not can_decide(request.user, change_request):
            raise PermissionDenied("You may not decide this request.")
        if form.is_valid():
            try:
                services.decide(
                    request.user, change_request,
                    approve=form.cleaned_data["decision"] == "approve",
                    comment=form.cleaned_data["comment"],
                )
            except services.StaleEdit:
                change_request.refresh_from_db()
                return _decided_already(request, change_request)
            except services.BudgetError as error:
                error.show_on(form)
            else:
                messages.success(request, f"Request #{change_request.pk} {change_request.state}.")
                return redirect("budgets:requests")
        status = UNPROCESSABLE
    return render(request, "budgets/request_detail.html",
                  _request_context(request.user, change_request, form), status=status)


def _decided_already(request, change_request):
    """The second decider: the first decision stands, said plainly (409 Conflict)."""
    context = _request_context(request.user, change_request)
    context["error"] = services.already_decided(change_request)
    return render(request, "budgets/request_detail.html", context, status=409)


@login_required
@require_POST
def request_comment(request, pk):
    """Add to the request's thread (htmx swaps #thread)."""
    change_request = get_object_or_404(
        ChangeRequest.objects.restrict(request.user).select_related(*REQUEST_RELATED), pk=pk
    )
    form = CommentForm(request.POST)
    status = 200
    if form.is_valid():
        try:
            services.comment_on(request.user, change_request, form.cleaned_data["text"])
        except services.BudgetError as error:
            form.add_error("text", str(error))
            status = UNPROCESSABLE
        else:
            form = CommentForm()
    else:
        status = UNPROCESSABLE
    if not request.htmx:
        if status != 200:
            messages.error(request, " ".join(form.errors.get("text", ["Write a comment."])))
        return redirect("budgets:request", pk=pk)
    context = _request_context(request.user, change_request, comment_form=form)
    return render(request, "budgets/_request_thread.html", context, status=status)


@login_required
@require_POST
def request_pass_up(request, pk):
    change_request = get_object_or_404(
        ChangeRequest.objects.restrict(request.user).select_related(*REQUEST_RELATED), pk=pk
    )
    if change_request.state != ChangeRequest.State.PENDING:
        return _decided_already(request, change_request)
    try:
        services.pass_up(request.user, change_request, comment=request.POST.get("comment", ""))
    except services.StaleEdit:
        change_request.refresh_from_db()
        return _decided_already(request, change_request)
    except services.BudgetError as error:
        messages.error(request, str(error))
        return redirect("budgets:request", pk=pk)
    messages.success(request, f"Request #{pk} passed up to the managers of "
                     f"{change_request.deciding_node.path}.")
    return redirect("budgets:requests")


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


def _require_reviews(user):
    if not can_follow_reviews(user):
        raise PermissionDenied("Budget reviews are followed by managers and reviewers.")


def _schedulable_organisations(user):
    return [root for root in BudgetNode.objects.filter(parent=None)
            if can_schedule_reviews(user, root)]


@login_required
@require_http_methods(["GET", "POST"])
def review_list(request):
    """The review cycles, their progress in the subtrees the user follows, and (for the
    managers of an organisation) a form to schedule the next one."""
    _require_reviews(request.user)
    organisations = _schedulable_organisations(request.user)
    form = ReviewCycleForm(
        request.POST or None,
        organisations=BudgetNode.objects.filter(pk__in=[o.pk for o in organisations]),
    ) if organisations else None
    status = 200
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("Only the managers of an organisation schedule its reviews.")
        if form.is_valid():
            data = form.cleaned_data
            try:
                cycle = reviews.schedule_cycle(
                    request.user, data["organisation"], name=data["name"],
                    opens_at=data["opens_at"], due_at=data["due_at"],
                    repeat_months=data["repeat_months"],
                )
            except services.BudgetError as error:
                error.show_on(form)
            else:
                messages.success(request, f"Review {cycle.name} scheduled.")
                return redirect("budgets:review", pk=cycle.pk)
        status = UNPROCESSABLE
    visible = ReviewItem.objects.restrict(request.user)
    cycles = list(ReviewCycle.objects.select_related("organisation"))
    progress = {cycle.pk: reviews.Progress() for cycle in cycles}
    for item in visible.filter(cycle__in=cycles).only("cycle_id", "decision", "flagged_at"):
        progress[item.cycle_id].add(item)
    for cycle in cycles:
        cycle.progress = progress[cycle.pk]
    return render(request, "budgets/reviews.html", {"cycles": cycles, "form": form},
                  status=status)


def _review_context(request, cycle, error=None):
    items = list(
        ReviewItem.objects.restrict(request.user).filter(cycle=cycle)
        .select_related("node__parent", "cluster", "cycle")
    )
    for item in items:
        item.can_review = can_review(request.user, item)
    mine = request.GET.get("mine") == "1"
    overall, groups = reviews.progress_by_decider(items)
    if mine:  # the children of the nodes the user manages, decided or not
        groups = [g for g in groups if can_edit_shares(request.user, g.items[0].node)]
    reviews.name_deciders(groups, cycle.organisation)
    return {"cycle": cycle, "overall": overall, "groups": groups, "mine": mine, "error": error}


@login_required
def review_detail(request, pk):
    """A cycle's progress: overall and per deciding node, each allocation confirmed, changed,
    pending or flagged; the user decides the items below the nodes they manage (htmx swaps
    ``#review-body``)."""
    _require_reviews(request.user)
    cycle = get_object_or_404(ReviewCycle.objects.select_related("organisation"), pk=pk)
    template = "budgets/_review_body.html" if request.htmx else "budgets/review_detail.html"
    return render(request, template, _review_context(request, cycle))


@login_required
@require_POST
def review_item_decide(request, pk):
    """Confirm an allocation under review, or change its shares."""
    _require_reviews(request.user)
    item = get_object_or_404(
        ReviewItem.objects.restrict(request.user).select_related("cycle", "node", "cluster"),
        pk=pk,
    )
    form = ReviewDecisionForm(request.POST)
    error, status = None, 200
    if form.is_valid():
        data = form.cleaned_data
        try:
            if data["decision"] == "confirm":
                reviews.confirm(request.user, item, comment=data["comment"])
            else:
                reviews.change(request.user, item, data["shares"], comment=data["comment"])
        except reviews.AlreadyReviewed as conflict:
            error, status = str(conflict), 409
        except services.BudgetError as refused:
            error, status = str(refused), UNPROCESSABLE
    else:
        error = " ".join(message for messages_ in form.errors.values() for message in messages_)
        status = UNPROCESSABLE
    if error:
        error = f"{item.node.name} on {item.cluster.name}: {error}"
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, f"{item.node.path} on {item.cluster.name}: {item.decision}.")
        return redirect("budgets:review", pk=item.cycle_id)
    return render(request, "budgets/_review_body.html",
                  _review_context(request, item.cycle, error=error), status=status)
