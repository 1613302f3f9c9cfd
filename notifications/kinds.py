"""The kinds of notification, who gets them by default and how."""

from django.db import models


class Kind(models.TextChoices):
    WORKLOAD_STARTED = "workload_started", "Your workload started"
    WORKLOAD_PREEMPTED = "workload_preempted", "Your workload was preempted"
    WORKLOAD_FINISHED = "workload_finished", "Your workload finished"
    WORKLOAD_FAILED = "workload_failed", "Your workload failed"
    WORKLOAD_CANCELLED = "workload_cancelled", "Someone else cancelled your workload"
    REQUEST_FILED = "request_filed", "A request waits for your decision"
    REQUEST_DECIDED = "request_decided", "Your request was decided"
    REQUEST_COMMENTED = "request_commented", "A comment on a request you follow"
    ALLOCATION_EXPIRING = "allocation_expiring", "An allocation you manage expires soon"
    ALLOCATION_EXPIRED = "allocation_expired", "An allocation you manage or use expired"
    REVIEW_DUE = "review_due", "A budget review waits for you"
    REVIEW_OVERDUE = "review_overdue", "A budget review is overdue"
    RUN_IDLE = "run_idle", "Your workload's GPUs sit idle"
    HOST_ESCALATED = "host_escalated", "A host needs a human (operators)"


class Channel(models.TextChoices):
    IN_APP = "in_app", "In the app"
    EMAIL = "email", "By email"
    BOTH = "both", "Both"
    NONE = "none", "Not at all"


class Timing(models.TextChoices):
    IMMEDIATE = "immediate", "At once"
    DIGEST = "digest", "Daily digest"


# Researchers hear of what breaks their work (preemptions, failures, someone else's cancel,
# an expired allocation) and of GPUs they hold idle by email too, managers of requests and
# reviews to decide; the rest stays in the app.
DEFAULT_CHANNEL = {
    Kind.WORKLOAD_STARTED: Channel.IN_APP,
    Kind.WORKLOAD_PREEMPTED: Channel.BOTH,
    Kind.WORKLOAD_FINISHED: Channel.IN_APP,
    Kind.WORKLOAD_FAILED: Channel.BOTH,
    Kind.WORKLOAD_CANCELLED: Channel.BOTH,
    Kind.REQUEST_FILED: Channel.BOTH,
    Kind.REQUEST_DECIDED: Channel.BOTH,
    Kind.REQUEST_COMMENTED: Channel.IN_APP,
    Kind.ALLOCATION_EXPIRING: Channel.BOTH,
    Kind.ALLOCATION_EXPIRED: Channel.BOTH,
    Kind.REVIEW_DUE: Channel.BOTH,
    Kind.REVIEW_OVERDUE: Channel.BOTH,
    Kind.RUN_IDLE: Channel.BOTH,
    Kind.HOST_ESCALATED: Channel.BOTH,
}

EXPIRY_WARNING_DAYS = 7
