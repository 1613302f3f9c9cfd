"""The budget tree, change requests and usage over HTTP. Who may read or change what comes
from budgets.permissions (the portal's rules), every change from budgets.services."""

from datetime import date

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from budgets import services
from budgets.api import serializers as s
from budgets.models import BudgetNode, ChangeRequest
from budgets.permissions import can_decide, can_edit_shares, can_request_change
from fleet.models import Cluster
from portal.api.base import RejectNulMixin
from portal.api.exceptions import Conflict
from portal.api.permissions import HasRole
from reports import metrics
from reports.forms import PERIODS, PeriodForm
from reports.permissions import require_budget_rows
from scheduler.engine import percent
from scheduler.status import current_standing, finite, sibling_ranks

HOUR = 3600.0
EARLIEST, LATEST = date(2000, 1, 1), date(2999, 12, 31)
CLUSTER = OpenApiParameter(
    "cluster", str,
    description="Cluster name (default: the first cluster created, as in the portal).",
)


def cluster_from(request) -> Cluster:
    name = request.query_params.get("cluster")
    clusters = Cluster.objects.with_gpu_count().order_by("pk")
    if name:
        cluster = clusters.filter(name=name).first()
        if cluster is None:
            raise ValidationError({"cluster": [f"No cluster named {name!r}."]})
        return cluster
    cluster = clusters.first()
    if cluster is None:
        raise ValidationError({"cluster": ["There is no cluster yet."]})
    return cluster


def tree(user, cluster, now=None) -> dict:
    """The tree page's rows (budgets.services.tree_rows) with the scheduler's standing."""
    now = now or timezone.now()
    standing = current_standing(cluster, now)
    ranks = sibling_ranks(standing)
    nodes = []
    for row in services.tree_rows(cluster):
        node = row.node
        rank, siblings = ranks.get(node.path, (None, None))
        ratio = standing.ratio(node.path)
        nodes.append({
            "id": node.pk,
            "path": node.path,
            "name": node.name,
            "kind": node.kind,
            "parent": node.parent_id,
            "depth": row.depth,
            "managers": sorted(m.username for m in node.managers.all()),
            "shares": row.shares,
            "version": row.allocation.version if row.allocation else None,
            "percent_of_parent": row.percent_of_parent,
            "percent_of_cluster": row.percent_of_cluster,
            "gpu_hours_per_week": row.gpu_hours_per_week,
            "usage_gpu_hours": standing.usage.get(node.path, 0.0) / HOUR,
            "entitlement_gpu_hours": row.fraction * standing.capacity / HOUR,
            "ratio": finite(ratio),
            "ratio_label": percent(ratio),
            "rank": rank,
            "siblings": siblings,
            "can_set_shares": can_edit_shares(user, node),
            "can_request_change": can_request_change(user, node),
        })
    return {
        "cluster": cluster.name,
        "gpus": cluster.gpu_count,
        "window": cluster.window,
        "capacity_gpu_hours": standing.capacity / HOUR,
        "as_of": now,
        "nodes": nodes,
    }


class BudgetTreeView(RejectNulMixin, APIView):
    """Budgets are public inside the organisation: anyone with a role reads the whole tree."""

    permission_classes = [IsAuthenticated, HasRole]

    @extend_schema(
        summary="The budget tree on one cluster: shares, fractions, usage, ratio and rank",
        parameters=[CLUSTER], responses=s.TreeSerializer, operation_id="budgets_tree",
    )
    def get(self, request):
        return Response(s.TreeSerializer(tree(request.user, cluster_from(request))).data)


@extend_schema_view(
    retrieve=extend_schema(summary="A budget with its allocations on every cluster")
)
class BudgetViewSet(RejectNulMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = s.BudgetNodeSerializer
    permission_classes = [IsAuthenticated, HasRole]

    def get_queryset(self):
        return BudgetNode.objects.restrict(self.request.user).select_related(
            "parent"
        ).prefetch_related("managers", "children")

    @extend_schema(
        summary="Set the shares of a budget below one you manage (effective at once)",
        request=s.SetSharesSerializer, responses=s.BudgetNodeSerializer,
    )
    @action(detail=True, methods=["post"])
    def shares(self, request, pk=None):
        node = self.get_object()
        form = s.SetSharesSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        services.set_shares(
            request.user, node, data["cluster"], data["shares"], reason=data["reason"],
            expected_version=data.get("version"),
        )
        return Response(self.get_serializer(self.get_queryset().get(pk=node.pk)).data)


REQUEST_FILTERS = [
    OpenApiParameter("state", str, enum=["", *ChangeRequest.State.values],
                     description="Empty: any."),
    OpenApiParameter("cluster", str, description="Cluster name."),
    OpenApiParameter(
        "to_decide", bool, description="Only pending requests you may approve or reject."
    ),
]


@extend_schema_view(
    list=extend_schema(summary="Change requests you may see", parameters=REQUEST_FILTERS),
    retrieve=extend_schema(
        summary="A change request with its effect on the siblings' % of the cluster",
        responses=s.ChangeRequestDetailSerializer,
    ),
)
class ChangeRequestViewSet(
    RejectNulMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Requesters see their own requests, managers those in their subtree."""

    serializer_class = s.ChangeRequestSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return ChangeRequest.objects.none()
        return ChangeRequest.objects.restrict(self.request.user).select_related(
            "node", "node__parent", "cluster", "requested_by", "decided_by"
        )

    def filter_queryset(self, queryset):
        if self.action != "list":
            return queryset
        params = self.request.query_params
        if state := params.get("state"):
            if state not in ChangeRequest.State.values:
                raise ValidationError({"state": [
                    f"Unknown state; one of {', '.join(ChangeRequest.State.values)}."
                ]})
            queryset = queryset.filter(state=state)
        if name := params.get("cluster"):
            if not Cluster.objects.filter(name=name).exists():
                raise ValidationError({"cluster": [f"No cluster named {name!r}."]})
            queryset = queryset.filter(cluster__name=name)
        to_decide = params.get("to_decide", "false").lower()
        if to_decide not in ("true", "false", "1", "0"):
            raise ValidationError({"to_decide": ["Must be true or false."]})
        if to_decide in ("true", "1"):
            decidable = ChangeRequest.objects.restrict(self.request.user, "decide")
            queryset = queryset.filter(pk__in=decidable.values("pk"))
        return queryset

    def _mark(self, change_request):
        user = self.request.user
        change_request.can_decide = can_decide(user, change_request)
        change_request.can_withdraw = (
            change_request.requested_by_id == user.pk
            and change_request.state == ChangeRequest.State.PENDING
        )
        return change_request

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        data = s.ChangeRequestSerializer([self._mark(r) for r in page], many=True).data
        return self.get_paginated_response(data)

    def _detail(self, change_request, code=200):
        change_request = self._mark(self.get_queryset().get(pk=change_request.pk))
        change_request.effects = [
            {"budget": e.node.path, "before": e.before, "after": e.after}
            for e in services.effect_of(change_request)
        ]
        return Response(s.ChangeRequestDetailSerializer(change_request).data, status=code)

    def retrieve(self, request, *args, **kwargs):
        return self._detail(self.get_object())

    @extend_schema(
        summary="Ask for a different share of a budget you manage",
        request=s.ChangeRequestCreateSerializer,
        responses={201: s.ChangeRequestDetailSerializer},
    )
    def create(self, request, *args, **kwargs):
        form = s.ChangeRequestCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        data = form.validated_data
        change_request = services.request_change(
            request.user, data["node"], data["cluster"], reason=data["reason"],
            shares=data.get("shares"), percent=data.get("percent"),
        )
        return self._detail(change_request, 201)

    def _pending(self):
        change_request = self.get_object()
        if change_request.state != ChangeRequest.State.PENDING:
            raise Conflict(f"This request was already {change_request.state}.")
        return change_request

    def _decide(self, request, approve: bool):
        change_request = self._pending()
        form = s.DecisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        services.decide(
            request.user, change_request, approve=approve, comment=form.validated_data["comment"]
        )
        return self._detail(change_request)

    @extend_schema(
        summary="Approve (the parent's managers): the shares change at once",
        request=s.DecisionSerializer, responses=s.ChangeRequestDetailSerializer,
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        return self._decide(request, approve=True)

    @extend_schema(
        summary="Reject (the parent's managers), with a comment",
        request=s.DecisionSerializer, responses=s.ChangeRequestDetailSerializer,
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        return self._decide(request, approve=False)

    @extend_schema(
        summary="Withdraw your own pending request", request=None,
        responses=s.ChangeRequestDetailSerializer,
    )
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        change_request = self.get_object()
        try:
            services.withdraw(request.user, change_request)
        except services.BudgetError as error:  # no longer pending
            raise Conflict(str(error)) from None
        return self._detail(change_request)


class UsageView(RejectNulMixin, APIView):
    """Usage per budget node over a period: the review report's figures (reports.metrics)."""

    @extend_schema(
        summary="Usage per budget and period (the review report's figures)",
        parameters=[
            CLUSTER,
            OpenApiParameter("period", str, enum=["", *(value for value, _ in PERIODS)],
                             description="Default (also when empty): month."),
            OpenApiParameter("date", str, description="A day in the period (YYYY-MM-DD); "
                             "default today."),
            OpenApiParameter("start", str, description="First day of a custom period."),
            OpenApiParameter("end", str, description="Last day of a custom period."),
            OpenApiParameter("node", int, description="Only this budget's subtree."),
        ],
        responses=s.UsageSerializer,
    )
    def get(self, request):
        visible = require_budget_rows(request.user)
        cluster = cluster_from(request)
        params = {k: request.query_params[k] for k in ("period", "date", "start", "end")
                  if k in request.query_params}
        form = PeriodForm(params)
        if not form.is_valid():
            raise ValidationError({
                "period" if field == "__all__" else field: list(errors)
                for field, errors in form.errors.items()
            })
        for day in (form.cleaned_data.get(k) for k in ("date", "start", "end")):
            if day and not EARLIEST <= day <= LATEST:
                raise ValidationError({"period": [
                    f"Dates from {EARLIEST} to {LATEST} only."
                ]})
        start, end, period = form.bounds()
        tree = metrics.Tree()
        top = None
        if "node" in request.query_params:
            raw = request.query_params["node"]
            top = tree.by_pk.get(int(raw)) if raw.isdigit() else None
            if top is None or top.pk not in visible:
                raise ValidationError({"node": ["No such budget, or one you may not see."]})
        report = metrics.budget_report(cluster, start, end, tree=tree)
        definitions = dict(metrics.DEFINITIONS)
        rows = [
            {
                "id": row.node.pk,
                "path": row.node.path,
                "name": row.node.name,
                "depth": row.depth,
                "leaf": row.leaf,
                "shares": row.shares,
                "percent_of_cluster": 100 * row.fraction,
                "entitlement_gpu_hours": row.entitlement_h,
                "delivered_gpu_hours": row.delivered_h,
                "unallocated_gpu_hours": row.unallocated_h,
                "demand_gpu_hours": row.demand_h,
                "attainment": row.attainment,
                "wait_median_seconds": row.wait_median,
                "wait_p95_seconds": row.wait_p95,
                "starts": len(row.waits),
                "preemptions": row.preemptions,
                "lost_gpu_hours": row.lost_h,
            }
            for row in report.rows
            if row.node.pk in visible and (
                top is None or row.node.path == top.path
                or row.node.path.startswith(top.path + "/")
            )
        ]
        body = {
            "cluster": cluster.name,
            "period": period,
            "start": report.start,
            "end": report.end,
            "until": report.until,
            "capacity_gpu_hours": report.capacity_h,
            "definitions": definitions,
            "rows": rows,
        }
        return Response(s.UsageSerializer(body).data)


