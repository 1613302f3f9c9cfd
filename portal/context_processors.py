from budgets.models import ChangeRequest
from budgets.permissions import roles
from notifications.services import unread_count


def navigation(request):
    """What the navigation links to: only the pages this user may open (each flag mirrors the
    check of the views behind the link)."""
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {}
    pending = ChangeRequest.objects.restrict(user, "decide").count()
    who = roles(user)  # computed by the line above already (cached on the user)
    return {
        "pending_decisions": pending,
        # budgets.views._require_role, scheduler.permissions.can_view_fleet
        "may_budgets": who.any,
        "may_fleet": who.any,
        # reports.permissions.require_budget_rows: a budget they manage or belong to
        "may_reports": who.superuser or bool(who.managed or who.member_of),
        "may_what_if": who.superuser or bool(who.managed),  # reports.permissions.require_what_if
        # budgets.permissions.can_follow_reviews
        "may_reviews": who.superuser or bool(who.managed or who.reviewing),
    }


def notifications(request):
    """The bell's count of unread notifications."""
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {}
    return {"unread_notifications": unread_count(user)}
