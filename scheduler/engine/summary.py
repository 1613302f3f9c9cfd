"""The simulator's summary as text: what ``python -m scheduler.engine.simulate`` prints and
the HTML report shows in full (the parameters and the conversion rule are part of a result)."""

from __future__ import annotations


def human(s: float | None) -> str:
    """Seconds as "90s", "4.5m", "3.2h", "2.1d"."""
    if s is None:
        return "-"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.1f}m"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


def format_summary(s: dict) -> str:
    out = []
    if s.get("trace"):
        out.append(s["trace"])
    out.append(s["cluster"])
    p = s["params"]
    out.append(
        f"policy {p['policy']}, window {human(p['window_s'])}"
        + (f", half-life {human(p['half_life_s'])}" if p["half_life_s"] else "")
        + f", max min_runtime {human(p['max_min_runtime_s'])}, hysteresis {p['hysteresis']:g}, "
        f"grace {human(p['grace_s'])}, seed {p['seed']}"
    )
    out.append(
        f"simulated {human(s['end_s'])} in {s['wall_s']:.2f}s wall, {s['passes']} passes "
        f"({s['skipped_passes']} skipped); {s['jobs']} workloads: "
        + ", ".join(f"{k} {v}" for k, v in sorted(s["states"].items()))
    )
    out.append("")
    out.append(f"{'queue wait':<28}{'n':>8}{'p50':>9}{'p95':>9}{'p99':>9}")
    rows = [("all", s["waits"]["all"]), ("debug (<=2 GPUs, <=15m)", s["waits"]["debug"]),
            ("allocated (other)", s["waits"]["allocated"]),
            ("unallocated", s["waits"]["unallocated"])]
    rows += [(f"  {b}", v) for b, v in s["waits_by_budget"].items()]
    for name, v in rows:
        out.append(f"{name[:27]:<28}{v['n']:>8}{human(v['p50']):>9}{human(v['p95']):>9}"
                   f"{human(v['p99']):>9}")
    pre = s["preemptions"]
    out.append("")
    out.append(
        f"preemptions {pre['total']} (rebalancing {pre['rebalancing']}: "
        f"{pre['of_unallocated']} unallocated, {pre['of_allocated']} allocated; "
        f"drain {pre['drain']}), requeues {s['requeues']}, holds {s['holds']}, "
        f"GPU-hours lost to preemption {s['gpu_hours_lost']['preemption']:.1f}, "
        f"to host failures {s['gpu_hours_lost']['host_failure']:.1f}"
    )
    o = s["occupancy"]
    out.append(
        f"occupancy of healthy GPU-time: allocated {o['allocated']:.1%}, unallocated "
        f"{o['unallocated']:.1%}, idle {o['idle']:.1%}; availability {o['availability']:.1%}"
    )
    hs = s["hosts"]
    if hs["repairs"] or hs["failures"]:
        line = (f"host failures {hs['failures']}, repairs {hs['repairs']}, of them by a human "
                f"{hs['needed_human']}")
        if hs["repairs"]:
            line += (f" ({hs['share']:.1%}; {hs['fewer_human']:.0%} fewer human repairs than "
                     f"if every failure needed one)")
        out.append(line)
    out.append("")
    out.append(f"{'budget':<24}{'share':>7}{'delivered':>12}{'entitled':>12}{'ratio':>7}"
               f"{'min/win':>9}{'max/win':>9}   (GPU-h; per-window ratios after the first)")
    for node, b in s["budgets"].items():
        d, e = b["delivered_total_gpu_s"] / 3600, b["entitlement_total_gpu_s"] / 3600
        r = b["ratio_after_first_window"]
        lo = "-" if r["min"] is None else f"{r['min']:.2f}"
        hi = "-" if r["max"] is None else f"{r['max']:.2f}"
        ratio = f"{d / e:.2f}" if e else "-"
        out.append(f"{node[:23]:<24}{b['fraction']:>7.1%}{d:>12.1f}{e:>12.1f}{ratio:>7}"
                   f"{lo:>9}{hi:>9}")
    for n in s["notes"]:
        out.append("note: " + n)
    return "\n".join(out)
