from budgets.models import ChangeRequest


def navigation(request):
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {}
    return {
        "pending_decisions": ChangeRequest.objects.restrict(user, "decide").count(),
    }
