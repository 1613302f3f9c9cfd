"""Plotly figures built in Python from the series the report modules compute
(`reports.pyramid`, `reports.budget_history`, `reports.queue_statistics`,
`reports.fleet_statistics`).

Each function returns a plotly figure as plain data (``{"data": [...], "layout": {...}}``)
that the templates pass with ``json_script`` and the browser draws with ``Plotly.react``
(static/reports/charts.js). The figures are written as dicts rather than through
``plotly.graph_objects``: validating a figure and expanding a named template costs some 30 ms
each on the server and ships ~10 kB of template per chart; the tests check every figure with
``plotly.graph_objects.Figure`` instead.
"""

from datetime import datetime, timedelta
from typing import NamedTuple

from reports.accounting import step_for

COLORS = {
    "allocated": "#2563eb",
    "unallocated": "#93c5fd",
    "idle": "#e5e7eb",
    "unavailable": "#b91c1c",
    "availability": "#15803d",
    "impact": "#b45309",
    "utilization": "#7c3aed",
}
PALETTE = ["#2563eb", "#b45309", "#15803d", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#dc2626"]


GRID = {"gridcolor": "#e5e7eb", "zerolinecolor": "#d1d5db", "automargin": True}


def _layout(title: str, **extra) -> dict:
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
        "height": 300,
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"family": "system-ui, sans-serif", "color": "#1f2937"},
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "x unified",
        "xaxis": dict(GRID),
        "yaxis": dict(GRID),
    }
    for axis in ("xaxis", "yaxis"):
        layout[axis].update(extra.pop(axis, {}))
    layout.update(extra)
    return layout


def _x(times: list) -> list:
    """Bucket starts as plotly dates (UTC, no offset)."""
    return [t.strftime("%Y-%m-%d %H:%M") if isinstance(t, datetime) else t for t in times]


class Span(NamedTuple):
    """A chart's time range; ``now`` inside it means its last bucket is still filling."""

    start: datetime
    end: datetime
    now: datetime | None = None

    def partial_from(self) -> datetime | None:
        """Start of the bucket still in progress (chart buckets: accounting.step_for)."""
        if self.now is None or not self.start <= self.now < self.end:
            return None
        step, _ = step_for(self.start, self.end)
        return self.start + (self.now - self.start) // step * step


def _span(span) -> dict:
    """The x-axis of a time series: the whole selected range ``(start, end)``, whatever the
    data (one sample, or none, must not shrink it to a few milliseconds)."""
    if not span:
        return {"type": "date"}
    start, end = _x(list(span)[:2])
    return {"type": "date", "range": [start, end], "autorange": False}


def _in_progress(span) -> dict:
    """Layout marks for a bucket still filling: shaded and labelled "in progress, so far", so
    that its low total reads as partial and not as a drop to zero (an outage)."""
    partial = Span(*span).partial_from() if span and len(span) == 3 else None
    if partial is None:
        return {}
    x0, x1 = _x([partial, span[1]])
    return {
        "shapes": [{"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1,
                    "y0": 0, "y1": 1, "fillcolor": "#e5e7eb", "opacity": 0.5,
                    "line": {"width": 0}, "layer": "below"}],
        "annotations": [{"x": x0, "xref": "x", "y": 1, "yref": "paper", "xanchor": "left",
                         "yanchor": "bottom", "showarrow": False, "text": "in progress, so far",
                         "font": {"size": 10, "color": "#6b7280"}}],
    }


def _figure(layout: dict, traces: list[dict]) -> dict:
    return {"data": traces, "layout": layout}


def _round(values: list, digits: int = 2) -> list:
    return [None if v is None else round(v, digits) for v in values]


def pyramid_trend(days: list, series: dict[str, list], span=None) -> dict:
    """Daily availability, occupancy (allocated, unallocated), impact and utilization (when
    the fleet reports it), in percent; the
    x-axis spans the days shown (``span``, else the first day to the end of the last)."""
    if span is None and days:
        span = (days[0], days[-1] + timedelta(days=1))
    traces = [
        {"type": "scatter", "x": _x(days), "y": _round([None if v is None else 100 * v
                                                        for v in series[key]]),
         "name": name, "mode": "lines+markers", "line": {"color": color}}
        for key, name, color in [
            ("availability", "Availability", COLORS["availability"]),
            ("occupancy_allocated", "Occupancy: allocated", COLORS["allocated"]),
            ("occupancy_unallocated", "Occupancy: unallocated", COLORS["unallocated"]),
            ("impact", "Impact", COLORS["impact"]),
            ("utilization", "Utilization", COLORS["utilization"]),
        ]
        if key != "utilization" or any(v is not None for v in series.get(key, ()))
    ]
    return _figure(_layout("Last 14 days", yaxis={"ticksuffix": "%", "range": [0, 105]},
                           xaxis=_span(span)), traces)


def occupancy(points: list[dict], span=None) -> dict:
    """Stacked area: allocated, unallocated, idle and unavailable GPUs."""
    times = _x([p["at"] for p in points])
    traces = [
        {"type": "scatter", "x": times, "y": _round([p[key] for p in points]),
         "name": key.capitalize(), "stackgroup": "gpus", "mode": "lines",
         "line": {"width": 0.5, "color": COLORS[key]}}
        for key in ("allocated", "unallocated", "idle", "unavailable")
    ]
    return _figure(_layout("GPUs by state", yaxis={"title": {"text": "GPUs"}},
                           xaxis=_span(span), **_in_progress(span)), traces)


def _so_far(x: list, span) -> int | None:
    """Index of the bucket still filling, if the chart shows one."""
    partial = Span(*span).partial_from() if span and len(span) == 3 else None
    if partial is None:
        return None
    start = _x([partial])[0]
    return x.index(start) if start in x else None


def budgets(times: list, nodes: list, series: dict, span=None) -> dict:
    """Delivered (solid) vs entitlement (dotted) GPU-hours per bucket, one colour per node.

    A bucket still filling holds only the hours so far: its values are drawn as open markers
    apart from the lines, which end with the last complete bucket, so that the line does not
    dip into the shaded bucket as if the budget had stopped running."""
    x = _x(times)
    partial = _so_far(x, span)
    traces = []
    for index, node in enumerate(nodes):
        color = PALETTE[index % len(PALETTE)]
        data = series[node.pk]
        for key, label, dash in [("delivered", "delivered", "solid"),
                                 ("entitlement", "entitlement", "dot")]:
            values = _round(data[key])
            name = f"{node.name} {label}"
            line = list(values)
            if partial is not None:
                line[partial] = None
            traces.append({"type": "scatter", "x": x, "y": line, "name": name,
                           "legendgroup": name, "mode": "lines",
                           "line": {"color": color, "dash": dash}})
            if partial is not None:
                traces.append({
                    "type": "scatter", "x": [x[partial]], "y": [values[partial]],
                    "name": f"{name}, so far", "legendgroup": name, "showlegend": False,
                    "mode": "markers",
                    "marker": {"color": color, "symbol": "circle-open" if dash == "solid"
                               else "diamond-open", "size": 8},
                })
    return _figure(_layout("Delivered vs entitlement", yaxis={"title": {"text": "GPU-h"}},
                           xaxis=_span(span), **_in_progress(span)), traces)


def waits(classes: list[dict], title: str = "Queue wait by class (starts)",
          xtitle: str | None = None) -> dict:
    """Median and p95 queue wait per class (or ratio band), in minutes."""
    names = [f"{c['name']} ({c['count']})" for c in classes]
    traces = [
        {"type": "bar", "x": names,
         "y": [None if c[key] is None else round(c[key] / 60, 2) for c in classes],
         "name": label, "marker": {"color": color}}
        for key, label, color in [("median", "median", "#2563eb"), ("p95", "p95", "#b45309")]
    ]
    xaxis = {"title": {"text": xtitle}} if xtitle else {}
    return _figure(_layout(title, yaxis={"title": {"text": "minutes"}}, xaxis=xaxis,
                           barmode="group", hovermode="closest"), traces)


def pending(times: list, by_budget: dict[str, list], title: str, span=None) -> dict:
    """Mean pending GPUs per bucket, stacked, one area per budget."""
    x = _x(times)
    traces = [
        {"type": "scatter", "x": x, "y": _round(values), "name": name,
         "stackgroup": "pending", "mode": "lines",
         "line": {"color": PALETTE[index % len(PALETTE)]}}
        for index, (name, values) in enumerate(by_budget.items())
    ]
    return _figure(_layout(title, yaxis={"title": {"text": "GPUs"}}, xaxis=_span(span),
                           **_in_progress(span)), traces)


def preemptions(times: list, preempted: list, requeued: list, span=None) -> dict:
    x = _x(times)
    traces = [
        {"type": "bar", "x": x, "y": preempted, "name": "Preempted runs",
         "marker": {"color": "#b91c1c"}},
        {"type": "bar", "x": x, "y": requeued, "name": "Requeues",
         "marker": {"color": "#93c5fd"}},
    ]
    return _figure(_layout("Preemptions and requeues", barmode="group", xaxis=_span(span),
                           **_in_progress(span)), traces)


STATE_COLORS = {
    "AVAILABLE": "#15803d",
    "DRAINING": "#facc15",
    "DRAINED": "#f97316",
    "REPAIRING": "#7c3aed",
    "DOWN": "#b91c1c",
    "ESCALATED": "#1f2937",
}


def host_states(times: list, hosts_in: dict[str, list], span=None) -> dict:
    """Stacked area: mean hosts in each state per bucket."""
    x = _x(times)
    traces = [
        {"type": "scatter", "x": x, "y": _round(values), "name": state.capitalize(),
         "stackgroup": "hosts", "mode": "lines",
         "line": {"width": 0.5, "color": STATE_COLORS.get(state, "#9ca3af")}}
        for state, values in hosts_in.items()
    ]
    return _figure(_layout("Host states", yaxis={"title": {"text": "hosts"}},
                           xaxis=_span(span), **_in_progress(span)), traces)


def host_events(times: list, events: dict[str, list], span=None) -> dict:
    x = _x(times)
    traces = [
        {"type": "bar", "x": x, "y": values, "name": str(kind).replace("_", " "),
         "marker": {"color": PALETTE[index % len(PALETTE)]}}
        for index, (kind, values) in enumerate(events.items())
    ]
    return _figure(_layout("Host failures, drains, repairs", barmode="stack",
                           xaxis=_span(span), **_in_progress(span)), traces)


def sparkline_points(values: list, width: float = 80.0, height: float = 20.0) -> list[str]:
    """An inline SVG sparkline for a table cell: the values (oldest first) as polyline point
    lists scaled into ``width`` x ``height`` from zero to the largest value; a missing value
    (None) breaks the line."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0) or 1.0
    step = width / max(1, len(values) - 1)
    segments, current = [], []
    for index, value in enumerate(values):
        if value is None:
            if current:
                segments.append(current)
            current = []
            continue
        current.append(f"{index * step:.1f},{height - height * value / top:.1f}")
    if current:
        segments.append(current)
    return [" ".join(points) for points in segments]
