"""Two scenarios of DESIGN.md's simulator section: a saturated cluster where fair share must
deliver each budget its entitlement, and an Ai2-like mix where debug workloads should start
within a minute or two when the design lets them (and the long waits are explained)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from scheduler.engine.fairshare import Standing
from scheduler.engine.model import Params, ancestors
from scheduler.engine.simulate import SimConfig, Simulator, simulate
from scheduler.engine.traces import TraceJob, is_debug, parse_cluster

DAY = 86400.0
HOUR = 3600.0


def test_saturated_budgets_get_their_entitlement_within_5_percent(tmp_path):
    # 8 GPUs (2 hosts x 4). prog-a 3 shares (a1 2, a2 1), prog-b 1 share (b1): by hand,
    # a1 = 3/4 * 2/3 = 50%, a2 = 3/4 * 1/3 = 25%, b1 = 1/4 * 1/1 = 25% of the cluster.
    shares = {"prog-a": 3, "prog-a/a1": 2, "prog-a/a2": 1, "prog-b": 1, "prog-b/b1": 1}
    fraction = {"prog-a/a1": 0.5, "prog-a/a2": 0.25, "prog-b/b1": 0.25}
    gpus, days = 8, 14
    # every budget asks for 3% more than its share, plus a small backlog at t=0: 1-GPU jobs of
    # 10-20 minutes (protected for their whole run), arrivals spread evenly with jitter
    rng = np.random.default_rng(1)
    jobs = []
    for leaf, f in fraction.items():
        gap = 900 / (1.03 * f * gpus)  # mean duration 900 s
        backlog = int(4 * f * gpus)
        for k in range(int(days * DAY / gap) + backlog):
            t = max(0.0, (k - backlog) * gap + rng.uniform(0, gap))
            d = round(rng.uniform(600, 1200))
            jobs.append(TraceJob(f"{leaf}-{k}", round(t), d, 1, leaf, "u", d, True))
    cfg = SimConfig(params=Params(window=DAY), until=days * DAY)
    res = simulate(jobs, shares, parse_cluster("2x4"), cfg)
    res.write(tmp_path, html=False)
    # delivered allocated GPU-time per budget and calendar day, from runs.csv alone
    budget_of = {j.job_id: j.budget for j in jobs}
    delivered = {leaf: [0.0] * days for leaf in fraction}
    with open(tmp_path / "runs.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            assert r["allocated"] == "1"
            s, e, g = float(r["start"]), float(r["end"]), int(r["gpus"])
            for k in range(days):
                overlap = min(e, (k + 1) * DAY) - max(s, k * DAY)
                if overlap > 0:
                    delivered[budget_of[r["job_id"]]][k] += g * overlap
    worst = 0.0
    for leaf, f in fraction.items():
        entitlement = f * gpus * DAY  # no failures: the whole cluster is healthy all day
        for k in range(1, days):  # after the first window
            dev = delivered[leaf][k] / entitlement - 1
            worst = max(worst, abs(dev))
            assert abs(dev) <= 0.05, (leaf, k, round(dev, 3))
    # the summary's own per-window figures agree with runs.csv
    s = res.summary["budgets"]["prog-b/b1"]
    assert abs(s["delivered_gpu_s"][3] - delivered["prog-b/b1"][3]) < 1e-3
    assert abs(s["entitlement_gpu_s"][3] - 0.25 * 8 * DAY) < 1e-3
    print(f"saturated: worst per-window deviation after the first window {worst:.1%}")


PROGRAMS = {"llm": (50, {"pretrain": 50, "midtrain": 25, "posttrain": 25}),
            "robotics": (30, {"sim": 50, "vla": 50}),
            "science": (20, {"agents": 60, "climate": 40})}


def ai2_like_mix(seed: int = 1, days: int = 7, gpus: int = 88, load: float = 1.0):
    """An Ai2-like week on Ai2's smallest cluster size (88 GPUs = 11 hosts x 8).

    Budget tree: 3 programs (50/30/20 shares), 7 projects; each project has a `train` leaf
    (70 shares) and 3 researchers (10 shares each): debug work comes from 21 budgets.
    Per project, with the sources of each assumption:
    - Seasons (seeds: "research is seasonal", teams are ready at different times): busy and
      quiet phases, exponential with means 2 d and 1.5 d; quiet phases submit 20% as much.
    - Training (seeds: large distributed training; philly_vc.csv, jobs of >= 8 GPUs: median
      6.6 h, p75 46 h, and 80% of all GPU-time lies beyond 8 h into a job): 8/16/32 GPUs
      (50/35/15%), lognormal durations, median 10 h, sigma 1, 1 h to 4 d; min_runtime
      min(duration, 8 h) (the cluster maximum), resumable. About half of the allocated
      GPU-time is past its protection (Philly: 80%), so much of a busy cluster is preemptible.
    - Smaller allocated work: 1/2/4 GPUs, median 2 h, min_runtime min(duration, 2 h).
    - Allocated offered load while busy: `load` x the project's share (80% training).
    - Unallocated work (min_runtime 0; chronus_philly_mix1.csv: 30% of GPU-time is
      best-effort): 1/2/4 GPUs, median 3 h, steady, 0.35 x the project's share.
    - Debug (seeds: few GPUs, min_runtime <= 15 min): each researcher one session every
      90 min on average, 1-2 GPUs, 5-15 min, min_runtime 15 min, not resumable.
    With load 1.0 the outstanding requests (running + queued GPUs) average about 2.4x the
    cluster (seeds: "outstanding requests for 2-3x more GPUs than are available"); this is
    measured and asserted below, never tuned to make waits short.
    """
    rng = np.random.default_rng(seed)
    shares: dict[str, float] = {}
    fraction: dict[str, float] = {}
    for prog, (ps, projects) in PROGRAMS.items():
        shares[prog] = ps
        total = sum(projects.values())
        for proj, s in projects.items():
            p = f"{prog}/{proj}"
            shares[p] = s
            shares[p + "/train"] = 70
            for k in (1, 2, 3):
                shares[f"{p}/r{k}"] = 10
            fraction[p] = ps / 100 * s / total
    horizon = days * DAY
    jobs: list[TraceJob] = []

    def add(t, d, g, leaf, min_rt, resumable):
        jobs.append(TraceJob(f"j{len(jobs)}", round(t), max(60, round(d)), int(g), leaf, "u",
                             min_rt, resumable))

    def lognormal(median, sigma, lo, hi):
        return float(np.clip(rng.lognormal(np.log(median), sigma), lo, hi))

    def arrivals(mean_gap):
        t = rng.exponential(mean_gap)
        while t < horizon:
            yield t
            t += rng.exponential(mean_gap)

    for p, f in fraction.items():
        phases, t, busy = [], 0.0, rng.random() < 0.6
        while t < horizon:
            length = rng.exponential(2 * DAY if busy else 1.5 * DAY)
            phases.append((t + length, 1.0 if busy else 0.2))
            t, busy = t + length, not busy

        def season(t, phases=phases):
            return next(level for end, level in phases if t < end)

        share = f * gpus
        train_gpu_s = 8 * (0.5 + 0.35 * 2 + 0.15 * 4) * 10 * HOUR * np.exp(0.5)
        mid_gpu_s = 7 / 3 * 2 * HOUR * np.exp(0.32)
        unalloc_gpu_s = 7 / 3 * 3 * HOUR * np.exp(0.32)
        for t in arrivals(train_gpu_s / (0.8 * load * share)):
            if rng.random() < season(t):
                d = lognormal(10 * HOUR, 1.0, HOUR, 4 * DAY)
                add(t, d, 8 * rng.choice([1, 2, 4], p=[0.5, 0.35, 0.15]), p + "/train",
                    min(d, 8 * HOUR), True)
        for t in arrivals(mid_gpu_s / (0.2 * load * share)):
            if rng.random() < season(t):
                d = lognormal(2 * HOUR, 0.8, 600, DAY)
                add(t, d, rng.choice([1, 2, 4]), p + "/train", min(d, 2 * HOUR), True)
        for t in arrivals(unalloc_gpu_s / (0.35 * share)):
            add(t, lognormal(3 * HOUR, 0.8, 600, DAY), rng.choice([1, 2, 4]), p + "/train", 0,
                True)
        for k in (1, 2, 3):
            for t in arrivals(90 * 60):
                add(t, rng.uniform(5, 15) * 60, rng.choice([1, 2]), f"{p}/r{k}", 900, False)
    jobs.sort(key=lambda j: (j.submit_time, j.job_id))
    return jobs, shares, horizon


def _ranks_below(standing: Standing, mine: str, theirs: str) -> bool:
    """DESIGN.md's Fair Tree order where two branches diverge, written out by hand: siblings
    by ratio ascending, ties larger fraction first, then name."""
    tree = standing.tree

    def key(n):
        return (standing.ratio(n), -tree.fraction(n), n)

    return key(theirs) > key(mine)


def _may_displace(standing: Standing, threshold: float, now: float, w, run) -> bool:
    """DESIGN.md step 3, independently of preemption.py: unallocated work always; allocated
    work past its minimum runtime whose branch ranks below the requester's where the two
    diverge, and which is over entitlement (ratio > 1 + hysteresis) from there down to its leaf."""
    victim = run.workload
    if victim.min_runtime <= 0:
        return True
    if now < run.protected_until or victim.budget == w.budget:
        return False
    mine, theirs = standing.diverge(w.budget, victim.budget)
    if not _ranks_below(standing, mine, theirs):
        return False
    nodes = ancestors(victim.budget)
    return all(standing.ratio(n) > threshold for n in nodes[nodes.index(theirs):])


class DebugWatch:
    """After every scheduling moment, for each queued debug workload: is its budget within its
    entitlement (no node on its path above ratio 1), and is there room the design lets it have
    on one host (free GPUs, GPUs already being released, or runs it may displace)?"""

    def __init__(self, sim: Simulator):
        self.sim = sim
        self.last: dict[str, tuple[float, bool]] = {}  # job -> (since, entitled room)
        self.room_s: dict[str, float] = {}  # job -> time queued while it had entitled room
        self.first: dict[str, tuple[bool, bool]] = {}  # job -> (within, room) when first seen

    def __call__(self, _fraction: float) -> None:
        sim = self.sim
        now = sim.now
        state = sim._state(now)
        standing = Standing(sim.tree, state.usage, state.capacity)
        threshold = 1 + sim.params.hysteresis
        for wid, (since, room) in self.last.items():
            if room:
                self.room_s[wid] = self.room_s.get(wid, 0.0) + now - since
        self.last = {}
        debug = [w for w in sim.pending if is_debug(w.gpus, w.min_runtime)]
        if not debug:
            return
        free = {h.name: h.gpus - len(sim.used[h.name]) for h in sim.hosts
                if h.state == "AVAILABLE"}
        for w in debug:
            within = all(standing.ratio(n) <= 1.0 for n in ancestors(w.budget))
            per = dict(free)
            for run in sim.running.values():
                if run.signalled_at is not None or _may_displace(standing, threshold, now, w,
                                                                  run):
                    for host, idx in run.placement.slots:
                        if host in per:
                            per[host] += len(idx)
            room = max(per.values(), default=0) >= w.gpus
            self.first.setdefault(w.id, (within, room))
            self.last[w.id] = (now, within and room)


def _outstanding(res, horizon: float) -> np.ndarray:
    """Requested GPUs (running + queued) over the cluster, sampled every 10 minutes after the
    first day."""
    times = np.arange(DAY, horizon, 600.0)
    out = np.zeros_like(times)
    for r in res.jobs:
        if r.state == "refused":
            continue
        end = r.end_time if r.end_time is not None else np.inf
        out[(times >= r.job.submit_time) & (times < end)] += r.job.gpus
    return out / 88


def _replay(params: Params):
    jobs, shares, horizon = ai2_like_mix()
    sim = Simulator(jobs, shares, parse_cluster("11x8"), SimConfig(params=params, until=horizon))
    watch = DebugWatch(sim)
    res = sim.run(progress=watch, progress_step=1e-12)
    return jobs, horizon, res, watch


@pytest.mark.parametrize("params", [Params(), Params(grace=60.0)], ids=["defaults", "grace 1m"])
def test_debug_workloads_within_entitlement_start_within_two_minutes(params, tmp_path):
    # the defaults: a 5 min grace for allocated victims, a short one for unallocated work
    grace = params.grace
    jobs, horizon, res, watch = _replay(params)
    s = res.summary
    # the mix is what the docstring says (realism, measured, not tuned for short waits)
    work = sum(j.gpus * j.duration for j in jobs)
    unalloc = sum(j.gpus * j.duration for j in jobs if j.min_runtime == 0)
    alloc = work - unalloc
    past = sum(j.gpus * max(0.0, j.duration - j.min_runtime) for j in jobs if j.min_runtime)
    assert 0.2 < unalloc / work < 0.4
    assert past / alloc > 0.4  # much allocated GPU-time runs past its protection
    outstanding = _outstanding(res, horizon)
    assert 1.5 < outstanding.mean() < 3.5, outstanding.mean()
    assert s["occupancy"]["idle"] < 0.1
    debug = [r for r in res.jobs if r.first_start is not None and r.job.submit_time >= DAY
             and is_debug(r.workload.gpus, r.workload.min_runtime)]
    assert len(debug) > 1500
    assert len({r.job.budget for r in debug}) >= 21  # (short small jobs of train leaves too)
    first = [watch.first.get(r.job.job_id, (True, True)) for r in debug]
    assert sum(within for within, _ in first) > 0.6 * len(debug)  # mostly within entitlement
    # DESIGN.md: a debug job from a budget within its entitlement, with room it may have
    # (idle GPUs, unallocated work, or preemptible work of a branch ranked below it and over
    # its entitlement), starts at once or after one grace period. Count the time each debug
    # job spent queued while it had such room: it must not exceed one grace period + 2 min.
    # Measured 99.8% / 98.5% (97-98% before claims, when a higher-ranked requester could take GPUs
    # released for a debug job); the rest sit behind a small hold on the host where their
    # victims are, or the final-share rule (notes/SIMULATION.md, "Debug waits").
    room = np.array([watch.room_s.get(r.job.job_id, 0.0) for r in debug])
    in_time = float(np.mean(room <= grace + 120))
    assert in_time >= 0.98, np.sort(room)[-10:]
    entitled = [r.wait_s for r, (within, rm) in zip(debug, first, strict=True) if within and rm]
    assert len(entitled) > 0.6 * len(debug)
    p95 = float(np.percentile(entitled, 95))
    assert p95 <= 120, p95  # the seeds' goal: a minute or two, with the default parameters
    # long waits (> grace + 2 min) are spent mostly over entitlement or without room (measured:
    # 75-85% of their time; the rest is the effects named above)
    long = [r for r in debug if r.wait_s > grace + 120]
    share = sum(watch.room_s.get(r.job.job_id, 0.0) for r in long) / sum(r.wait_s for r in long)
    assert share < 0.3, share
    print(f"grace {grace:g}: {in_time:.1%} in time; debug p95 {s['waits']['debug']['p95']:.0f} s, "
          f"{p95:.0f} s within entitlement with room ({len(entitled)} of {len(debug)}); "
          f"long waits: {len(long)}, {share:.1%} of their time with room")
    if s["waits"]["debug"]["p95"] > 120:
        why = [n for n in s["notes"] if n.startswith("debug p95 wait above 2 min")]
        assert why and "reasons" in why[0]
