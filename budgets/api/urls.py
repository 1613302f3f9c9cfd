from django.urls import path
from rest_framework.routers import SimpleRouter

from budgets.api import views

router = SimpleRouter()
router.register("budgets", views.BudgetViewSet, basename="budget")
router.register("requests", views.ChangeRequestViewSet, basename="request")
router.register("reviews", views.ReviewCycleViewSet, basename="review")
router.register("review-items", views.ReviewItemViewSet, basename="review-item")

urlpatterns = [
    path("people/", views.people_search, name="people-search"),
    *router.urls,
]
