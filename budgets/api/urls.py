from django.urls import path
from rest_framework.routers import SimpleRouter

from budgets.api import views

router = SimpleRouter()
router.register("budgets", views.BudgetViewSet, basename="budget")
router.register("requests", views.ChangeRequestViewSet, basename="request")

urlpatterns = [
    path("budgets/", views.BudgetTreeView.as_view(), name="budget-tree"),
    *router.urls,
    path("usage/", views.UsageView.as_view(), name="usage"),
]
