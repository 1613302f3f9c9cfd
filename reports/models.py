from django.conf import settings
from django.db import models
from django.utils import timezone


class WhatIf(models.Model):
    """One what-if replay: the last `days` of real submissions of a cluster through the
    simulator with other parameters. The Celery task claims it, reports its progress here
    (the page polls this row) and stores the comparison as JSON."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE,
                                related_name="what_ifs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                     related_name="what_ifs")
    created = models.DateTimeField(default=timezone.now)
    # {"days", "window", "max_min_runtime", "hysteresis", "shares": {path: shares}}
    params = models.JSONField(default=dict)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    progress = models.FloatField(default=0.0, help_text="0 to 1")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(progress__gte=0, progress__lte=1),
                                   name="what_if_progress_0_to_1"),
        ]

    def __str__(self):
        return f"what-if #{self.pk} on {self.cluster_id} ({self.state})"

    @property
    def active(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)
