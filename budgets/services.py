"""Every change of the budget tree goes through here: permission, validation, audit, in one
transaction. Views and the API call these functions; they never write allocations themselves."""

from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from budgets.models import (
    MAX_SHARES,
    Allocation,
    AllocationChange,
    BudgetNode,
    ChangeRequest,
)
from budgets.paths import PATH_SEPARATOR
from budgets.permissions import can_decide, can_edit_shares, can_request_change, roles
from common.errors import ConflictError, ServiceError
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


def _record(node, cluster, user, old, new, reason, request=None):
    AllocationChange.objects.create(
        node=node,
        cluster=cluster,
        changed_by=user,
        changed_by_name=user.get_username(),
        old_shares=old,
        new_shares=new,
        reason=reason,
        request=request,
    )


def _write_shares(node, cluster, user, shares, reason, expected_version=None, request=None):
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
        _record(node, cluster, user, None, shares, reason, request)
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
    _record(node, cluster, user, allocation.shares, shares, reason, request)
    allocation.refresh_from_db()
    return allocation


def set_shares(user, node, cluster, shares, *, reason="", expected_version=None) -> Allocation:
    """A manager of an ancestor sets a node's shares directly; effective at once."""
    if not can_edit_shares(user, node):
        raise PermissionDenied(f"You do not manage a budget above {node.path}.")
    shares = validate_shares(shares)
    with transaction.atomic():
        return _write_shares(node, cluster, user, shares, reason.strip(), expected_version)


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


def request_change(user, node, cluster, *, reason, shares=None, percent=None) -> ChangeRequest:
    """The manager of a node asks its parent's managers for a different share of its own."""
    if not can_request_change(user, node):
        raise PermissionDenied(f"Only the managers of {node.path} may ask to change its share.")
    if not reason or not reason.strip():
        raise BudgetError("Say why the budget should change.", field="reason")
    if (shares is None) == (percent is None):
        raise BudgetError("Ask for either shares or a percentage of the parent.", field="shares")
    requested = validate_shares(shares) if shares is not None else shares_for_percent(
        node, cluster, Decimal(percent)
    )
    current = Allocation.objects.filter(node=node, cluster=cluster).first()
    if current and current.shares == requested:
        raise BudgetError(f"{node.name} already has {requested} shares.", field="shares")
    try:
        with transaction.atomic():
            return ChangeRequest.objects.create(
                node=node,
                cluster=cluster,
                requested_by=user,
                shares_before=current.shares if current else None,
                requested_shares=requested,
                requested_percent=percent,
                reason=reason.strip(),
            )
    except IntegrityError:
        raise BudgetError(
            f"{node.name} already has a pending request on {cluster.name}; wait for its decision "
            "or withdraw it."
        ) from None


def decide(user, change_request: ChangeRequest, *, approve: bool, comment="") -> ChangeRequest:
    """The parent's managers approve (the shares change at once) or reject with a comment."""
    comment = comment.strip()
    if not approve and not comment:
        raise BudgetError("Say why the request is rejected.", field="comment")
    with transaction.atomic():
        current = ChangeRequest.objects.select_for_update().get(pk=change_request.pk)
        if current.state != ChangeRequest.State.PENDING:
            raise BudgetError(f"This request was already {current.state}.")
        if not can_decide(user, current):
            if current.requested_by_id == user.pk:
                raise PermissionDenied("Nobody approves their own request.")
            raise PermissionDenied("Only the managers of the parent budget decide this request.")
        state = ChangeRequest.State.APPROVED if approve else ChangeRequest.State.REJECTED
        claimed = ChangeRequest.objects.filter(
            pk=current.pk, state=ChangeRequest.State.PENDING
        ).update(state=state, decided_by=user, decided_at=timezone.now(), decision_comment=comment)
        if not claimed:
            raise BudgetError("This request was decided by someone else a moment ago.")
        if approve:
            reason = f"request #{current.pk} approved: {current.reason}"
            _write_shares(
                current.node, current.cluster, user, current.requested_shares, reason,
                request=current,
            )
    change_request.refresh_from_db()
    return change_request


def withdraw(user, change_request: ChangeRequest) -> ChangeRequest:
    if change_request.requested_by_id != user.pk:
        raise PermissionDenied("Only the requester may withdraw a request.")
    withdrawn = ChangeRequest.objects.filter(
        pk=change_request.pk, state=ChangeRequest.State.PENDING
    ).update(state=ChangeRequest.State.WITHDRAWN, decided_at=timezone.now())
    if not withdrawn:
        raise BudgetError("Only a pending request can be withdrawn.")
    change_request.refresh_from_db()
    return change_request


@dataclass
class Effect:
    node: BudgetNode
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


def effect_of(change_request: ChangeRequest, *, nodes=None, allocations=None) -> list[Effect]:
    """% of cluster of the node and each sibling, before and after the requested shares.

    A list of requests passes `nodes` (every node) and `allocations` (node pk -> allocation on
    the request's cluster) loaded once, so the queue costs the same queries however long."""
    node = change_request.node
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
    """Re-parent a node and its subtree; shares stay, fractions follow the new parent."""
    who = roles(user)
    if not (can_edit_shares(user, node) and who.manages(new_parent.path)):
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
    with transaction.atomic():
        old_path = node.path
        node = BudgetNode.objects.select_for_update().get(pk=node.pk)
        node.parent = new_parent
        node.save()
        for descendant in BudgetNode.objects.filter(path__startswith=old_path + PATH_SEPARATOR):
            descendant.path = node.path + descendant.path[len(old_path):]
            descendant.save(update_fields=["path"])
        note = f"moved from {old_path} to {node.path}" + (f": {reason.strip()}" if reason else "")
        for allocation in Allocation.objects.filter(node=node):
            _record(node, allocation.cluster, user, allocation.shares, allocation.shares, note)
    return node


def add_child(user, parent, *, name, slug, kind, description="") -> BudgetNode:
    if not roles(user).manages(parent.path):
        raise PermissionDenied(f"You do not manage {parent.path}.")
    if BudgetNode.objects.filter(parent=parent, slug=slug).exists():
        raise BudgetError(f"{parent.name} already has a child named {slug}.", field="slug")
    return BudgetNode.objects.create(
        parent=parent, name=name, slug=slug, kind=kind, description=description
    )
