"""DRF permission classes that ask the apps' permission modules (never their own rules)."""

from rest_framework.permissions import BasePermission

from scheduler.permissions import can_operate, can_view_fleet


class HasRole(BasePermission):
    """Anyone with a role in the organisation (manager, member, operator); not outsiders."""

    message = "You have no role in this organisation."

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated and can_view_fleet(request.user))


class IsOperator(BasePermission):
    message = "Only operators drain, repair and return hosts."

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated and can_operate(request.user))
