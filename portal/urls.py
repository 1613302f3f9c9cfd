from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from portal import metrics, views

urlpatterns = [
    path("", views.home, name="home"),
    path("settings/", views.user_settings, name="settings"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("budgets/", include("budgets.urls")),
    path("reports/", include("reports.urls")),
    path("notifications/", include("notifications.urls")),
    path("", include("scheduler.urls")),
    path("api/", include("portal.api.urls")),
    path("metrics", metrics.metrics, name="metrics"),
    path("admin/", admin.site.urls),
]
