"""The dashboards' ranges and the bucket still filling.

"Last week" is the last 7 complete days (up to this midnight, not tomorrow's); the last day's
hourly chart ends with the current hour, drawn shaded as "in progress, so far" rather than as
a drop to zero."""

from datetime import datetime, timedelta
from types import SimpleNamespace

import plotly.graph_objects as go
import pytest
from django.utils import timezone

from reports import charts
from reports.forms import RangeForm

NOW = timezone.make_aware(datetime(2025, 3, 5, 14, 25), timezone.get_current_timezone())
MIDNIGHT = NOW.replace(hour=0, minute=0)


def bounds(**data):
    form = RangeForm(data)
    return form.bounds(NOW)


@pytest.mark.parametrize(("choice", "days"), [("week", 7), ("month", 30)])
def test_last_week_and_month_are_complete_days(choice, days):
    start, end, _ = bounds(range=choice)
    assert (start, end) == (MIDNIGHT - timedelta(days=days), MIDNIGHT)


def test_the_last_day_runs_to_the_end_of_the_current_hour():
    start, end, _ = bounds(range="day")
    assert end == NOW.replace(hour=15, minute=0)
    assert end - start == timedelta(days=1)


def shaded(figure):
    return [(s["x0"], s["x1"]) for s in figure["layout"].get("shapes", [])]


def test_the_current_hour_is_drawn_in_progress():
    start, end, _ = bounds(range="day")
    figure = charts.occupancy([], span=charts.Span(start, end, NOW))
    assert shaded(figure) == [("2025-03-05 14:00", "2025-03-05 15:00")]
    assert figure["layout"]["annotations"][0]["text"] == "in progress, so far"


def test_complete_days_have_nothing_in_progress():
    start, end, _ = bounds(range="week")
    figure = charts.preemptions([], [], [], span=charts.Span(start, end, NOW))
    assert shaded(figure) == []
    assert "annotations" not in figure["layout"]


def test_a_custom_range_ending_today_shades_today():
    start, end, _ = bounds(range="custom", start="2025-03-01", end="2025-03-05")
    figure = charts.host_events([], {}, span=charts.Span(start, end, NOW))
    assert shaded(figure) == [("2025-03-05 00:00", "2025-03-06 00:00")]


def hourly(start, end):
    times, t = [], start
    while t < end:
        times.append(t)
        t += timedelta(hours=1)
    return times


def budget_figure(choice, values_of):
    """The budgets chart of one budget delivering 10 GPU-h each hour, 2.5 so far in the hour
    still filling."""
    start, end, _ = bounds(range=choice)
    times = hourly(start, min(end, NOW))
    a1 = SimpleNamespace(pk=1, name="A1")
    delivered = [values_of(t) for t in times]
    figure = charts.budgets(times, [a1], {1: {"delivered": delivered,
                                              "entitlement": delivered}},
                            span=charts.Span(start, end, NOW))
    go.Figure(figure)  # a valid plotly figure
    return figure


def so_far(t):
    return 2.5 if t == NOW.replace(minute=0) else 10.0


def test_the_budget_lines_stop_before_the_hour_still_filling():
    figure = budget_figure("day", so_far)
    lines = [t for t in figure["data"] if t["mode"] == "lines"]
    assert [t["name"] for t in lines] == ["A1 delivered", "A1 entitlement"]
    for line in lines:
        assert line["x"][-1] == "2025-03-05 14:00"
        assert line["y"][-1] is None
        assert set(line["y"][:-1]) == {10.0}


def test_the_hour_still_filling_is_drawn_as_open_markers():
    figure = budget_figure("day", so_far)
    markers = [t for t in figure["data"] if t["mode"] == "markers"]
    assert [(t["x"], t["y"]) for t in markers] == [(["2025-03-05 14:00"], [2.5])] * 2
    assert all(not t["showlegend"] and t["marker"]["symbol"].endswith("-open")
               for t in markers)


def test_complete_days_draw_every_bucket_on_the_line():
    figure = budget_figure("week", lambda t: 10.0)
    assert all(t["mode"] == "lines" and None not in t["y"] for t in figure["data"])
