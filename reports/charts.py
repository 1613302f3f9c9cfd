"""Plotly figures built in Python from the series of `reports.metrics`.

Each function returns a plain dict (``{"data": [...], "layout": {...}}``) that the templates
pass with ``json_script`` and the browser draws with ``Plotly.react`` (static/reports/charts.js).
"""

import json

import plotly.graph_objects as go

COLORS = {
    "allocated": "#2563eb",
    "unallocated": "#93c5fd",
    "idle": "#e5e7eb",
    "unavailable": "#b91c1c",
    "availability": "#15803d",
    "impact": "#b45309",
}
PALETTE = ["#2563eb", "#b45309", "#15803d", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#dc2626"]


def _layout(title: str, **extra) -> dict:
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
        "height": 300,
        "template": "plotly_white",
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "x unified",
    }
    layout.update(extra)
    return layout


def as_dict(figure: go.Figure) -> dict:
    """Plain JSON data (no numpy, dates as ISO strings) for `json_script`."""
    return json.loads(figure.to_json())


def pyramid_trend(days: list, series: dict[str, list]) -> dict:
    """Daily availability, occupancy (allocated, unallocated) and impact, in percent."""
    figure = go.Figure(layout=_layout("Last 14 days", yaxis={"ticksuffix": "%",
                                                                "range": [0, 105]}))
    for key, name, color in [
        ("availability", "Availability", COLORS["availability"]),
        ("occupancy_allocated", "Occupancy: allocated", COLORS["allocated"]),
        ("occupancy_unallocated", "Occupancy: unallocated", COLORS["unallocated"]),
        ("impact", "Impact", COLORS["impact"]),
    ]:
        values = [None if v is None else 100 * v for v in series[key]]
        figure.add_trace(go.Scatter(x=days, y=values, name=name, mode="lines+markers",
                                    line={"color": color}))
    return as_dict(figure)


def occupancy(points: list[dict]) -> dict:
    """Stacked area: allocated, unallocated, idle and unavailable GPUs."""
    figure = go.Figure(layout=_layout("GPUs by state", yaxis={"title": "GPUs"}))
    times = [p["at"] for p in points]
    for key in ("allocated", "unallocated", "idle", "unavailable"):
        figure.add_trace(go.Scatter(
            x=times, y=[round(p[key], 2) for p in points], name=key.capitalize(),
            stackgroup="gpus", mode="lines", line={"width": 0.5, "color": COLORS[key]},
        ))
    return as_dict(figure)


def budgets(times: list, nodes: list, series: dict) -> dict:
    """Delivered (solid) vs entitlement (dotted) GPU-hours per bucket, one colour per node."""
    figure = go.Figure(layout=_layout("Delivered vs entitlement", yaxis={"title": "GPU-h"}))
    for index, node in enumerate(nodes):
        color = PALETTE[index % len(PALETTE)]
        data = series[node.pk]
        figure.add_trace(go.Scatter(x=times, y=data["delivered"], name=f"{node.name} delivered",
                                    mode="lines", line={"color": color}))
        figure.add_trace(go.Scatter(x=times, y=data["entitlement"],
                                    name=f"{node.name} entitlement", mode="lines",
                                    line={"color": color, "dash": "dot"}))
    return as_dict(figure)


def waits(classes: list[dict]) -> dict:
    """Median and p95 queue wait per class, in minutes."""
    names = [f"{c['name']} ({c['count']})" for c in classes]
    figure = go.Figure(layout=_layout("Queue wait by class (starts)",
                                      yaxis={"title": "minutes"}, barmode="group",
                                      hovermode="closest"))
    for key, label, color in [("median", "median", "#2563eb"), ("p95", "p95", "#b45309")]:
        values = [None if c[key] is None else round(c[key] / 60, 2) for c in classes]
        figure.add_trace(go.Bar(x=names, y=values, name=label, marker={"color": color}))
    return as_dict(figure)


def pending(times: list, by_budget: dict[str, list]) -> dict:
    figure = go.Figure(layout=_layout("Pending GPUs by program (allocated work)",
                                      yaxis={"title": "GPUs"}))
    for index, (name, values) in enumerate(by_budget.items()):
        figure.add_trace(go.Scatter(x=times, y=[round(v, 2) for v in values], name=name,
                                    stackgroup="pending", mode="lines",
                                    line={"color": PALETTE[index % len(PALETTE)]}))
    return as_dict(figure)


def preemptions(times: list, preempted: list, requeued: list) -> dict:
    figure = go.Figure(layout=_layout("Preemptions and requeues", barmode="group"))
    figure.add_trace(go.Bar(x=times, y=preempted, name="Preempted runs",
                            marker={"color": "#b91c1c"}))
    figure.add_trace(go.Bar(x=times, y=requeued, name="Requeues", marker={"color": "#93c5fd"}))
    return as_dict(figure)


def host_events(times: list, events: dict[str, list]) -> dict:
    figure = go.Figure(layout=_layout("Host failures, drains, repairs", barmode="stack"))
    for index, (kind, values) in enumerate(events.items()):
        figure.add_trace(go.Bar(x=times, y=values, name=str(kind).replace("_", " "),
                                marker={"color": PALETTE[index % len(PALETTE)]}))
    return as_dict(figure)
