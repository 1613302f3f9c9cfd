"""The workload page's one chart, a utilization sparkline, as plotly figure data built in
Python (drawn by static/reports/charts.js, like the reports' charts)."""

from datetime import datetime

SPARK_COLOR = "#7c3aed"


def utilization_sparkline(points: list[tuple[datetime, float]], threshold: float) -> dict:
    """Busy percent per clock hour, with the cluster's idle threshold as a dotted line."""
    x = [at.strftime("%Y-%m-%d %H:%M") for at, _ in points]
    return {
        "data": [{
            "type": "scatter", "mode": "lines+markers", "x": x,
            "y": [round(100 * busy, 1) for _, busy in points], "name": "GPU busy",
            "line": {"color": SPARK_COLOR, "width": 2}, "marker": {"size": 4},
            "hovertemplate": "%{x}: %{y}% busy<extra></extra>",
        }],
        "layout": {
            "height": 90, "margin": {"l": 30, "r": 10, "t": 6, "b": 20},
            "showlegend": False, "paper_bgcolor": "white", "plot_bgcolor": "white",
            "xaxis": {"type": "date", "showgrid": False, "tickfont": {"size": 9}},
            "yaxis": {"range": [0, 105], "ticksuffix": "%", "tickvals": [0, 50, 100],
                      "showgrid": False, "tickfont": {"size": 9}},
            "shapes": [{
                "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                "y0": 100 * threshold, "y1": 100 * threshold,
                "line": {"color": "#b91c1c", "width": 1, "dash": "dot"},
            }],
        },
    }
