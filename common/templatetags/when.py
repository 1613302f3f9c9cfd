"""Timestamps as people read them: in the viewer's time zone (``request.time_zone``, set by
portal.time_zones; the portal's TIME_ZONE where there is no request, as in emails), labelled
with that zone, with how long ago (or how soon) as a hint beside.

    {% load when %}
    {% when workload.submitted %}         2026-11-30 10:12 CET · 3 h ago
    {% when event.at seconds=True %}      2026-11-30 10:12:03 CET · 3 h ago
    {% when run.protected_until ago=False %}
    <th>When ({% zone %})</th>
"""

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html

register = template.Library()

MINUTE, HOUR, DAY = 60, 3600, 86400


def relative(moment: datetime, now: datetime) -> str:
    """ "just now", "12 min ago", "3 h ago", "2 days ago"; "in 40 min" for what is to come."""
    seconds = (now - moment).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    if seconds < MINUTE:
        return "just now"
    if seconds < HOUR:
        amount = f"{int(seconds // MINUTE)} min"
    elif seconds < 2 * DAY:
        amount = f"{int(seconds // HOUR)} h"
    else:
        amount = f"{int(seconds // DAY)} days"
    return f"in {amount}" if future else f"{amount} ago"


def zone_label(moment: datetime) -> str:
    """The zone's abbreviation at that moment ("CET", "UTC"), else its offset ("UTC+0530")."""
    label = moment.strftime("%Z")
    return label if label and label[0] not in "+-" else f"UTC{moment:%z}"


def viewer_zone(context):
    request = context.get("request")
    return getattr(request, "time_zone", None) or timezone.get_default_timezone()


def _when(zone, moment, seconds=False, ago=True):
    if moment is None:
        return ""
    local = timezone.localtime(moment, zone)
    shown = local.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")
    title = f"{local:%Y-%m-%d %H:%M:%S} {zone} (UTC{local:%z})"
    label = format_html('<time datetime="{}" title="{}">{} {}</time>', moment.isoformat(),
                        title, shown, zone_label(local))
    if not ago:
        return label
    return format_html('{} <span class="ago">· {}</span>', label,
                       relative(moment, timezone.now()))


@register.simple_tag(takes_context=True)
def when(context, moment, seconds=False, ago=True):
    return _when(viewer_zone(context), moment, seconds, ago)


@register.simple_tag(takes_context=True)
def current_time(context):
    return _when(viewer_zone(context), timezone.now(), ago=False)


@register.simple_tag(takes_context=True)
def zone(context):
    """The viewer's zone, for a column of times: its abbreviation now, the full name on hover."""
    zone = viewer_zone(context)
    return format_html('<abbr title="{}">{}</abbr>', zone,
                       zone_label(timezone.localtime(timezone.now(), zone)))
