"""Budgets and change requests over HTTP (the tree with its fair-share standing is the
scheduler's, usage figures the reports'). Who may read or change what comes
from budgets.permissions (the portal's rules), every change from budgets.services."""


from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from budgets import people, services
from budgets.api import serializers as s
from budgets.api.permissions import HasRole
from budgets.models import BudgetNode, ChangeRequest, MembershipChange
from budgets.permissions import can_decide, can_manage_people, can_pass_up
from common.api.base import RejectNulMixin
from common.api.exceptions import Conflict
from fleet.models import Cluster


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
        summary="Set the shares of a budget below one you manage (at once, or from a date; "
        "optionally until an expiry)",
        request=s.SetSharesSerializer, responses=s.BudgetNodeSerializer,
    )
    @action(detail=True, methods=["post"])
    def shares(self, request, pk=None):
        node = self.get_object()
        form = s.SetSharesSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        if data["effective_at"] is not None:
            services.schedule_shares(
                request.user, node, data["cluster"], data["shares"], data["effective_at"],
                reason=data["reason"], expires_at=data["expires_at"],
            )
        else:
            services.set_shares(
                request.user, node, data["cluster"], data["shares"], reason=data["reason"],
                expected_version=data.get("version"), expires_at=data["expires_at"],
            )
        return Response(self.get_serializer(self.get_queryset().get(pk=node.pk)).data)

    def _people(self, node, code=200):
        user = self.request.user
        readable = BudgetNode.objects.restrict(user, "history").filter(pk=node.pk).exists()
        changes = MembershipChange.objects.filter(node=node) if readable else []
        body = {
            "node": node.path,
            **{f"{role}s": people.people_of(node, role).order_by("username")
               for role in MembershipChange.Role.values},
            "can_manage": can_manage_people(user, node),
            "changes": changes[:PEOPLE_LOG_ROWS],
        }
        return Response(s.PeopleSerializer(body).data, status=code)

    @extend_schema(summary="The managers, members and reviewers of a budget",
                   responses=s.PeopleSerializer)
    @extend_schema(
        methods=["POST"], request=s.PersonChangeSerializer, responses={201: s.PeopleSerializer},
        summary="Give someone a role on a budget at or below one you manage",
    )
    @action(detail=True, methods=["get", "post"], url_path="people")
    def people_of_budget(self, request, pk=None):
        node = self.get_object()
        if request.method == "GET":
            return self._people(node)
        form = s.PersonChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        people.add_person(request.user, node, data["person"], data["role"],
                          reason=data["reason"])
        return self._people(node, 201)

    @extend_schema(
        summary="Take a role away; a leaving member's pending work is cancelled or moved",
        request=s.PersonRemovalSerializer, responses=s.PeopleSerializer,
    )
    @action(detail=True, methods=["post"], url_path="people/remove")
    def remove_person(self, request, pk=None):
        node = self.get_object()
        form = s.PersonRemovalSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        people.remove_person(request.user, node, data["person"], data["role"],
                             reason=data["reason"], move_to=data["move_to"])
        return self._people(node)


PEOPLE_LOG_ROWS = 50


@extend_schema(
    summary="Find people by username, email or name (for managers choosing whom to add)",
    parameters=[OpenApiParameter("q", str, description="At least 2 characters.")],
    responses=s.PersonSerializer(many=True),
)
@api_view(["GET"])
@permission_classes([IsAuthenticated, HasRole])
def people_search(request):
    return Response(
        s.PersonSerializer(people.search_people(request.user, request.GET.get("q", "")),
                           many=True).data
    )


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
            "node", "node__parent", "cluster", "requested_by", "decided_by", "deciding_node"
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
        change_request.can_pass_up = can_pass_up(user, change_request)
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
        summary="Ask for more for a budget you manage or belong to: shares, a boost, a child",
        request=s.ChangeRequestCreateSerializer,
        responses={201: s.ChangeRequestDetailSerializer},
    )
    def create(self, request, *args, **kwargs):
        form = s.ChangeRequestCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        data = form.validated_data
        change_request = services.request_change(
            request.user, data["node"], data["cluster"], reason=data["reason"],
            shares=data.get("shares"), percent=data.get("percent"), kind=data["kind"],
            boost_until=data["boost_until"], child_name=data["child_name"],
            child_slug=data["child_slug"],
        )
        return self._detail(change_request, 201)

    def _pending(self):
        change_request = self.get_object()
        if change_request.state != ChangeRequest.State.PENDING:
            raise Conflict(services.already_decided(change_request))
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
        summary="Comment on a request you see", request=s.CommentSerializer,
        responses={201: s.ChangeRequestDetailSerializer},
    )
    @action(detail=True, methods=["post"])
    def comment(self, request, pk=None):
        change_request = self.get_object()
        form = s.CommentSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        services.comment_on(request.user, change_request, form.validated_data["text"])
        return self._detail(change_request, 201)

    @extend_schema(
        summary="Pass the request up to the managers one level above (deciders)",
        request=s.PassUpSerializer, responses=s.ChangeRequestDetailSerializer,
    )
    @action(detail=True, methods=["post"], url_path="pass-up")
    def pass_up(self, request, pk=None):
        change_request = self._pending()
        form = s.PassUpSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        services.pass_up(request.user, change_request, comment=form.validated_data["comment"])
        return self._detail(change_request)

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
