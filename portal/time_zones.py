"""Times are shown in each user's time zone: the one set on their settings page, else the one
their browser reports (static/js/timeshare.js keeps it in the ``tz`` cookie), else the
portal's TIME_ZONE. Only how a moment is shown changes (``request.time_zone``, read by the
``when`` template tag); Django's current time zone stays TIME_ZONE, so that periods, buckets
and "today" in the reports are the institute's and a review meeting sees one set of numbers.

The chosen zone lives in the session from login on (one query at login, none per page)."""

import zoneinfo
from functools import cache

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.utils import timezone

from portal.models import UserSettings

SESSION_KEY = "time_zone"
BROWSER_COOKIE = "tz"


@cache
def zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def valid(name: str | None) -> bool:
    return bool(name) and name in zone_names()


def browser_zone(request) -> str | None:
    name = request.COOKIES.get(BROWSER_COOKIE, "")
    return name if valid(name) else None


def chosen_zone(request) -> str | None:
    """The zone this request shows times in; None: the portal's TIME_ZONE."""
    saved = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
    return saved if valid(saved) else browser_zone(request)


class TimeZoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        name = chosen_zone(request)
        request.time_zone = zoneinfo.ZoneInfo(name) if name else timezone.get_default_timezone()
        return self.get_response(request)


@receiver(user_logged_in)
def remember_zone(sender, request, user, **kwargs):
    saved = UserSettings.objects.filter(user=user).values_list("time_zone", flat=True).first()
    if request is not None and hasattr(request, "session"):
        if saved:
            request.session[SESSION_KEY] = saved
        else:
            request.session.pop(SESSION_KEY, None)
