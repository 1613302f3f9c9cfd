from django.urls import path

from notifications import views

app_name = "notifications"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("read-all/", views.read_all, name="read_all"),
    path("preferences/", views.preferences, name="preferences"),
    path("<int:pk>/", views.open_notification, name="open"),
    path("<int:pk>/toggle-read/", views.toggle_read, name="toggle_read"),
]
