"""Who may see and act on workloads and hosts: the one place views, API and tasks ask.

- A researcher sees their own workloads and those charged to budgets they are a member of.
- A manager sees every workload charged inside the subtree they manage (the CEO: all).
- Operators see every workload and every host (draining, repairing and returning hosts is
  their right too: ``fleet.permissions.can_operate``).
- Cancelling: the owner, a manager above the budget, or an operator.
- Hosts and cluster pages: anyone with a role reads them; outsiders read nothing.
"""

from django.db.models import Q

from budgets.paths import PATH_SEPARATOR
from budgets.permissions import has_role, roles
from scheduler.models import Workload


def restrict_workloads(queryset, user):
    who = roles(user)
    if who.superuser or who.operator:
        return queryset
    if not user.is_authenticated:
        return queryset.none()
    return queryset.filter(Q(owner=user) | _my_budgets(who))


def visible_workload_ids(user, workload_ids) -> set[int]:
    """Which of these workloads the user may see (one query): pages that show other
    people's work, such as the hosts pages, name only these."""
    return set(restrict_workloads(Workload.objects.filter(pk__in=workload_ids), user)
               .values_list("pk", flat=True))


def within_my_budgets(queryset, user):
    """Workloads charged to budgets the user belongs to or manages ("my projects"), for
    operators too; narrows a queryset already restricted by restrict_workloads."""
    if not user.is_authenticated:
        return queryset.none()
    return queryset.filter(_my_budgets(roles(user)))


def _my_budgets(who) -> Q:
    condition = Q(budget__path__in=who.member_of)
    for path in who.managed:
        condition |= Q(budget__path=path) | Q(budget__path__startswith=path + PATH_SEPARATOR)
    return condition


def can_cancel(user, workload) -> bool:
    who = roles(user)
    return (
        workload.owner_id == user.pk
        or who.operator
        or who.manages(workload.budget.path)
    )


def can_charge(user, budget) -> bool:
    """Members of a leaf charge workloads to it."""
    return roles(user).superuser or budget.path in roles(user).member_of


def can_view_fleet(user) -> bool:
    return has_role(user)
