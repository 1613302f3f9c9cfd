from django.contrib import admin

from budgets.models import Allocation, AllocationChange, BudgetNode, ChangeRequest


@admin.register(BudgetNode)
class BudgetNodeAdmin(admin.ModelAdmin):
    list_display = ["path", "name", "kind"]
    search_fields = ["path", "name"]
    filter_horizontal = ["managers", "members"]


@admin.register(Allocation)
class AllocationAdmin(admin.ModelAdmin):
    """Read-only: shares change through the portal so that every change is audited."""

    list_display = ["node", "cluster", "shares", "version", "updated"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AllocationChange)
class AllocationChangeAdmin(admin.ModelAdmin):
    list_display = ["at", "node", "cluster", "old_shares", "new_shares", "changed_by_name"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ChangeRequest)
class ChangeRequestAdmin(admin.ModelAdmin):
    list_display = ["pk", "node", "cluster", "requested_shares", "state", "requested_by"]

    def has_change_permission(self, request, obj=None):
        return False
