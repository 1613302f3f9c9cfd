"""The HTML report is self-contained (plotly.js inline) and carries the four views."""

from __future__ import annotations

from scheduler.engine.report import render
from scheduler.engine.simulate import SimConfig, simulate
from scheduler.engine.traces import TraceJob, parse_cluster


def test_report_is_self_contained_with_the_charts():
    jobs = [TraceJob(f"j{i}", i * 60.0, 1800.0, 1 + i % 2, "ab"[i % 2] + "/x", "u",
                     900.0 * (i % 3 != 0), True) for i in range(30)]
    res = simulate(jobs, {"a": 1, "a/x": 1, "b": 1, "b/x": 1}, parse_cluster("2x4"),
                   SimConfig())
    html = render(res.summary)
    assert html.count("<script") >= 4 and "<script src=" not in html
    assert "plotly.js v" in html or "plotly.js" in html  # the library itself is embedded
    for title in ("Occupancy over time", "Delivered allocated GPU-time",
                  "Delivered vs entitlement over the whole run",
                  "Queue wait distribution by class"):
        assert title in html
    assert "queue wait" in html and "debug" in html
