from budgets.models import ChangeRequest
from budgets.permissions import roles
from notifications.services import unread_count


def navigation(request):
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {}
    pending = ChangeRequest.objects.restrict(user, "decide").count()
    who = roles(user)  # computed by the line above already (cached on the user)
    return {
        "pending_decisions": pending,
        "may_what_if": who.superuser or bool(who.managed),  # reports.permissions.require_what_if
    }


def notifications(request):
    """The bell's count of unread notifications."""
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {}
    return {"unread_notifications": unread_count(user)}
