"""Self-contained HTML report of a simulation (plotly.js embedded inline, no CDN).

Built from the summary dict the simulator writes to ``summary.json``: occupancy over time,
delivered vs entitlement per budget and window, and queue-wait distributions by class.
"""

from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from .summary import format_summary

CLASS_COLORS = {"all": "#444", "debug": "#1b9e77", "allocated": "#7570b3",
                "unallocated": "#d95f02"}


def _days(ts):
    return [t / 86400.0 for t in ts]


def occupancy_figure(s: dict) -> go.Figure:
    tl = s["timeline"]
    fig = go.Figure()
    x = _days(tl.get("t", []))
    for key, color in (("allocated", "#7570b3"), ("unallocated", "#d95f02"),
                       ("idle", "#cccccc"), ("down", "#e7298a")):
        fig.add_trace(go.Scatter(x=x, y=tl.get(key, []), name=key, stackgroup="one",
                                 mode="lines", line={"width": 0.5, "color": color}))
    fig.update_layout(title="Occupancy over time (GPUs, bucket averages)",
                      xaxis_title="days from trace start", yaxis_title="GPUs",
                      height=380, margin={"t": 50, "b": 40})
    return fig


def delivered_figure(s: dict) -> go.Figure:
    bounds = s["window_bounds_s"]
    mids = [(a + b) / 2 / 86400.0 for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    fig = go.Figure()
    for node, b in s["budgets"].items():
        if not b["leaf"] or b["fraction"] <= 0:
            continue
        fig.add_trace(go.Scatter(x=mids, y=b["ratio"], name=node, mode="lines+markers"))
    fig.add_hline(y=1.0, line_dash="dash", line_color="black")
    fig.add_hrect(y0=0.95, y1=1.05, fillcolor="green", opacity=0.08, line_width=0)
    fig.update_layout(title="Delivered allocated GPU-time / entitlement, per budget and window",
                      xaxis_title="window midpoint (days)", yaxis_title="delivered / entitled",
                      height=420, margin={"t": 50, "b": 40})
    return fig


def totals_figure(s: dict) -> go.Figure:
    names, dl, en = [], [], []
    for node, b in s["budgets"].items():
        if not b["leaf"]:
            continue
        names.append(node)
        dl.append(b["delivered_total_gpu_s"] / 3600)
        en.append(b["entitlement_total_gpu_s"] / 3600)
    fig = go.Figure([go.Bar(x=names, y=dl, name="delivered (allocated)"),
                     go.Bar(x=names, y=en, name="entitlement")])
    fig.update_layout(title="Delivered vs entitlement over the whole run (GPU-hours)",
                      barmode="group", height=380, margin={"t": 50, "b": 120})
    return fig


def waits_figure(s: dict) -> go.Figure:
    fig = go.Figure()
    qs = list(range(101))
    for cls, values in s["wait_quantiles_by_class"].items():
        if not values:
            continue
        fig.add_trace(go.Scatter(x=[max(v, 0.5) for v in values], y=qs, name=cls,
                                 mode="lines", line={"color": CLASS_COLORS.get(cls)}))
    fig.add_vline(x=120, line_dash="dot", annotation_text="2 min")
    fig.update_layout(title="Queue wait distribution by class (CDF, all time queued)",
                      xaxis={"type": "log", "title": "wait (s, log scale)"},
                      yaxis_title="percentile", height=400, margin={"t": 50, "b": 40})
    return fig


def _table(s: dict) -> str:
    rows = []
    for name, v in [("all", s["waits"]["all"]), ("debug", s["waits"]["debug"]),
                    ("allocated", s["waits"]["allocated"]),
                    ("unallocated", s["waits"]["unallocated"])] + list(
                        s["waits_by_budget"].items()):
        cells = "".join(f"<td>{'-' if v.get(k) is None else f'{v[k]:.0f}'}</td>"
                        for k in ("p50", "p95", "p99"))
        rows.append(f"<tr><td>{html.escape(name)}</td><td>{v['n']}</td>{cells}</tr>")
    return ("<table><tr><th>queue wait (s)</th><th>n</th><th>p50</th><th>p95</th><th>p99</th>"
            "</tr>" + "".join(rows) + "</table>")


def render(s: dict) -> str:
    figs = [occupancy_figure(s), delivered_figure(s), totals_figure(s), waits_figure(s)]
    parts = []
    for i, fig in enumerate(figs):
        parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=(i == 0),
                                 default_width="100%"))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in s.get("notes", []))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Timeshare simulation report</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5rem;max-width:1200px}}
pre{{background:#f6f6f6;padding:.8rem;overflow-x:auto;font-size:12px}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}
td:first-child{{text-align:left}}</style></head><body>
<h1>Timeshare simulation report</h1>
<p>Inputs, the conversion rule for public traces and the parameters are printed in full below:
the rule is part of the result.</p>
{f'<h2>Notes</h2><ul>{notes}</ul>' if notes else ''}
<h2>Summary</h2><pre>{html.escape(format_summary(s))}</pre>
{_table(s)}
<h2>Charts</h2>
{''.join(parts)}
</body></html>
"""


def write_report(summary: dict, path: Path | str) -> Path:
    path = Path(path)
    path.write_text(render(summary), encoding="utf-8")
    return path
