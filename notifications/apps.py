from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self):
        # The layers below announce what happened through signals; the receivers turn it
        # into notifications.
        from notifications import receivers  # noqa: F401
