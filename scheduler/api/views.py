"""Workloads, clusters and hosts over HTTP, and the budget tree with its fair-share standing.
Who sees what comes from scheduler.permissions (the querysets the portal uses), every change
from scheduler.services (workloads) and fleet.services (hosts); errors become JSON in
common.api.exceptions."""

from django.db.models import Count, Prefetch, Q
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from budgets import services as budget_services
from budgets.api.permissions import HasRole
from budgets.models import BudgetNode
from budgets.permissions import can_edit_shares, can_request_change
from common.api.base import RejectNulMixin
from common.api.permissions import permission_for
from fleet import services as host_services
from fleet.api import CLUSTER, cluster_from
from fleet.models import Cluster, Host
from fleet.permissions import can_operate
from scheduler import services
from scheduler import status as fleet_status
from scheduler.api import serializers as s
from scheduler.engine import percent
from scheduler.filters import ACTIVE, CLASSES, FINISHED, SCOPES, WorkloadFilterSet
from scheduler.models import Claim, Run, RunGPU, Workload
from scheduler.permissions import can_cancel, restrict_workloads
from scheduler.status import current_standing, finite, sibling_ranks

IsOperator = permission_for(
    can_operate, "Only operators drain, repair and return hosts.", name="IsOperator"
)

# The choices the filter set declares, with "" (no filter) allowed as the filter set allows it.
WORKLOAD_FILTERS = [
    OpenApiParameter(
        "scope", str, enum=["", *(value for value, _ in SCOPES)],
        description="all: every workload you may see (default, also when empty); mine: "
        "yours; projects: charged to budgets you belong to or manage.",
    ),
    OpenApiParameter(
        "state", str, enum=["", ACTIVE, FINISHED, *Workload.State.values],
        description="active (pending, running, preempting), finished, or one state; empty: "
        "any.",
    ),
    OpenApiParameter(
        "class", str, enum=["", *(value for value, _ in CLASSES)],
        description="debug, small (fits one host), large (spans hosts) or unallocated "
        "(minimum runtime 0); empty: any.",
    ),
]


@extend_schema_view(
    list=extend_schema(
        summary="Workloads you may see, newest first", parameters=WORKLOAD_FILTERS,
        description="The same search, filters and sort as the portal's workload list "
        "(scheduler.filters).",
    ),
    retrieve=extend_schema(
        summary="A workload with its runs (hosts, GPU indices) and its timeline",
        responses=s.WorkloadDetailSerializer,
    ),
)
class WorkloadViewSet(
    RejectNulMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    serializer_class = s.WorkloadSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = WorkloadFilterSet

    def get_queryset(self):
        queryset = Workload.objects.select_related("owner", "budget", "cluster")
        if self.action != "list":
            queryset = queryset.prefetch_related(
                Prefetch("runs", queryset=Run.objects.prefetch_related(
                    Prefetch("assigned_gpus", queryset=RunGPU.objects.select_related("host"))
                )),
                "events",
                Prefetch("claims", queryset=Claim.objects.select_related("host")),
            )
        return restrict_workloads(queryset, self.request.user)

    def get_serializer_class(self):
        return s.WorkloadSerializer if self.action == "list" else s.WorkloadDetailSerializer

    def filter_queryset(self, queryset):
        """The list's search, filters and sort; a single workload is found by its id alone."""
        return super().filter_queryset(queryset) if self.action == "list" else queryset

    def _detail(self, workload, code=status.HTTP_200_OK) -> Response:
        workload.explanation = services.explain(workload)
        workload.can_cancel = workload.active and can_cancel(self.request.user, workload)
        return Response(s.WorkloadDetailSerializer(workload).data, status=code)

    def retrieve(self, request, *args, **kwargs):
        return self._detail(self.get_object())

    @extend_schema(
        summary="Submit a workload", request=s.SubmitSerializer,
        responses={201: s.WorkloadDetailSerializer},
    )
    def create(self, request, *args, **kwargs):
        form = s.SubmitSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        workload = services.submit(request.user, **form.validated_data)
        return self._detail(workload, status.HTTP_201_CREATED)  # as written: no read-back

    @extend_schema(
        summary="Cancel a pending or running workload", request=None,
        responses=s.WorkloadDetailSerializer,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        workload = self.get_object()
        services.cancel(request.user, workload)
        return self._detail(self.get_queryset().get(pk=workload.pk))


class ClusterViewSet(RejectNulMixin, viewsets.ReadOnlyModelViewSet):
    """Clusters with GPUs and hosts by state and the queue's length (anyone with a role)."""

    serializer_class = s.ClusterSerializer
    permission_classes = [IsAuthenticated, HasRole]
    lookup_field = "name"
    lookup_value_regex = r"[-\w]+"
    pagination_class = None

    def get_queryset(self):
        return Cluster.objects.with_gpu_count().order_by("name")

    def _annotate(self, clusters):
        gpus = fleet_status.gpu_states()
        hosts = fleet_status.host_states()
        pending = fleet_status.pending_by_budget()
        for cluster in clusters:
            cluster.gpu_states = gpus.get(cluster.pk, dict.fromkeys(fleet_status.GPU_STATES, 0))
            cluster.host_states = hosts.get(cluster.pk, dict.fromkeys(Host.State.values, 0))
            mine = [v for (c, _), v in pending.items() if c == cluster.pk]
            cluster.pending_workloads = sum(n for n, _ in mine)
            cluster.pending_gpus = sum(g for _, g in mine)
        return clusters

    def list(self, request, *args, **kwargs):
        clusters = self._annotate(list(self.get_queryset()))
        return Response(self.get_serializer(clusters, many=True).data)

    def retrieve(self, request, *args, **kwargs):
        cluster = self._annotate([self.get_object()])[0]
        return Response(self.get_serializer(cluster).data)


@extend_schema_view(
    list=extend_schema(
        summary="Hosts and their state (anyone with a role)",
        parameters=[
            OpenApiParameter("cluster", str, description="Cluster name."),
            OpenApiParameter("state", str, enum=["", *Host.State.values],
                             description="Empty: any."),
        ],
    ),
    retrieve=extend_schema(
        summary="A host: state, who holds its GPUs, its maintenance history",
        responses=s.HostDetailSerializer,
    ),
)
class HostViewSet(RejectNulMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = s.HostSerializer
    permission_classes = [IsAuthenticated, HasRole]

    def get_queryset(self):
        return Host.objects.select_related("cluster").annotate(
            busy_gpus=Count("assigned_gpus", filter=Q(assigned_gpus__held=True))
        ).order_by("cluster__name", "name")

    def get_serializer_class(self):
        return s.HostSerializer if self.action == "list" else s.HostDetailSerializer

    def filter_queryset(self, queryset):
        if self.action != "list":
            return queryset
        params = self.request.query_params
        if name := params.get("cluster"):
            if not Cluster.objects.filter(name=name).exists():
                raise ValidationError({"cluster": [f"No cluster named {name!r}."]})
            queryset = queryset.filter(cluster__name=name)
        if state := params.get("state"):
            if state not in Host.State.values:
                choices = ", ".join(Host.State.values)
                raise ValidationError({"state": [f"Unknown host state; one of {choices}."]})
            queryset = queryset.filter(state=state)
        return queryset

    def _act(self, request, pk, act, **extra):
        form = s.HostActionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        host = self.get_object()
        act(request.user, host, form.validated_data.get("reason", ""))
        return Response(s.HostDetailSerializer(self.get_queryset().get(pk=host.pk),
                                            context={"request": request}).data)

    @extend_schema(
        summary="Drain a host (operators): no new work; its runs leave by the contract",
        request=s.HostActionSerializer, responses=s.HostDetailSerializer,
    )
    @action(detail=True, methods=["post"], permission_classes=[IsAuthenticated, IsOperator])
    def drain(self, request, pk=None):
        return self._act(request, pk, host_services.drain)

    @extend_schema(
        summary="Return a draining or drained host to service (operators)",
        request=s.HostActionSerializer, responses=s.HostDetailSerializer,
    )
    @action(
        detail=True, methods=["post"], url_path="return", url_name="return",
        permission_classes=[IsAuthenticated, IsOperator],
    )
    def return_to_service(self, request, pk=None):
        return self._act(request, pk, host_services.return_to_service)

    @extend_schema(
        summary="Mark an escalated or down host repaired by hand (operators)",
        request=s.HostActionSerializer, responses=s.HostDetailSerializer,
    )
    @action(detail=True, methods=["post"], permission_classes=[IsAuthenticated, IsOperator])
    def repair(self, request, pk=None):
        return self._act(request, pk, host_services.repair)


# ---------------------------------------------------------------------------------------------
# The budget tree with its fair-share standing (/api/budgets/, beside the budgets' own endpoints)

HOUR = 3600.0


def tree(user, cluster, now=None) -> dict:
    """The tree page's rows (budgets.services.tree_rows) with the scheduler's standing.

    Shares are public inside the organisation; usage is not: usage, ratio and rank are
    given only for the budgets whose figures the web report shows the user (the nodes they
    may read the history of), and are null elsewhere."""
    now = now or timezone.now()
    standing = current_standing(cluster, now)
    ranks = sibling_ranks(standing)
    figures_of = set(BudgetNode.objects.restrict(user, "history").values_list("path", flat=True))
    nodes = []
    for row in budget_services.tree_rows(cluster):
        node = row.node
        shown = node.path in figures_of
        rank, siblings = ranks.get(node.path, (None, None)) if shown else (None, None)
        ratio = standing.ratio(node.path) if shown else None
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
            "usage_gpu_hours": standing.usage.get(node.path, 0.0) / HOUR if shown else None,
            "entitlement_gpu_hours": row.fraction * standing.capacity / HOUR,
            "ratio": finite(ratio) if shown else None,
            "ratio_label": percent(ratio) if shown else "",
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
