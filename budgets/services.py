"""Every change of the budget tree goes through here: permission, validation, audit, in one
transaction. Views and the API call these functions; they never write allocations themselves."""

from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from budgets.models import (
    MAX_SHARES,
    Allocation,
    AllocationChange,
    BudgetNode,
    ChangeRequest,
    RequestEntry,
    ScheduledShareChange,
)
from budgets.paths import PATH_SEPARATOR
from budgets.people import record_membership_change
from budgets.permissions import (
    can_decide,
    can_edit_shares,
    can_pass_up,
    can_request_change,
    roles,
)
from budgets.signals import allocation_expired
from common.errors import ConflictError, ServiceError
from fleet.locks import lock_budget_tree
from fleet.models import WEEK_HOURS
from scheduler.engine import fractions


class BudgetError(ServiceError):
    """A change to the budget tree that cannot be carried out."""


class StaleEdit(BudgetError, ConflictError):
    """The allocation or request changed since the manager read it."""


@dataclass
class TreeRow:
    node: BudgetNode
    depth: int
    allocation: Allocation | None
    sibling_shares: int
    fraction: float
    gpus: int

    @property
    def shares(self) -> int | None:
        return self.allocation.shares if self.allocation else None

    @property
    def percent_of_parent(self) -> float | None:
        if self.node.parent_id is None:
            return 100.0
        if not self.shares or not self.sibling_shares:
            return None
        return 100.0 * self.shares / self.sibling_shares

    @property
    def percent_of_cluster(self) -> float:
        return 100.0 * self.fraction

    @property
    def gpu_hours_per_week(self) -> float:
        return self.fraction * self.gpus * WEEK_HOURS


def depth_first(nodes: list[BudgetNode]) -> list[BudgetNode]:
    """Parents before children, siblings by name: the order of the tree page."""
    children: dict[int | None, list[BudgetNode]] = {}
    for node in nodes:
        children.setdefault(node.parent_id, []).append(node)
    ordered: list[BudgetNode] = []
    stack = sorted(children.get(None, []), key=lambda n: n.name, reverse=True)
    while stack:
        node = stack.pop()
        ordered.append(node)
        stack.extend(sorted(children.get(node.pk, []), key=lambda n: n.name, reverse=True))
    return ordered


def shares_by_path(nodes, allocations: dict[int, Allocation], overrides=None) -> dict[str, float]:
    """The engine's input: roots own the whole cluster, other nodes their allocated shares."""
    overrides = overrides or {}
    shares = {}
    for node in nodes:
        if node.parent_id is None:
            shares[node.path] = 1
        elif node.pk in overrides:
            shares[node.path] = overrides[node.pk]
        else:
            allocation = allocations.get(node.pk)
            shares[node.path] = allocation.shares if allocation else 0
    return shares


def tree_rows(cluster) -> list[TreeRow]:
    nodes = depth_first(list(BudgetNode.objects.prefetch_related("managers")))
    allocations = {a.node_id: a for a in Allocation.objects.filter(cluster=cluster)}
    fraction_of = fractions(shares_by_path(nodes, allocations))
    sibling_shares: dict[int | None, int] = {}
    for node in nodes:
        if node.pk in allocations:
            sibling_shares[node.parent_id] = (
                sibling_shares.get(node.parent_id, 0) + allocations[node.pk].shares
            )
    gpus = cluster.gpu_count
    return [
        TreeRow(
            node=node,
            depth=node.depth,
            allocation=allocations.get(node.pk),
            sibling_shares=sibling_shares.get(node.parent_id, 0),
            fraction=fraction_of.get(node.path, 0.0),
            gpus=gpus,
        )
        for node in nodes
    ]


@dataclass(frozen=True)
class UnusableShares:
    """A budget's part of a cluster no workload can ever use: the budget holds shares there,
    but none of its children does, and workloads are charged to leaves below it."""

    node: BudgetNode
    cluster_name: str
    fraction: float

    def __str__(self) -> str:
        why = ("no budget holds shares there." if self.node.parent_id is None else
               f"{self.node.path} holds shares there but none of its children does.")
        return f"{100 * self.fraction:.0f}% of {self.cluster_name} cannot be used: {why}"


def unusable_shares(cluster, rows: list[TreeRow] | None = None) -> list[UnusableShares]:
    """Every budget with a part of the cluster whose children all have no shares on it
    (the deepest such budget: its ancestors pass their part on to it)."""
    rows = tree_rows(cluster) if rows is None else rows
    has_children, children_with_shares = set(), set()
    for row in rows:
        has_children.add(row.node.parent_id)
        if row.shares:
            children_with_shares.add(row.node.parent_id)
    return [
        UnusableShares(row.node, cluster.name, row.fraction)
        for row in rows
        if row.fraction > 0 and row.node.pk in has_children
        and row.node.pk not in children_with_shares
    ]


def validate_shares(value) -> int:
    try:
        shares = int(value)
    except (TypeError, ValueError):
        raise BudgetError("Shares must be a whole number.", field="shares") from None
    if shares != value and str(value).strip() != str(shares):
        raise BudgetError("Shares must be a whole number.", field="shares")
    if not 1 <= shares <= MAX_SHARES:
        raise BudgetError(f"Shares must be between 1 and {MAX_SHARES:,}.", field="shares")
    return shares


def _record(node, cluster, user, old, new, reason, request=None, at=None):
    AllocationChange.objects.create(
        node=node,
        cluster=cluster,
        changed_by=user,
        changed_by_name=user.get_username() if user else SCHEDULED_BY,
        at=at or timezone.now(),
        old_shares=old,
        new_shares=new,
        reason=reason,
        request=request,
    )


SCHEDULED_BY = "timeshare (scheduled)"  # the audit name of a scheduled change without its author


def _write_shares(node, cluster, user, shares, reason, expected_version=None, request=None,
                  at=None):
    allocation = (
        Allocation.objects.select_for_update().filter(node=node, cluster=cluster).first()
    )
    if allocation is None:
        if expected_version:
            raise StaleEdit(
                "This allocation was removed since you loaded the page; reload and try again."
            )
        try:
            with transaction.atomic():
                allocation = Allocation.objects.create(node=node, cluster=cluster, shares=shares)
        except IntegrityError:
            raise StaleEdit(
                "Someone else created this allocation at the same moment; reload and try again."
            ) from None
        _record(node, cluster, user, None, shares, reason, request, at)
        return allocation
    if expected_version is not None and allocation.version != expected_version:
        raise StaleEdit(
            f"{node.name} was changed to {allocation.shares} shares since you loaded the page; "
            "reload and try again."
        )
    if allocation.shares == shares:
        return allocation
    updated = Allocation.objects.filter(pk=allocation.pk, version=allocation.version).update(
        shares=shares, version=F("version") + 1, updated=timezone.now()
    )
    if not updated:
        raise StaleEdit(f"{node.name} was changed by someone else; reload and try again.")
    _record(node, cluster, user, allocation.shares, shares, reason, request, at)
    allocation.refresh_from_db()
    return allocation


def set_shares(
    user, node, cluster, shares, *, reason="", expected_version=None, expires_at=None
) -> Allocation:
    """A manager of an ancestor sets a node's shares directly, effective at once; with
    ``expires_at`` the allocation expires then (its share returns to its siblings)."""
    if not can_edit_shares(user, node):
        raise PermissionDenied(f"You do not manage a budget above {node.path}.")
    shares = validate_shares(shares)
    check_dates(None, expires_at)
    with transaction.atomic():
        allocation = _write_shares(node, cluster, user, shares, reason.strip(), expected_version)
        if expires_at is not None:
            _set_expiry(allocation, user, expires_at, reason.strip())
        return allocation


def schedule_shares(
    user, node, cluster, shares, effective_at, *, reason="", expires_at=None
) -> ScheduledShareChange:
    """The same as ``set_shares``, from ``effective_at`` on: a beat task applies it then and
    writes the audit entry at that moment, so reports see the change only from that date."""
    if not can_edit_shares(user, node):
        raise PermissionDenied(f"You do not manage a budget above {node.path}.")
    shares = validate_shares(shares)
    check_dates(effective_at, expires_at)
    return ScheduledShareChange.objects.create(
        node=node, cluster=cluster, shares=shares, effective_at=effective_at,
        expires_at=expires_at, scheduled_by=user,
        reason=reason.strip() or f"scheduled by {user.get_username()}",
    )


def check_dates(effective_at, expires_at, now=None) -> None:
    """An effective date is in the future; an expiry comes after the shares take effect."""
    now = now or timezone.now()
    if effective_at is not None and effective_at <= now:
        raise BudgetError(
            "The effective date is in the past: give a future moment, or none to change the "
            "shares now.", field="effective_at",
        )
    start = effective_at or now
    if expires_at is not None and expires_at <= start:
        raise BudgetError(
            f"The allocation would expire before it takes effect: give an expiry after "
            f"{start:%Y-%m-%d %H:%M} UTC.", field="expires_at",
        )


def _set_expiry(allocation, user, expires_at, reason="", at=None):
    Allocation.objects.filter(pk=allocation.pk).update(
        expires_at=expires_at, expiry_warned_at=None
    )
    note = f"expires on {expires_at:%Y-%m-%d %H:%M} UTC" + (f": {reason}" if reason else "")
    _record(allocation.node, allocation.cluster, user, allocation.shares, allocation.shares,
            note, at=at)
    allocation.refresh_from_db()


def expire_due_allocations(now=None) -> int:
    """Allocations whose expiry has come go: the audit log records 0 shares at the expiry
    moment (the share returns to the siblings from then on), and ``allocation_expired`` tells
    the scheduler, whose pending allocated work there learns why it can no longer run
    allocated. Returns how many expired."""
    now = now or timezone.now()
    expired = 0
    for due in Allocation.objects.filter(expires_at__lte=now).select_related("node", "cluster"):
        with transaction.atomic():
            gone = Allocation.objects.filter(pk=due.pk, expires_at=due.expires_at).delete()[0]
            if not gone:
                continue
            _record(due.node, due.cluster, None, due.shares, 0,
                    "allocation expired: its share returns to its siblings", at=due.expires_at)
            allocation_expired.send(sender=Allocation, node=due.node, cluster=due.cluster,
                                    at=due.expires_at)
            expired += 1
    return expired


def shares_for_percent(node, cluster, percent) -> int:
    """Shares that give `node` `percent` of its parent, the siblings' shares unchanged."""
    others = sum(
        Allocation.objects.filter(cluster=cluster, node__parent_id=node.parent_id)
        .exclude(node=node)
        .values_list("shares", flat=True)
    )
    if not Decimal(0) < percent < Decimal(100):
        raise BudgetError("A percentage must be above 0 and below 100.", field="percent")
    if others == 0:
        raise BudgetError(
            "This budget has no siblings with shares on this cluster: ask for shares instead.",
            field="percent",
        )
    shares = round(float(percent) * others / (100 - float(percent)))
    return validate_shares(max(shares, 1))


CHILD_KIND = {
    BudgetNode.Kind.ORGANISATION: BudgetNode.Kind.PROGRAM,
    BudgetNode.Kind.PROGRAM: BudgetNode.Kind.PROJECT,
}


def _entry(change_request, kind, user, text=""):
    RequestEntry.objects.create(
        request=change_request, kind=kind, author=user, author_name=user.get_username(),
        text=text,
    )


def _requested_shares(node, cluster, kind, shares, percent):
    if kind == ChangeRequest.Kind.CHILD:
        if shares is None or percent is not None:
            raise BudgetError("Give the new budget's shares on the cluster.", field="shares")
        return validate_shares(shares)
    if (shares is None) == (percent is None):
        raise BudgetError("Ask for either shares or a percentage of the parent.", field="shares")
    if shares is not None:
        return validate_shares(shares)
    return shares_for_percent(node, cluster, Decimal(percent))


def _check_kind(node, current, requested, kind, boost_until, child_name, child_slug):
    """What each kind of request needs besides shares; raises BudgetError."""
    if kind not in ChangeRequest.Kind.values:
        raise BudgetError(
            f"The kind must be one of {', '.join(ChangeRequest.Kind.values)}.", field="kind"
        )
    if kind == ChangeRequest.Kind.CHILD:
        if not child_name.strip():
            raise BudgetError("Name the new budget.", field="child_name")
        try:
            validate_slug(child_slug)
        except ValidationError:
            raise BudgetError(
                "The new budget's short name is letters, digits, - and _ only.",
                field="child_slug",
            ) from None
        if BudgetNode.objects.filter(parent=node, slug=child_slug).exists():
            raise BudgetError(f"{node.name} already has a child named {child_slug}.",
                              field="child_slug")
        return
    if node.parent_id is None:
        raise BudgetError("The organisation holds the whole cluster: its share never changes.")
    if current and current.shares == requested:
        raise BudgetError(f"{node.name} already has {requested} shares.", field="shares")
    if kind == ChangeRequest.Kind.BOOST:
        if current is None:
            raise BudgetError(
                f"{node.name} has no shares here to boost: ask for shares instead.", field="kind"
            )
        if requested < current.shares:
            raise BudgetError("A boost asks for more shares than now.", field="shares")
        if boost_until is None:
            raise BudgetError("Say until when the boost lasts.", field="boost_until")
        if boost_until <= timezone.now():
            raise BudgetError("A boost must end in the future.", field="boost_until")


def request_change(
    user, node, cluster, *, reason, shares=None, percent=None, kind=ChangeRequest.Kind.SHARES,
    boost_until=None, child_name="", child_slug="",
) -> ChangeRequest:
    """A manager or member of a node asks for more: different shares (decided by the parent's
    managers), a boost until a date (the same), or a new child budget with shares (decided by
    the node's managers)."""
    if not can_request_change(user, node):
        raise PermissionDenied(
            f"Only the managers and members of {node.path} may ask for more for it."
        )
    if not reason or not reason.strip():
        raise BudgetError("Say why the budget should change.", field="reason")
    requested = _requested_shares(node, cluster, kind, shares, percent)
    current = Allocation.objects.filter(node=node, cluster=cluster).first()
    child_name, child_slug = (child_name or "").strip(), (child_slug or "").strip()
    _check_kind(node, current, requested, kind, boost_until, child_name, child_slug)
    child = kind == ChangeRequest.Kind.CHILD
    try:
        with transaction.atomic():
            change_request = ChangeRequest.objects.create(
                kind=kind,
                node=node,
                cluster=cluster,
                requested_by=user,
                deciding_node_id=node.pk if child else node.parent_id,
                shares_before=None if child or current is None else current.shares,
                requested_shares=requested,
                requested_percent=percent,
                boost_until=boost_until if kind == ChangeRequest.Kind.BOOST else None,
                child_name=child_name if child else "",
                child_slug=child_slug if child else "",
                reason=reason.strip(),
            )
            _entry(change_request, RequestEntry.Kind.FILED, user, change_request.reason)
            return change_request
    except IntegrityError:
        raise BudgetError(
            f"{node.name} already has a pending request of this kind on {cluster.name}; wait "
            "for its decision or withdraw it."
        ) from None


def already_decided(change_request) -> str:
    by = f" by {change_request.decided_by.get_username()}" if change_request.decided_by else ""
    return f"This request was already {change_request.state}{by}."


def _approve(user, change_request):
    reason = f"request #{change_request.pk} approved: {change_request.reason}"
    node, cluster = change_request.node, change_request.cluster
    if change_request.kind == ChangeRequest.Kind.CHILD:
        if BudgetNode.objects.filter(parent=node, slug=change_request.child_slug).exists():
            raise BudgetError(
                f"{node.name} got a child named {change_request.child_slug} since the request "
                "was filed: reject it and ask for another name."
            )
        child = BudgetNode.objects.create(
            parent=node, name=change_request.child_name, slug=change_request.child_slug,
            kind=CHILD_KIND.get(node.kind, BudgetNode.Kind.RESEARCHER),
        )
        _write_shares(child, cluster, user, change_request.requested_shares, reason,
                      request=change_request)
        child.members.add(change_request.requested_by)
        record_membership_change(child, change_request.requested_by, "member", "added", user,
                                 reason)
        return
    _write_shares(node, cluster, user, change_request.requested_shares, reason,
                  request=change_request)
    if change_request.kind == ChangeRequest.Kind.BOOST:
        ScheduledShareChange.objects.create(
            node=node, cluster=cluster, shares=change_request.shares_before,
            effective_at=change_request.boost_until, scheduled_by=user, request=change_request,
            reason=f"boost of request #{change_request.pk} ended",
        )


def decide(user, change_request: ChangeRequest, *, approve: bool, comment="") -> ChangeRequest:
    """The deciding node's managers approve (the change is made at once; a boost's end is
    scheduled) or reject with a comment. Only the first decision counts: a second decider gets
    a ConflictError naming the first."""
    comment = comment.strip()
    if not approve and not comment:
        raise BudgetError("Say why the request is rejected.", field="comment")
    with transaction.atomic():
        current = ChangeRequest.objects.select_for_update(of=("self",)).select_related(
            "deciding_node", "decided_by", "node", "cluster", "requested_by"
        ).get(pk=change_request.pk)
        if current.state != ChangeRequest.State.PENDING:
            raise StaleEdit(already_decided(current))
        if not can_decide(user, current):
            if current.requested_by_id == user.pk:
                raise PermissionDenied("Nobody approves their own request.")
            raise PermissionDenied(
                f"Only the managers of {current.deciding_node.path} decide this request."
            )
        state = ChangeRequest.State.APPROVED if approve else ChangeRequest.State.REJECTED
        claimed = ChangeRequest.objects.filter(
            pk=current.pk, state=ChangeRequest.State.PENDING
        ).update(state=state, decided_by=user, decided_at=timezone.now(), decision_comment=comment)
        if not claimed:
            raise StaleEdit("This request was decided by someone else a moment ago.")
        if approve:
            _approve(user, current)
        _entry(current, state, user, comment)
    change_request.refresh_from_db()
    return change_request


def pass_up(user, change_request: ChangeRequest, *, comment="") -> ChangeRequest:
    """A decider hands the request to the managers one level up (the change is above them)."""
    with transaction.atomic():
        current = ChangeRequest.objects.select_for_update(of=("self",)).select_related(
            "deciding_node", "decided_by"
        ).get(pk=change_request.pk)
        if current.state != ChangeRequest.State.PENDING:
            raise StaleEdit(already_decided(current))
        if not can_pass_up(user, current):
            if can_decide(user, current):
                raise BudgetError("The organisation's managers decide: there is nobody above.")
            raise PermissionDenied(
                f"Only the managers of {current.deciding_node.path} pass this request on."
            )
        above = current.deciding_node.parent
        ChangeRequest.objects.filter(pk=current.pk).update(deciding_node=above)
        _entry(current, RequestEntry.Kind.PASSED_UP, user,
               f"passed up to the managers of {above.path}" + (f": {comment.strip()}"
                                                              if comment.strip() else ""))
    change_request.refresh_from_db()
    return change_request


COMMENT_MAX = 5000


def comment_on(user, change_request: ChangeRequest, text: str) -> RequestEntry:
    """Anyone who sees the request adds to its thread."""
    if not ChangeRequest.objects.restrict(user).filter(pk=change_request.pk).exists():
        raise PermissionDenied("You may not see this request.")
    text = (text or "").strip()
    if not text:
        raise BudgetError("Write a comment.", field="text")
    if len(text) > COMMENT_MAX:
        raise BudgetError(f"A comment is at most {COMMENT_MAX:,} characters.", field="text")
    _entry(change_request, RequestEntry.Kind.COMMENT, user, text)
    return change_request.entries.last()


def withdraw(user, change_request: ChangeRequest) -> ChangeRequest:
    if change_request.requested_by_id != user.pk:
        raise PermissionDenied("Only the requester may withdraw a request.")
    with transaction.atomic():
        withdrawn = ChangeRequest.objects.filter(
            pk=change_request.pk, state=ChangeRequest.State.PENDING
        ).update(state=ChangeRequest.State.WITHDRAWN, decided_at=timezone.now())
        if not withdrawn:
            raise BudgetError("Only a pending request can be withdrawn.")
        _entry(change_request, RequestEntry.Kind.WITHDRAWN, user)
    change_request.refresh_from_db()
    return change_request


def apply_due_share_changes(now=None) -> int:
    """Apply every scheduled share change whose moment has come, each exactly once (a
    conditional update claims it, so two beat workers cannot both apply it); the audit entry
    carries the scheduled moment, so reports see the change from then, not from when the task
    ran. Returns how many were applied."""
    now = now or timezone.now()
    applied = 0
    for due in ScheduledShareChange.objects.filter(applied_at=None, effective_at__lte=now):
        with transaction.atomic():
            claimed = ScheduledShareChange.objects.filter(pk=due.pk, applied_at=None).update(
                applied_at=now
            )
            if not claimed:
                continue
            allocation = _write_shares(due.node, due.cluster, due.scheduled_by, due.shares,
                                       due.reason, request=due.request, at=due.effective_at)
            if due.expires_at is not None:
                _set_expiry(allocation, due.scheduled_by, due.expires_at, at=due.effective_at)
            applied += 1
    return applied


@dataclass
class Effect:
    node: BudgetNode
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


def effect_of(change_request: ChangeRequest, *, nodes=None, allocations=None) -> list[Effect]:
    """% of cluster of the node and each sibling, before and after the requested shares (none
    for a new child: it takes its share from its future siblings, listed on the request).

    A list of requests passes `nodes` (every node) and `allocations` (node pk -> allocation on
    the request's cluster) loaded once, so the queue costs the same queries however long."""
    node = change_request.node
    if change_request.kind == ChangeRequest.Kind.CHILD:
        return []
    if nodes is None:
        nodes = list(BudgetNode.objects.all())
    if allocations is None:
        allocations = {
            a.node_id: a for a in Allocation.objects.filter(cluster=change_request.cluster)
        }
    before = fractions(shares_by_path(nodes, allocations))
    after = fractions(
        shares_by_path(nodes, allocations, overrides={node.pk: change_request.requested_shares})
    )
    siblings = sorted(
        (n for n in nodes if n.parent_id == node.parent_id and (n.pk in allocations or n == node)),
        key=lambda n: n.name,
    )
    return [Effect(n, 100 * before[n.path], 100 * after[n.path]) for n in siblings]


def move_node(user, node, new_parent, *, reason="") -> BudgetNode:
    """Re-parent a node and its subtree; shares stay, fractions follow the new parent.

    The checks run inside the transaction, under the tree's lock and on rows read after it was
    taken: a check made before would be stale once a crossed move commits (X under Y while Y
    goes under X), and the tree would hold a cycle."""
    with transaction.atomic():
        lock_budget_tree()
        node = BudgetNode.objects.select_for_update().get(pk=node.pk)
        new_parent = BudgetNode.objects.get(pk=new_parent.pk)
        if not (can_edit_shares(user, node) and roles(user).manages(new_parent.path)):
            raise PermissionDenied("You must manage both the budget's parent and its new parent.")
        if new_parent.pk == node.pk or node.is_ancestor_of(new_parent):
            raise BudgetError(
                "A budget cannot move under itself or its own descendant.", field="parent"
            )
        if new_parent.pk == node.parent_id:
            raise BudgetError(f"{node.name} is already under {new_parent.name}.", field="parent")
        if BudgetNode.objects.filter(parent=new_parent, slug=node.slug).exists():
            raise BudgetError(
                f"{new_parent.name} already has a child named {node.slug}.", field="parent"
            )
        old_path = node.path
        node.parent = new_parent
        node.save()
        for descendant in BudgetNode.objects.select_for_update().filter(
            path__startswith=old_path + PATH_SEPARATOR
        ):
            descendant.path = node.path + descendant.path[len(old_path):]
            descendant.save(update_fields=["path"])
        note = f"moved from {old_path} to {node.path}" + (f": {reason.strip()}" if reason else "")
        for allocation in Allocation.objects.filter(node=node):
            _record(node, allocation.cluster, user, allocation.shares, allocation.shares, note)
    return node


def add_child(user, parent, *, name, slug, kind, description="") -> BudgetNode:
    if not roles(user).manages(parent.path):
        raise PermissionDenied(f"You do not manage {parent.path}.")
    taken = BudgetError(f"{parent.name} already has a child named {slug}.", field="slug")
    if BudgetNode.objects.filter(parent=parent, slug=slug).exists():
        raise taken
    try:
        with transaction.atomic():
            return BudgetNode.objects.create(
                parent=parent, name=name, slug=slug, kind=kind, description=description
            )
    except IntegrityError:
        # Another manager created the same slug between the check and the insert.
        raise taken from None
