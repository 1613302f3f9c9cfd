from django.conf import settings
from django.db import models
from django.utils import timezone


class WhatIfComparison(models.Model):
    """Several parameter sets replayed over the same days, side by side: one ``WhatIf`` per
    set, all queued at once as one Celery group (a task per set, as many running together as
    the workers have processes), each reporting its own progress."""

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE,
                                related_name="what_if_comparisons")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                     related_name="what_if_comparisons")
    created = models.DateTimeField(default=timezone.now)
    days = models.PositiveSmallIntegerField(default=7)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"what-if comparison #{self.pk} on {self.cluster_id}"


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
    # {"days", "window", "max_min_runtime", "grace", "hysteresis", "shares": {path: shares}}
    params = models.JSONField(default=dict)
    # the comparison this replay is one parameter set of, if any
    comparison = models.ForeignKey(WhatIfComparison, on_delete=models.CASCADE, null=True,
                                   blank=True, related_name="sets")
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


class ReportSubscription(models.Model):
    """A user's choice about the scheduled review report. No row: subscribed (every manager
    and reviewer gets the report of their subtree); the unsubscribe link leads to the page
    that writes this row. The notification preferences of other messages live elsewhere."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                primary_key=True, related_name="report_subscription")
    weekly_review = models.BooleanField(default=True)
    changed = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.user_id}: {'subscribed' if self.weekly_review else 'unsubscribed'}"


class ReportDelivery(models.Model):
    """The review report of one period sent to one user: the row is the claim (created before
    sending, unique per user and period), so two beat workers never send it twice."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    period_start = models.DateTimeField()
    sent = models.DateTimeField(default=timezone.now)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "period_start"],
                                    name="one_review_delivery_per_user_and_period"),
        ]

    def __str__(self):
        return f"review of {self.period_start:%Y-%m-%d} to {self.user_id}"
