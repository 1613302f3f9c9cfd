from django.urls import path
from rest_framework.routers import SimpleRouter

from scheduler.api import views

router = SimpleRouter()
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("hosts", views.HostViewSet, basename="host")

urlpatterns = [
    path("budgets/", views.BudgetTreeView.as_view(), name="budget-tree"),
    *router.urls,
]
