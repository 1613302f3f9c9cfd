from django import template

from scheduler.forms import format_duration

register = template.Library()


@register.filter
def hmm(seconds):
    """Seconds as h:mm (e.g. 5400 -> "1:30")."""
    return format_duration(seconds) if seconds is not None else ""
