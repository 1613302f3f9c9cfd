"""Email leaves here, through Django's email framework (SMTP in production, a file or the
console under `make run`), retried with backoff when the mail server is unreachable."""

import smtplib
from collections import defaultdict

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from notifications.kinds import Timing
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



