from django.urls import path
from rest_framework.routers import SimpleRouter

from budgets.api import views

router = SimpleRouter()
router.register("budgets", views.BudgetViewSet, basename="budget")
router.register("requests", views.ChangeRequestViewSet, basename="request")

urlpatterns = [
    path("people/", views.people_search, name="people-search"),
    *router.urls,
]
