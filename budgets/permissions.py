"""Who may read or change what in the budget tree: the one place every view and API asks.

- Anyone with a role (manager, member, operator) reads the whole tree: budgets are public
  inside the organisation, which is what makes them a fair currency. Outsiders read nothing.
- A manager of X changes the shares of every node strictly below X, directly.
- A manager or member of X asks for more for X (shares, a temporary boost, a new child);
  the managers of the request's deciding node decide it (X's parent for shares, X for a
  child), never on their own request; a decider may pass it up to the next level.
- Everyone who sees a request may comment on it.
- Allocation history: managers read their subtree, members read the budgets they belong to.
- Reviewers (finance, review meetings) read the tree, and the history and reports of the
  subtrees they review; they change nothing.
- People: a manager of X adds and removes the managers, members and reviewers of X and of
  every node below it (the CEO, manager of the root, everywhere).
- Review cycles: the managers of an organisation's root (the CEO) schedule them; a manager
  confirms or changes the allocations strictly below their node (the same rule as editing
  shares); managers and reviewers follow the progress of their subtrees.
"""

from functools import cache, cached_property

from django.apps import apps
from django.db import connection
from django.db.models import Q

from budgets.paths import PATH_SEPARATOR


class Roles:
    """The budget paths a user manages or belongs to, loaded once per request."""

    def __init__(self, user):
        self.user = user
        self.superuser = bool(user.is_authenticated and user.is_superuser)
        if user.is_authenticated:
            held: dict[str, list[str]] = {"manager": [], "member": [], "reviewer": []}
            for role, path in _role_paths(user):
                held[role].append(path)
            self.managed, self.member_of, self.reviewing = (
                sorted(held[role]) for role in ("manager", "member", "reviewer")
            )
        else:
            self.managed, self.member_of, self.reviewing = [], [], []

    @cached_property
    def operator(self) -> bool:
        """Asked only when it decides (two permission queries): a member submitting
        work never needs it."""
        return bool(self.user.is_authenticated and self.user.has_perm("fleet.operate_fleet"))

    @property
    def any(self) -> bool:
        return self.superuser or bool(self.managed or self.member_of or self.reviewing) or (
            self.operator
        )

    def manages(self, path: str) -> bool:
        """Manages the node itself or one of its ancestors."""
        return self.superuser or any(_within(path, managed) for managed in self.managed)

    def manages_strictly_above(self, path: str) -> bool:
        return self.superuser or any(_below(path, managed) for managed in self.managed)

    def manages_directly(self, path: str) -> bool:
        return self.superuser or path in self.managed


ROLE_FIELDS = {"manager": "managers", "member": "members", "reviewer": "reviewers"}


def _role_paths(user):
    """(role, budget path) of every role the user holds, in one query."""
    with connection.cursor() as cursor:
        cursor.execute(_role_paths_sql(), [user.pk] * len(ROLE_FIELDS))
        return cursor.fetchall()


@cache
def _role_paths_sql() -> str:
    """The union over the three role tables, written once from the models: every request
    reads the roles, and composing this union with the ORM cost more CPU than the rest of a
    submission's permission checks together (about 1 ms)."""
    node = apps.get_model("budgets", "BudgetNode")
    quote = connection.ops.quote_name
    path, pk = quote(node._meta.get_field("path").column), quote(node._meta.pk.column)
    selects = []
    for role, name in ROLE_FIELDS.items():
        field = node._meta.get_field(name)
        through = quote(field.m2m_db_table())
        selects.append(
            f"SELECT '{role}', n.{path} FROM {quote(node._meta.db_table)} n "
            f"JOIN {through} r ON r.{quote(field.m2m_column_name())} = n.{pk} "
            f"WHERE r.{quote(field.m2m_reverse_name())} = %s"
        )
    return " UNION ALL ".join(selects)


def has_role(user) -> bool:
    """Anyone with a role in the organisation (manager, member, reviewer, operator); not
    outsiders."""
    return roles(user).any


def roles(user) -> Roles:
    cached = getattr(user, "_timeshare_roles", None)
    if cached is None:
        cached = Roles(user)
        user._timeshare_roles = cached
    return cached


def _within(path: str, top: str) -> bool:
    return path == top or _below(path, top)


def _below(path: str, top: str) -> bool:
    return path.startswith(top + PATH_SEPARATOR)


def _subtrees(paths, include_top=True) -> Q:
    condition = Q(pk__in=[])
    for path in paths:
        condition |= Q(path__startswith=path + PATH_SEPARATOR)
        if include_top:
            condition |= Q(path=path)
    return condition


def restrict_nodes(queryset, user, action: str):
    who = roles(user)
    if action == "view":
        return queryset if who.any else queryset.none()
    if action == "change":
        if who.superuser:
            return queryset.exclude(parent=None)
        return queryset.filter(_subtrees(who.managed, include_top=False))
    if action == "people":  # whose managers, members and reviewers the user changes
        if who.superuser:
            return queryset
        return queryset.filter(_subtrees(who.managed))
    if action == "history":
        if who.superuser:
            return queryset
        return queryset.filter(
            _subtrees(who.managed) | _subtrees(who.reviewing) | Q(path__in=who.member_of)
        )
    raise ValueError(f"unknown action {action!r}")


def restrict_requests(queryset, user, action: str):
    who = roles(user)
    if action == "view":
        if who.superuser:
            return queryset
        return queryset.filter(
            Q(requested_by=user) | _node_subtrees(who.managed)
        ).distinct()
    if action == "decide":
        pending = queryset.filter(state="pending").exclude(requested_by=user)
        if who.superuser:
            return pending
        return pending.filter(deciding_node__path__in=who.managed)
    raise ValueError(f"unknown action {action!r}")


def _node_subtrees(paths) -> Q:
    condition = Q(pk__in=[])
    for path in paths:
        condition |= Q(node__path=path) | Q(node__path__startswith=path + PATH_SEPARATOR)
    return condition


def can_edit_shares(user, node) -> bool:
    return node.parent_id is not None and roles(user).manages_strictly_above(node.path)


def can_request_change(user, node) -> bool:
    """Its managers and members ask for more for their own budget."""
    who = roles(user)
    return node.parent_id is not None and (
        who.manages_directly(node.path) or node.path in who.member_of
    )


def can_decide(user, change_request) -> bool:
    return (
        change_request.state == "pending"
        and change_request.requested_by_id != user.pk
        and roles(user).manages_directly(change_request.deciding_node.path)
    )


def can_pass_up(user, change_request) -> bool:
    """A decider hands the request to the managers one level up."""
    return (
        can_decide(user, change_request)
        and change_request.deciding_node.parent_id is not None
    )


def can_manage_people(user, node) -> bool:
    """Add or remove the managers, members and reviewers of the node."""
    return roles(user).manages(node.path)


def can_schedule_reviews(user, organisation) -> bool:
    return organisation.parent_id is None and roles(user).manages_directly(organisation.path)


def can_follow_reviews(user) -> bool:
    who = roles(user)
    return who.superuser or bool(who.managed or who.reviewing)


def can_review(user, item) -> bool:
    """Confirm or change one allocation under review (while it waits for a decision)."""
    return item.decision == "pending" and item.cycle.state != "scheduled" and can_edit_shares(
        user, item.node
    )


def restrict_review_items(queryset, user):
    """The review items of the subtrees the user manages or reviews (everything: the CEO)."""
    who = roles(user)
    if who.superuser:
        return queryset
    condition = Q(pk__in=[])
    for path in [*who.managed, *who.reviewing]:
        condition |= Q(node__path=path) | Q(node__path__startswith=path + PATH_SEPARATOR)
    return queryset.filter(condition)
