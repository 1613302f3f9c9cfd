"""Budgets and change requests over HTTP (the tree with its fair-share standing is the
scheduler's, usage figures the reports'). Who may read or change what comes
from budgets.permissions (the portal's rules), every change from budgets.services."""


from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from budgets import people, reviews, services
from budgets.api import serializers as s
from budgets.api.permissions import FollowsReviews, HasRole
from budgets.models import BudgetNode, ChangeRequest, MembershipChange, ReviewCycle, ReviewItem
from budgets.permissions import can_decide, can_manage_people, can_pass_up, can_review
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


@extend_schema_view(
    list=extend_schema(summary="Review cycles, with their progress in the budgets you follow"),
    retrieve=extend_schema(summary="A review cycle and its progress"),
)
class ReviewCycleViewSet(RejectNulMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                         viewsets.GenericViewSet):
    serializer_class = s.ReviewCycleSerializer
    permission_classes = [IsAuthenticated, FollowsReviews]

    def get_queryset(self):
        return ReviewCycle.objects.select_related("organisation")

    def _with_progress(self, cycles):
        progress = {cycle.pk: reviews.Progress() for cycle in cycles}
        for item in ReviewItem.objects.restrict(self.request.user).filter(
            cycle__in=cycles
        ).only("cycle_id", "decision", "flagged_at"):
            progress[item.cycle_id].add(item)
        for cycle in cycles:
            cycle.progress = progress[cycle.pk]
        return cycles

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(
            s.ReviewCycleSerializer(self._with_progress(list(page)), many=True).data
        )

    def retrieve(self, request, *args, **kwargs):
        [cycle] = self._with_progress([self.get_object()])
        return Response(s.ReviewCycleSerializer(cycle).data)

    @extend_schema(summary="Schedule a review cycle (the organisation's managers)",
                   request=s.ReviewCycleCreateSerializer, responses={201: s.ReviewCycleSerializer})
    def create(self, request, *args, **kwargs):
        form = s.ReviewCycleCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        cycle = reviews.schedule_cycle(
            request.user, data["organisation"], name=data["name"], opens_at=data["opens_at"],
            due_at=data["due_at"], repeat_months=data["repeat_months"],
        )
        [cycle] = self._with_progress([self.get_queryset().get(pk=cycle.pk)])
        return Response(s.ReviewCycleSerializer(cycle).data, status=201)


@extend_schema_view(
    list=extend_schema(
        summary="The allocations under review in the budgets you manage or review",
        parameters=[
            OpenApiParameter("cycle", int, description="Only this cycle's items."),
            OpenApiParameter("to_decide", bool, description="Only those you may decide now."),
        ],
    ),
    retrieve=extend_schema(summary="One allocation under review"),
)
class ReviewItemViewSet(RejectNulMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                        viewsets.GenericViewSet):
    serializer_class = s.ReviewItemSerializer
    permission_classes = [IsAuthenticated, FollowsReviews]

    def get_queryset(self):
        return ReviewItem.objects.restrict(self.request.user).select_related(
            "cycle", "node", "cluster"
        )

    def filter_queryset(self, queryset):
        if self.action != "list":
            return queryset
        params = self.request.query_params
        if (cycle := params.get("cycle")) is not None:
            if not cycle.isdigit():
                raise ValidationError({"cycle": ["A cycle id (a whole number)."]})
            queryset = queryset.filter(cycle_id=int(cycle))
        to_decide = params.get("to_decide", "false").lower()
        if to_decide not in ("true", "false", "1", "0"):
            raise ValidationError({"to_decide": ["Must be true or false."]})
        if to_decide in ("true", "1"):
            queryset = queryset.filter(decision=ReviewItem.Decision.PENDING)
            queryset = [item for item in queryset if can_review(self.request.user, item)]
        return queryset

    def _marked(self, items):
        for item in items:
            item.can_decide = can_review(self.request.user, item)
        return items

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(
            s.ReviewItemSerializer(self._marked(list(page)), many=True).data
        )

    def _detail(self, item):
        [item] = self._marked([self.get_queryset().get(pk=item.pk)])
        return Response(s.ReviewItemSerializer(item).data)

    def retrieve(self, request, *args, **kwargs):
        return self._detail(self.get_object())

    @extend_schema(summary="Confirm the allocation as it is (the managers above it)",
                   request=s.ReviewConfirmSerializer, responses=s.ReviewItemSerializer)
    @action(detail=True, methods=["post"])
    def confirm(self, request, pk=None):
        item = self.get_object()
        form = s.ReviewConfirmSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        reviews.confirm(request.user, item, comment=form.validated_data["comment"])
        return self._detail(item)

    @extend_schema(summary="Give the allocation other shares, at once (the managers above it)",
                   request=s.ReviewChangeSerializer, responses=s.ReviewItemSerializer)
    @action(detail=True, methods=["post"])
    def change(self, request, pk=None):
        item = self.get_object()
        form = s.ReviewChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        reviews.change(request.user, item, form.validated_data["shares"],
                       comment=form.validated_data["comment"])
        return self._detail(item)
