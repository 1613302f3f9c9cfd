"""Budgets and change requests as JSON. Writing serializers only check
types and ranges; budgets.services decides and writes."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from budgets.models import (
    MAX_SHARES,
    BudgetNode,
    ChangeRequest,
    MembershipChange,
    RequestEntry,
    ReviewCycle,
    ReviewItem,
    ScheduledShareChange,
)
from fleet.models import Cluster


class AllocationSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    shares = serializers.IntegerField()
    version = serializers.IntegerField()
    updated = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)


class ScheduledChangeSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="cluster.name")
    shares = serializers.IntegerField()
    effective_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()


class BudgetNodeSerializer(serializers.ModelSerializer):
    parent = serializers.CharField(
        source="parent.path", default=None, allow_null=True, read_only=True
    )
    managers = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    children = serializers.SerializerMethodField()
    allocations = serializers.SerializerMethodField()
    scheduled_changes = serializers.SerializerMethodField()

    class Meta:
        model = BudgetNode
        fields = [
            "id", "path", "name", "slug", "kind", "description", "parent", "managers",
            "children", "allocations", "scheduled_changes",
        ]
        read_only_fields = fields

    @extend_schema_field(ScheduledChangeSerializer(many=True))
    def get_scheduled_changes(self, node):
        """Share changes waiting for their effective date."""
        pending = ScheduledShareChange.objects.filter(node=node, applied_at=None)
        return ScheduledChangeSerializer(pending.select_related("cluster"), many=True).data

    def get_children(self, node) -> list[str]:
        return [child.path for child in node.children.all()]

    @extend_schema_field(AllocationSerializer(many=True))
    def get_allocations(self, node):
        return [
            {"cluster": a.cluster.name, "shares": a.shares, "version": a.version,
             "updated": a.updated, "expires_at": a.expires_at}
            for a in node.allocations.select_related("cluster").order_by("cluster__name")
        ]


class SetSharesSerializer(serializers.Serializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    shares = serializers.IntegerField(min_value=1, max_value=MAX_SHARES)
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    version = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, allow_null=True,
        help_text="The allocation version you read; if it changed since, 409.",
    )
    effective_at = serializers.DateTimeField(
        required=False, allow_null=True, default=None,
        help_text="In the future: the shares change then (a beat task applies it). "
        "Empty: at once.",
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, default=None,
        help_text="The allocation expires then: its share returns to its siblings.",
    )


class EffectSerializer(serializers.Serializer):
    budget = serializers.CharField()
    before = serializers.FloatField(help_text="% of cluster now")
    after = serializers.FloatField(help_text="% of cluster if approved")


class ChangeRequestSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.path", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    decided_by = serializers.CharField(
        source="decided_by.username", default=None, allow_null=True, read_only=True
    )
    deciding_node = serializers.CharField(
        source="deciding_node.path", read_only=True,
        help_text="Whose managers decide now (one level up each time it is passed up).",
    )
    can_decide = serializers.BooleanField(read_only=True)
    can_pass_up = serializers.BooleanField(read_only=True)
    can_withdraw = serializers.BooleanField(read_only=True)

    class Meta:
        model = ChangeRequest
        fields = [
            "id", "kind", "node", "cluster", "requested_by", "deciding_node", "shares_before",
            "requested_shares", "requested_percent", "boost_until", "child_name", "child_slug",
            "reason", "state", "created", "decided_by", "decided_at", "decision_comment",
            "can_decide", "can_pass_up", "can_withdraw",
        ]
        read_only_fields = fields


class RequestEntrySerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author_name", read_only=True)

    class Meta:
        model = RequestEntry
        fields = ["at", "kind", "author", "text"]
        read_only_fields = fields


class ChangeRequestDetailSerializer(ChangeRequestSerializer):
    effects = EffectSerializer(many=True, read_only=True)
    entries = RequestEntrySerializer(
        many=True, read_only=True, help_text="Its states and comments, oldest first."
    )

    class Meta(ChangeRequestSerializer.Meta):
        fields = [*ChangeRequestSerializer.Meta.fields, "effects", "entries"]
        read_only_fields = fields


class CommentSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=5000)


class PassUpSerializer(serializers.Serializer):
    comment = serializers.CharField(max_length=5000, required=False, allow_blank=True,
                                    default="")


class ChangeRequestCreateSerializer(serializers.Serializer):
    """Ask for more for a budget you manage or belong to. `shares` (default kind): either
    `shares` or `percent` (of the parent, the siblings' shares unchanged), decided by the
    parent's managers; `boost`: the same plus `boost_until`, after which the shares go back;
    `child`: a new child budget `child_name` / `child_slug` with `shares`, decided by the
    budget's own managers."""

    kind = serializers.ChoiceField(choices=ChangeRequest.Kind.choices, default="shares")
    boost_until = serializers.DateTimeField(required=False, allow_null=True, default=None)
    child_name = serializers.CharField(max_length=100, required=False, allow_blank=True,
                                       default="")
    child_slug = serializers.CharField(max_length=50, required=False, allow_blank=True,
                                       default="")

    node = serializers.SlugRelatedField(
        slug_field="path", queryset=BudgetNode.objects.all(), help_text="Budget path."
    )
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    shares = serializers.IntegerField(
        min_value=1, max_value=MAX_SHARES, required=False, allow_null=True
    )
    percent = serializers.DecimalField(
        max_digits=5, decimal_places=2, min_value=0, max_value=100, required=False,
        allow_null=True, coerce_to_string=False,
    )
    reason = serializers.CharField(max_length=5000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            self.fields["node"].queryset = BudgetNode.objects.restrict(request.user)


class DecisionSerializer(serializers.Serializer):
    comment = serializers.CharField(
        max_length=5000, required=False, allow_blank=True, default="",
        help_text="Required to reject.",
    )


class PersonSerializer(serializers.Serializer):
    username = serializers.CharField()
    name = serializers.CharField(source="get_full_name")
    email = serializers.CharField()


class MembershipChangeSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.path", read_only=True)
    person = serializers.CharField(source="person_name", read_only=True)
    changed_by = serializers.CharField(source="changed_by_name", read_only=True)

    class Meta:
        model = MembershipChange
        fields = ["at", "node", "person", "role", "action", "changed_by", "reason", "outcome"]
        read_only_fields = fields


class PeopleSerializer(serializers.Serializer):
    node = serializers.CharField()
    managers = PersonSerializer(many=True)
    members = PersonSerializer(many=True)
    reviewers = PersonSerializer(many=True)
    can_manage = serializers.BooleanField(help_text="You may add and remove people here.")
    changes = MembershipChangeSerializer(
        many=True, help_text="The latest changes, newest first (if you may read its history)."
    )


class PersonChangeSerializer(serializers.Serializer):
    person = serializers.CharField(max_length=254, help_text="Username or email.")
    role = serializers.ChoiceField(choices=MembershipChange.Role.choices, default="member")
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class PersonRemovalSerializer(PersonChangeSerializer):
    move_to = serializers.SlugRelatedField(
        slug_field="path", queryset=BudgetNode.objects.all(), required=False, allow_null=True,
        default=None,
        help_text="A leaving member's pending work moves to this leaf (a budget path you "
        "manage); without it, it is cancelled.",
    )


class ReviewProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    confirmed = serializers.IntegerField()
    changed = serializers.IntegerField()
    pending = serializers.IntegerField()
    flagged = serializers.IntegerField()


class ReviewCycleSerializer(serializers.ModelSerializer):
    organisation = serializers.CharField(source="organisation.path", read_only=True)
    progress = ReviewProgressSerializer(
        read_only=True, help_text="Over the allocations in the budgets you manage or review."
    )

    class Meta:
        model = ReviewCycle
        fields = ["id", "organisation", "name", "opens_at", "due_at", "repeat_months", "state",
                  "progress"]
        read_only_fields = fields


class ReviewCycleCreateSerializer(serializers.Serializer):
    """Schedule a review of an organisation (its managers only); one whose opening has come
    opens at once."""

    organisation = serializers.SlugRelatedField(
        slug_field="path", queryset=BudgetNode.objects.filter(parent=None),
        help_text="The organisation's path (a root of the budget tree).",
    )
    name = serializers.CharField(max_length=100)
    opens_at = serializers.DateTimeField()
    due_at = serializers.DateTimeField()
    repeat_months = serializers.IntegerField(min_value=1, max_value=24, required=False,
                                             allow_null=True, default=None)


class ReviewItemSerializer(serializers.ModelSerializer):
    cycle = serializers.IntegerField(source="cycle_id", read_only=True)
    budget = serializers.CharField(source="node.path", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    flagged = serializers.SerializerMethodField()
    can_decide = serializers.BooleanField(read_only=True)

    class Meta:
        model = ReviewItem
        fields = ["id", "cycle", "budget", "cluster", "shares", "decision", "new_shares",
                  "comment", "decided_by_name", "decided_at", "flagged", "can_decide"]
        read_only_fields = fields

    def get_flagged(self, item) -> bool:
        """Still pending at the deadline: flagged to the managers above its deciders."""
        return item.flagged_at is not None and item.decision == ReviewItem.Decision.PENDING


class ReviewConfirmSerializer(serializers.Serializer):
    comment = serializers.CharField(max_length=2000, required=False, allow_blank=True,
                                    default="")


class ReviewChangeSerializer(ReviewConfirmSerializer):
    shares = serializers.IntegerField(min_value=1, max_value=MAX_SHARES)
