"""DRF permission classes built from the apps' permission functions (never rules of their
own): each app keeps its rules in its ``permissions`` module and wraps them here."""

from rest_framework.permissions import BasePermission


def permission_for(rule, message: str, name: str) -> type[BasePermission]:
    """A permission class that lets in authenticated users for whom ``rule(user)`` holds, and
    answers the others 403 with ``message``."""

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated and rule(request.user))

    return type(name, (BasePermission,), {"message": message, "has_permission": has_permission})
