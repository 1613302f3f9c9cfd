from rest_framework.routers import SimpleRouter

from budgets.api import views

router = SimpleRouter()
router.register("budgets", views.BudgetViewSet, basename="budget")
router.register("requests", views.ChangeRequestViewSet, basename="request")

urlpatterns = [
    *router.urls,
]
