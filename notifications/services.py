"""Telling people what happened: one notification per recipient, in the inbox and/or by
email as each recipient prefers. Emails leave through Celery tasks after the commit, so a
slow or failing mail server never holds up the tick or the form that caused them."""

import logging
from functools import partial

from django.db import transaction
from django.utils import timezone

from notifications.kinds import DEFAULT_CHANNEL, Channel, Kind, Timing
from notifications.models import Notification, Preference

log = logging.getLogger(__name__)

TITLE_MAX = Notification._meta.get_field("title").max_length


def preferences_of(user) -> dict[str, tuple[str, str]]:
    """kind -> (channel, timing) for every kind: the user's choice, else the default."""
    chosen = {p.kind: (p.channel, p.timing) for p in Preference.objects.filter(user=user)}
    return {kind: chosen.get(kind, (DEFAULT_CHANNEL[kind], Timing.IMMEDIATE)) for kind in Kind}


def set_preference(user, kind, channel, timing) -> Preference:
    if kind not in Kind.values or channel not in Channel.values or timing not in Timing.values:
        raise ValueError(f"unknown preference {kind}/{channel}/{timing}")
    preference, _ = Preference.objects.update_or_create(
        user=user, kind=kind, defaults={"channel": channel, "timing": timing}
    )
    return preference


def notify(kind, recipients, *, title, body="", link) -> list[Notification]:
    """Tell each recipient (a user; duplicates and inactive users dropped) as they prefer."""
    created = []
    seen = set()
    for user in recipients:
        if user is None or user.pk in seen or not user.is_active:
            continue
        seen.add(user.pk)
        channel, timing = preferences_of(user)[kind]
        in_app = channel in (Channel.IN_APP, Channel.BOTH)
        by_email = channel in (Channel.EMAIL, Channel.BOTH) and bool(user.email)
        if not (in_app or by_email):
            continue
        notification = Notification.objects.create(
            recipient=user, kind=kind, title=title[:TITLE_MAX], body=body, link=link,
            in_app=in_app, email=timing if by_email else "",
        )
        created.append(notification)
        if by_email and timing == Timing.IMMEDIATE:
            transaction.on_commit(partial(_queue_email, notification.pk), robust=True)
    return created


def _queue_email(notification_id: int) -> None:
    from notifications.tasks import send_notification_email

    send_notification_email.delay(notification_id)


def inbox(user):
    return Notification.objects.filter(recipient=user, in_app=True)


def unread_count(user) -> int:
    return inbox(user).filter(read_at=None).count()


def mark_read(user, ids=None) -> int:
    """Mark the user's notifications ``ids`` (all when None) read; returns how many changed."""
    unread = inbox(user).filter(read_at=None)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    return unread.update(read_at=timezone.now())


def mark_unread(user, ids) -> int:
    return inbox(user).filter(pk__in=ids).exclude(read_at=None).update(read_at=None)


def after_commit(function, *args, **kwargs) -> None:
    """Run ``function`` once the current transaction commits, logging (never raising) its
    failure: a notification that cannot be written never undoes what it is about."""

    def run():
        try:
            with transaction.atomic():
                function(*args, **kwargs)
        except Exception:
            log.exception("notification %s failed", getattr(function, "__name__", function))

    transaction.on_commit(run, robust=True)
