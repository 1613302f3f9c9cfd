from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from notifications.kinds import Channel, Kind, Timing


class Notification(models.Model):
    """One thing one person is told: shown in the inbox (``in_app``) and/or sent by email
    (at once, or in the daily digest)."""

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=30, choices=Kind.choices)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=300, help_text="Path of the page it is about.")
    created = models.DateTimeField(default=timezone.now, db_index=True)
    in_app = models.BooleanField(default=True)
    read_at = models.DateTimeField(null=True, blank=True)
    email = models.CharField(
        max_length=10, blank=True, choices=Timing.choices, help_text="Empty: no email."
    )
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(
                fields=["recipient", "created"], condition=Q(in_app=True, read_at=None),
                name="notification_unread",
            ),
        ]

    def __str__(self):
        return f"{self.recipient} {self.kind}: {self.title}"


class Preference(models.Model):
    """How a person wants one kind of notification; without a row, the kind's default."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_prefs"
    )
    kind = models.CharField(max_length=30, choices=Kind.choices)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    timing = models.CharField(max_length=10, choices=Timing.choices, default=Timing.IMMEDIATE)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind"], name="one_preference_per_kind"),
        ]

    def __str__(self):
        return f"{self.user} {self.kind}: {self.channel}, {self.timing}"
