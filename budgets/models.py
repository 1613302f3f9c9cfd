from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import IntegrityError, models
from django.db.models import F, Q
from django.utils import timezone

from budgets.paths import PATH_SEPARATOR
from budgets.permissions import restrict_nodes, restrict_requests, restrict_review_items
from fleet.models import Cluster

MAX_SHARES = 1_000_000


class BudgetNodeQuerySet(models.QuerySet):
    def restrict(self, user, action="view"):
        return restrict_nodes(self, user, action)

    def subtree(self, path: str):
        return self.filter(Q(path=path) | Q(path__startswith=path + PATH_SEPARATOR))


class BudgetNode(models.Model):
    """One node of the budget tree: the organisation, a program, a project or a researcher."""

    class Kind(models.TextChoices):
        ORGANISATION = "organisation"
        PROGRAM = "program"
        PROJECT = "project"
        RESEARCHER = "researcher"

    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=50)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    # Slugs from the root down, e.g. "institute/prog-a/proj-a1": subtree queries are prefix
    # matches and the engine names budgets by this path.
    path = models.CharField(max_length=500, unique=True, editable=False)
    description = models.CharField(max_length=200, blank=True)
    managers = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="managed_budgets"
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="member_budgets",
        help_text="Users who may charge workloads to this budget (leaves only).",
    )
    reviewers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="reviewed_budgets",
        help_text="Users who read the reports and history of this subtree, and change nothing.",
    )

    objects = BudgetNodeQuerySet.as_manager()

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(fields=["parent", "slug"], name="budget_slug_unique_in_parent"),
            models.UniqueConstraint(
                fields=["slug"], condition=Q(parent=None), name="budget_root_slug_unique"
            ),
        ]

    def __str__(self):
        return self.path

    def save(self, *args, **kwargs):
        if self.pk is not None and self.parent_id is not None:
            self._refuse_cycle()
        self.path = self.compute_path()
        super().save(*args, **kwargs)

    def _refuse_cycle(self):
        """The last guard against a cycle, on every database (PostgreSQL also has a trigger):
        walk the stored parent links up from the new parent; meeting this node is a cycle."""
        seen = set()
        ancestor_id = self.parent_id
        while ancestor_id is not None and ancestor_id not in seen:
            if ancestor_id == self.pk:
                raise IntegrityError(
                    f"budget node {self.pk} cannot sit under its own descendant {self.parent_id}"
                )
            seen.add(ancestor_id)
            ancestor_id = (
                BudgetNode.objects.filter(pk=ancestor_id).values_list("parent_id", flat=True)
                .first()
            )

    @property
    def depth(self) -> int:
        return self.path.count(PATH_SEPARATOR)

    def compute_path(self) -> str:
        return f"{self.parent.path}{PATH_SEPARATOR}{self.slug}" if self.parent else self.slug

    def is_ancestor_of(self, other: "BudgetNode") -> bool:
        return other.path.startswith(self.path + PATH_SEPARATOR)

    def ancestors(self):
        parts = self.path.split(PATH_SEPARATOR)
        paths = [PATH_SEPARATOR.join(parts[:i]) for i in range(1, len(parts))]
        return BudgetNode.objects.filter(path__in=paths).order_by("path")

    def answering_node(self) -> "BudgetNode | None":
        """The node whose managers answer for this one: itself if it has managers, else its
        nearest ancestor that has some (a project without a lead answers to its PI)."""
        for node in [self, *reversed(self.ancestors())]:
            if node.managers.exists():
                return node
        return None

    def nearest_managers(self) -> list:
        """The managers of the answering node (nobody in a tree without managers)."""
        answering = self.answering_node()
        return list(answering.managers.all()) if answering else []

    def clean(self):
        if self.parent_id and self.pk and (
            self.parent_id == self.pk or self.is_ancestor_of(self.parent)
        ):
            raise ValidationError(
                {"parent": "A budget cannot move under itself or its own descendant."}
            )


class Allocation(models.Model):
    """Shares of one budget node on one cluster. Changed only through budgets.services."""

    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="allocations")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="allocations")
    shares = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_SHARES)]
    )
    # Compare-and-set counter: an edit states the version it saw, so two concurrent edits of
    # the same allocation cannot silently overwrite each other.
    version = models.PositiveIntegerField(default=1)
    updated = models.DateTimeField(auto_now=True)
    # On expiry the allocation goes (its share returns to its siblings); its managers are
    # warned a week before.
    expires_at = models.DateTimeField(null=True, blank=True)
    expiry_warned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "node__path"]
        constraints = [
            models.UniqueConstraint(fields=["node", "cluster"], name="one_allocation_per_cluster"),
            models.CheckConstraint(
                condition=Q(shares__gte=1) & Q(shares__lte=MAX_SHARES), name="shares_in_range"
            ),
        ]

    def __str__(self):
        return f"{self.node.path} on {self.cluster.name}: {self.shares}"


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("an audit log is append-only")

    def delete(self):
        raise TypeError("an audit log is append-only")


class AllocationChange(models.Model):
    """Append-only audit entry for every change of an allocation; reports replay this history."""

    node = models.ForeignKey(
        BudgetNode, on_delete=models.PROTECT, related_name="allocation_changes"
    )
    cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, related_name="allocation_changes"
    )
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_by_name = models.CharField(max_length=150)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    old_shares = models.PositiveIntegerField(null=True, blank=True)
    new_shares = models.PositiveIntegerField()
    reason = models.TextField(blank=True)
    request = models.ForeignKey(
        "ChangeRequest", null=True, blank=True, on_delete=models.PROTECT, related_name="changes"
    )

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["cluster", "at"])]

    def __str__(self):
        return (
            f"{self.at:%Y-%m-%d %H:%M} {self.node.path}@{self.cluster.name}: "
            f"{self.old_shares} -> {self.new_shares}"
        )

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("the allocation audit log is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("the allocation audit log is append-only")


class ChangeRequestQuerySet(models.QuerySet):
    def restrict(self, user, action="view"):
        return restrict_requests(self, user, action)


class ChangeRequest(models.Model):
    """A member or manager of a budget asks for more: shares, a temporary boost, or a new child
    budget. The managers of ``deciding_node`` decide; they may pass it up the tree."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"

    class Kind(models.TextChoices):
        SHARES = "shares", "Different shares"
        BOOST = "boost", "Temporary boost"
        CHILD = "child", "New child budget"

    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.SHARES)
    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="change_requests")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="change_requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="budget_requests"
    )
    # Whose managers decide now: the parent for shares and boosts, the node itself for a new
    # child; one level up each time a decider passes the request on.
    deciding_node = models.ForeignKey(
        BudgetNode, on_delete=models.CASCADE, related_name="requests_to_decide"
    )
    shares_before = models.PositiveIntegerField(null=True, blank=True)
    requested_shares = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_SHARES)],
        help_text="The node's shares (a new child's, for a child request).",
    )
    requested_percent = models.DecimalField(
        max_digits=5, decimal_places=2, null=True, blank=True,
        help_text="The % of the parent the requester asked for, if they asked in percent.",
    )
    boost_until = models.DateTimeField(
        null=True, blank=True, help_text="A boost ends then: the shares go back."
    )
    child_name = models.CharField(max_length=100, blank=True)
    child_slug = models.SlugField(max_length=50, blank=True)
    reason = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    created = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)

    objects = ChangeRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "cluster", "kind"],
                condition=Q(state="pending"),
                name="one_pending_request_per_kind",
            ),
        ]

    def __str__(self):
        return f"#{self.pk} {self.node.path}@{self.cluster.name} -> {self.requested_shares}"


class RequestEntry(models.Model):
    """The request's thread: its states and its comments, in order. Append-only."""

    class Kind(models.TextChoices):
        FILED = "filed"
        COMMENT = "comment"
        PASSED_UP = "passed_up", "Passed up"
        APPROVED = "approved"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"

    request = models.ForeignKey(ChangeRequest, on_delete=models.CASCADE, related_name="entries")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150)
    at = models.DateTimeField(default=timezone.now)
    text = models.TextField(blank=True)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self):
        return f"#{self.request_id} {self.at:%Y-%m-%d %H:%M} {self.kind} by {self.author_name}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("a request's thread is append-only")
        super().save(*args, **kwargs)


class ScheduledShareChange(models.Model):
    """Shares a node gets at a later moment (a change with an effective date, the end of a
    boost); a Celery beat task applies it then, through the audit log, exactly once."""

    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    shares = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_SHARES)]
    )
    effective_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="The allocation then expires at this moment."
    )
    reason = models.TextField()
    scheduled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    request = models.ForeignKey(
        ChangeRequest, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["effective_at", "id"]

    def __str__(self):
        return f"{self.node.path}@{self.cluster.name} -> {self.shares} at {self.effective_at}"


class MembershipChange(models.Model):
    """Append-only audit entry for every person added to or removed from a budget's roles."""

    class Role(models.TextChoices):
        MANAGER = "manager"
        MEMBER = "member"
        REVIEWER = "reviewer"

    class Action(models.TextChoices):
        ADDED = "added"
        REMOVED = "removed"

    node = models.ForeignKey(
        BudgetNode, on_delete=models.PROTECT, related_name="membership_changes"
    )
    person = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    person_name = models.CharField(max_length=150)
    role = models.CharField(max_length=10, choices=Role.choices)
    action = models.CharField(max_length=10, choices=Action.choices)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_by_name = models.CharField(max_length=150)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    reason = models.TextField(blank=True)
    # What happened to the person's pending work when they left, in words.
    outcome = models.CharField(max_length=500, blank=True)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.person_name} {self.action} as {self.role} " \
            f"of {self.node.path}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("the membership audit log is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("the membership audit log is append-only")


class ReviewCycle(models.Model):
    """One round of an organisation's budget review (quarterly, say): from ``opens_at`` the
    managers of every node confirm or change the allocations of its children, by ``due_at``.
    Those still unconfirmed then are flagged to the managers one level up. With
    ``repeat_months`` the next round is scheduled when this one closes."""

    class State(models.TextChoices):
        SCHEDULED = "scheduled"
        OPEN = "open"
        CLOSED = "closed"

    organisation = models.ForeignKey(
        BudgetNode, on_delete=models.CASCADE, related_name="review_cycles",
        limit_choices_to={"parent": None},
    )
    name = models.CharField(max_length=100)
    opens_at = models.DateTimeField()
    due_at = models.DateTimeField()
    repeat_months = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(24)],
        help_text="Schedule the next cycle this many months later (3: quarterly); empty: once.",
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.SCHEDULED)
    reminded_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-opens_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(due_at__gt=F("opens_at")),
                                   name="review_due_after_opening"),
            models.UniqueConstraint(fields=["organisation", "name"],
                                    name="one_review_cycle_name_per_organisation"),
        ]

    def __str__(self):
        return f"{self.organisation.path}: {self.name}"


class ReviewItemQuerySet(models.QuerySet):
    def restrict(self, user):
        return restrict_review_items(self, user)


class ReviewItem(models.Model):
    """One allocation under review in a cycle: the managers above its node confirm it as it
    is or change its shares (through the audit log), once."""

    class Decision(models.TextChoices):
        PENDING = "pending"
        CONFIRMED = "confirmed"
        CHANGED = "changed"

    cycle = models.ForeignKey(ReviewCycle, on_delete=models.CASCADE, related_name="items")
    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="review_items")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    shares = models.PositiveIntegerField(help_text="The shares when the cycle opened.")
    decision = models.CharField(
        max_length=10, choices=Decision.choices, default=Decision.PENDING
    )
    new_shares = models.PositiveIntegerField(null=True, blank=True)
    comment = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_by_name = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # Still pending at the deadline: flagged to the managers one level above the deciders.
    flagged_at = models.DateTimeField(null=True, blank=True)

    objects = ReviewItemQuerySet.as_manager()

    class Meta:
        ordering = ["node__path", "cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["cycle", "node", "cluster"],
                                    name="one_review_item_per_allocation"),
        ]

    def __str__(self):
        return f"{self.cycle}: {self.node.path}@{self.cluster.name} {self.decision}"

    @property
    def late(self) -> bool:
        """Decided after the deadline flagged it."""
        return self.flagged_at is not None and self.decision != self.Decision.PENDING
