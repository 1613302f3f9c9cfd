from django import template

from scheduler.engine.wording import quantity
from scheduler.forms import format_duration

register = template.Library()


@register.filter
def count(number, noun):
    """``{{ cluster.gpu_count|count:"GPU" }}``: "1 GPU", "8 GPUs" (scheduler.engine.wording)."""
    return quantity(number, noun)


@register.filter
def hmm(seconds):
    """Seconds as h:mm (e.g. 5400 -> "1:30")."""
    return format_duration(seconds) if seconds is not None else ""


@register.filter
def span(seconds):
    """Seconds as people say them: "15 s", "30 min", "1 h 30 min", "8 h" (the demo's replayed
    minimum runtimes are seconds long, which h:mm shows as a misleading "0:00")."""
    if seconds is None:
        return ""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours} h"] if hours else []
    if minutes:
        parts.append(f"{minutes} min")
    if secs and not hours:
        parts.append(f"{secs} s")
    return " ".join(parts) or "0 s"
