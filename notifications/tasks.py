"""Email leaves here, through Django's email framework (SMTP in production, a file or the
console under `make run`), retried with backoff when the mail server is unreachable."""

import smtplib
from collections import defaultdict
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone

from budgets.models import Allocation
from notifications.kinds import EXPIRY_WARNING_DAYS, Kind, Timing
from notifications.models import Notification

SUBJECT_PREFIX = "[Timeshare] "


def absolute(link: str) -> str:
    return settings.TIMESHARE_BASE_URL.rstrip("/") + link


def _text(notification) -> str:
    body = f"{notification.body}\n\n" if notification.body else ""
    return f"{notification.title}\n\n{body}{absolute(notification.link)}\n"


@shared_task(
    name="notifications.send_email", ignore_result=True,
    autoretry_for=(smtplib.SMTPException, OSError), retry_backoff=30, retry_backoff_max=3600,
    max_retries=8,
)
def send_notification_email(notification_id: int) -> bool:
    """Send one notification by email, once (a retry after success sends nothing)."""
    notification = (
        Notification.objects.select_related("recipient").filter(
            pk=notification_id, emailed_at=None
        ).exclude(email="").first()
    )
    if notification is None or not notification.recipient.email:
        return False
    send_mail(SUBJECT_PREFIX + notification.title, _text(notification), None,
              [notification.recipient.email])
    Notification.objects.filter(pk=notification.pk).update(emailed_at=timezone.now())
    return True


@shared_task(
    name="notifications.send_digests", ignore_result=True,
    autoretry_for=(smtplib.SMTPException, OSError), retry_backoff=60, max_retries=8,
)
def send_daily_digests() -> int:
    """One email per person with everything they chose to read as a daily digest."""
    waiting = defaultdict(list)
    for notification in Notification.objects.filter(
        email=Timing.DIGEST, emailed_at=None
    ).select_related("recipient").order_by("created", "id"):
        waiting[notification.recipient].append(notification)
    sent = 0
    for user, notifications in waiting.items():
        if not user.email:
            continue
        count = len(notifications)
        subject = f"{SUBJECT_PREFIX}{count} notification{'s' if count != 1 else ''} today"
        text = "\n\n".join(
            f"{n.created:%Y-%m-%d %H:%M} {n.title}\n{n.body + chr(10) if n.body else ''}"
            f"{absolute(n.link)}" for n in notifications
        )
        send_mail(subject, text + "\n", None, [user.email])
        Notification.objects.filter(pk__in=[n.pk for n in notifications]).update(
            emailed_at=timezone.now()
        )
        sent += 1
    return sent


@shared_task(name="notifications.warn_expiring_allocations", ignore_result=True)
def warn_expiring_allocations(now=None) -> int:
    """The managers of a budget whose allocation expires within a week are told, once (a
    conditional update claims each allocation); without managers, those of the nearest
    ancestor that has some."""
    from notifications.services import notify

    now = now or timezone.now()
    soon = now + timedelta(days=EXPIRY_WARNING_DAYS)
    warned = 0
    for allocation in Allocation.objects.filter(
        expires_at__gt=now, expires_at__lte=soon, expiry_warned_at=None
    ).select_related("node", "node__parent", "cluster"):
        claimed = Allocation.objects.filter(pk=allocation.pk, expiry_warned_at=None).update(
            expiry_warned_at=now
        )
        if not claimed:
            continue
        node = allocation.node
        notify(
            Kind.ALLOCATION_EXPIRING, node.nearest_managers(),
            title=f"The allocation of {node.path} on {allocation.cluster.name} expires on "
            f"{allocation.expires_at:%Y-%m-%d %H:%M} UTC",
            body=f"{allocation.shares} shares; then its share returns to its siblings and its "
            "pending allocated work can no longer run allocated. Ask for a renewal before.",
            link=reverse("budgets:node", kwargs={"pk": node.pk}),
        )
        warned += 1
    return warned
