"""Who sees which report rows and dashboards: asked by every reports view, nowhere else.

- Budget figures (review report, usage vs entitlement): the nodes the budgets app lets the
  user read the history of: the CEO (manager of the root) all, a manager their subtree, a
  member the budgets they belong to. Nobody else.
- Cluster-wide figures (the pyramid, occupancy, queue, fleet): anyone with a role, like the
  hosts pages. Outsiders see nothing.
"""

from django.core.exceptions import PermissionDenied

from budgets.models import BudgetNode
from budgets.permissions import roles
from scheduler.permissions import can_view_fleet


def visible_node_ids(user) -> set[int]:
    return set(BudgetNode.objects.restrict(user, "history").values_list("pk", flat=True))


def require_budget_rows(user) -> set[int]:
    """The node ids the user may see figures of; PermissionDenied when there are none."""
    visible = visible_node_ids(user) if can_view_fleet(user) else set()
    if not visible:
        raise PermissionDenied("You neither manage nor belong to a budget.")
    return visible


def require_dashboards(user) -> None:
    if not can_view_fleet(user):
        raise PermissionDenied("You have no role in this organisation.")


def require_what_if(user) -> None:
    """What-ifs are for managers (and the CEO, the root's manager)."""
    who = roles(user)
    if not (who.superuser or who.managed):
        raise PermissionDenied("What-ifs are for budget managers.")


def changeable_nodes(user):
    """The nodes whose shares a user may change in a what-if, as in the budgets app: every
    node strictly below one they manage."""
    return BudgetNode.objects.restrict(user, "change")


def may_see_what_if(user, what_if) -> bool:
    who = roles(user)
    return (what_if.requested_by_id == user.pk or who.superuser
            or any("/" not in path for path in who.managed))  # the CEO sees every what-if
