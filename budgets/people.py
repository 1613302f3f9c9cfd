"""Who holds which role on a budget: managers, members and reviewers, added and removed by the
managers at or above the node, each change in the append-only membership log. Views, the API
and the CLI call these functions; nothing else writes the roles.

A member who leaves keeps their history and finished workloads; their pending work charged to
the budget is cancelled with a reason, or moved to a leaf the manager chooses (the scheduler
does it, told by ``budgets.signals.member_leaving``)."""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q

from budgets.models import BudgetNode, MembershipChange
from budgets.permissions import can_manage_people, roles
from budgets.signals import member_leaving
from common.errors import ServiceError

Role = MembershipChange.Role
SEARCH_LIMIT = 10


class PeopleError(ServiceError):
    """A change of people that cannot be carried out."""


def find_person(query):
    """The active user whose username (exactly) or email (any case) is ``query``."""
    text = (query or "").strip()
    if not text:
        raise PeopleError("Give a username or an email address.", field="person")
    users = get_user_model().objects.filter(is_active=True)
    by_username = users.filter(username=text).first()
    if by_username is not None:
        return by_username
    by_email = list(users.filter(email__iexact=text)[:2]) if "@" in text else []
    if len(by_email) > 1:
        raise PeopleError(
            f"Several people have the email {text}: give the username instead.", field="person"
        )
    if not by_email:
        raise PeopleError(f"Nobody has the username or email {text!r}.", field="person")
    return by_email[0]


def search_people(user, text: str) -> list:
    """Up to SEARCH_LIMIT active people whose username, email or name contains ``text``, for a
    manager choosing whom to add (nobody else searches the directory)."""
    who = roles(user)
    text = (text or "").strip()
    if not (who.superuser or who.managed) or len(text) < 2:
        return []
    matches = Q(username__icontains=text) | Q(email__icontains=text)
    matches |= Q(first_name__icontains=text) | Q(last_name__icontains=text)
    return list(
        get_user_model().objects.filter(matches, is_active=True).order_by("username")[
            :SEARCH_LIMIT
        ]
    )


def _role(role) -> str:
    if role not in Role.values:
        raise PeopleError(f"The role must be one of {', '.join(Role.values)}.", field="role")
    return role


def people_of(node, role: str):
    """The node's relation for ``role``: its managers, members or reviewers."""
    return getattr(node, f"{_role(role)}s")


def _require_manager(user, node):
    if not can_manage_people(user, node):
        raise PermissionDenied(f"You do not manage {node.path} or a budget above it.")


def record_membership_change(node, person, role, action, user, reason, outcome=""):
    MembershipChange.objects.create(
        node=node,
        person=person,
        person_name=person.get_username(),
        role=role,
        action=action,
        changed_by=user,
        changed_by_name=user.get_username(),
        reason=reason,
        outcome=outcome,
    )


def add_person(user, node, person, role, *, reason="") -> MembershipChange:
    """Give ``person`` (a user, or a username or email to find) ``role`` on ``node``."""
    _require_manager(user, node)
    role = _role(role)
    if not hasattr(person, "pk"):
        person = find_person(person)
    with transaction.atomic():
        node = BudgetNode.objects.select_for_update().get(pk=node.pk)
        if people_of(node, role).filter(pk=person.pk).exists():
            raise PeopleError(
                f"{person.get_username()} is already a {role} of {node.name}.", field="person"
            )
        people_of(node, role).add(person)
        record_membership_change(node, person, role, MembershipChange.Action.ADDED, user,
                                 reason.strip())
    return node.membership_changes.first()


def remove_person(user, node, person, role, *, reason="", move_to=None) -> MembershipChange:
    """Take ``role`` on ``node`` from ``person``. A leaving member's pending work charged to the
    node is cancelled, or moved to ``move_to`` (a leaf the remover manages)."""
    _require_manager(user, node)
    role = _role(role)
    if not hasattr(person, "pk"):
        person = find_person(person)
    if move_to is not None:
        if role != Role.MEMBER:
            raise PeopleError("Only a leaving member's work can be moved.", field="move_to")
        if move_to.pk == node.pk:
            raise PeopleError("Move the work to another budget than the one left.",
                              field="move_to")
        if move_to.children.exists():
            raise PeopleError(
                f"{move_to.path} is not a leaf budget: move the work to one of its projects "
                "or researchers.", field="move_to",
            )
        if not roles(user).manages(move_to.path):
            raise PermissionDenied(f"You do not manage {move_to.path}.")
    with transaction.atomic():
        node = BudgetNode.objects.select_for_update().get(pk=node.pk)
        holders = people_of(node, role)
        if not holders.filter(pk=person.pk).exists():
            raise PeopleError(
                f"{person.get_username()} is not a {role} of {node.name}.", field="person"
            )
        if role == Role.MANAGER and holders.count() == 1:
            raise PeopleError(
                f"{person.get_username()} is the last manager of {node.name}: add another "
                "manager first.", field="person",
            )
        outcome = ""
        if role == Role.MEMBER:
            answers = member_leaving.send(
                sender=BudgetNode, node=node, person=person, by=user, move_to=move_to,
                reason=reason.strip(),
            )
            outcome = "; ".join(answer for _, answer in answers if answer)
        holders.remove(person)
        record_membership_change(node, person, role, MembershipChange.Action.REMOVED, user,
                                 reason.strip(), outcome)
    return node.membership_changes.first()
