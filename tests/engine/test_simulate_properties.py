"""Hypothesis property tests: random clusters, budget trees and traces, checked on the
runs.csv / jobs.csv records the simulator writes (plus the GPU indices of each run and the
standing each Preempt decision was taken with)."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

import pytest
from engine_builders import budget_shares
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine.model import Params
from scheduler.engine.simulate import SimConfig, simulate
from scheduler.engine.traces import ClusterSpec, HostSpec, TraceJob, tree_fractions

EXAMPLES = int(os.environ.get("SIM_EXAMPLES", "60"))  # more locally: SIM_EXAMPLES=600
TERMINAL = {"completed", "preempted", "failed", "refused"}


@st.composite
def scenarios(draw):
    nhosts = draw(st.integers(1, 4))
    per = draw(st.sampled_from([1, 2, 4, 8]))
    groups = draw(st.integers(1, 2))
    hosts = [HostSpec(f"h{i}", per, f"g{i % groups}") for i in range(nhosts)]
    # budget tree: 1-3 programs with 1-3 projects, random shares (some zero)
    shares = draw(budget_shares(project="q"))
    leaves = [k for k in shares if "/" in k]
    max_min = draw(st.sampled_from([600.0, 3600.0, 8 * 3600.0]))
    total = nhosts * per
    jobs = []
    for i in range(draw(st.integers(1, 25))):
        gpus = draw(st.sampled_from(sorted({1, 2, per, min(total, 2 * per), total})))
        duration = draw(st.integers(30, 20000))
        allocated = draw(st.booleans())
        min_rt = float(draw(st.integers(1, int(max_min)))) if allocated else 0.0
        jobs.append(TraceJob(f"j{i}", float(draw(st.integers(0, 20000))), float(duration),
                             gpus, draw(st.sampled_from(leaves)), "u", min_rt,
                             draw(st.booleans())))
    params = Params(
        window=draw(st.sampled_from([600.0, 3600.0, 86400.0])),
        half_life=draw(st.sampled_from([None, None, 1800.0])),
        max_min_runtime=max_min,
        hysteresis=draw(st.sampled_from([0.0, 0.1, 0.5])),
        grace=draw(st.sampled_from([0.0, 60.0, 300.0])),
        policy=draw(st.sampled_from(
            ["fairshare", "fairshare", "fifo", "fifo-backfill", "sjf", "quota"])),
    )
    cfg = SimConfig(params=params, seed=draw(st.integers(0, 3)),
                    failure_rate=draw(st.sampled_from([0.0, 0.0, 4.0])), repair_time=1200.0)
    return ClusterSpec(hosts), shares, jobs, cfg


def host_capacity_overruns(rows: list[dict], size: dict[str, int]) -> list[str]:
    """An outside checker's view of runs.csv: each run's ``placement`` (``h0:8 h1:4``) names
    its hosts and GPUs, which add up to its ``gpus``; at every start on a host, the GPUs held
    there by runs [start, end) stay within the host's size. Returns what broke."""
    broken, on_host = [], {}
    for r in rows:
        held = [(host, int(n)) for host, n in (p.split(":") for p in r["placement"].split())]
        if sum(n for _, n in held) != int(r["gpus"]) or [h for h, _ in held] != r["hosts"].split():
            broken.append(f"{r['job_id']} run {r['run']}: placement {r['placement']!r}")
        for host, n in held:
            on_host.setdefault(host, []).append((float(r["start"]), float(r["end"]), n))
    for host, spans in on_host.items():
        for start, _, _ in spans:
            busy = sum(n for a, b, n in spans if a <= start < b)
            if busy > size[host]:
                broken.append(f"{host} holds {busy} GPUs at {start:g}, has {size[host]}")
    return broken


def read(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def run_and_read(cluster, shares, jobs, cfg):
    res = simulate(jobs, shares, cluster, cfg)
    with tempfile.TemporaryDirectory() as d:
        res.write(Path(d), html=False)
        jobs_txt = (Path(d) / "jobs.csv").read_text()
        runs_txt = (Path(d) / "runs.csv").read_text()
        return res, read(Path(d) / "jobs.csv"), read(Path(d) / "runs.csv"), jobs_txt, runs_txt


def ratio_at_divergence(victim: str, requester: str, usage: dict, capacity: float,
                        shares: dict) -> float:
    """Independent of the engine: roll the leaf usage up, fraction from the shares, and take the
    victim's branch just below the deepest common ancestor."""
    fr = tree_fractions(shares)
    pv, pr = victim.split("/"), requester.split("/")
    i = 0
    while i < min(len(pv), len(pr)) and pv[i] == pr[i]:
        i += 1
    branch = "/".join(pv[: i + 1])
    used = sum(u for leaf, u in usage.items() if leaf == branch or leaf.startswith(branch + "/"))
    ent = fr.get(branch, 0.0) * capacity
    return float("inf") if ent <= 0 else used / ent


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_on_runs_and_jobs(scenario):
    cluster, shares, jobs, cfg = scenario
    res, jrows, rrows, jtxt, rtxt = run_and_read(cluster, shares, jobs, cfg)
    size = {h.name: h.gpus for h in cluster.hosts}
    total = sum(size.values())

    # no GPU assigned twice: intervals on the same (host, GPU index) never overlap
    by_gpu: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in res.runs:
        for host, idx in r.slots:
            for i in idx:
                assert 0 <= i < size[host]
                by_gpu.setdefault((host, i), []).append((r.start, r.end))
    for spans in by_gpu.values():
        spans.sort()
        for (_s1, e1), (s2, _) in zip(spans, spans[1:], strict=False):
            assert s2 >= e1, "a GPU was assigned to two runs at once"
    # capacity never exceeded (from runs.csv alone): at every start, GPUs in use <= total
    intervals = [(float(r["start"]), float(r["end"]), int(r["gpus"])) for r in rrows]
    for s, _, _ in intervals:
        busy = sum(g for a, b, g in intervals if a <= s < b)
        assert busy <= total
    # hosts listed in runs.csv are real and a run's GPUs fit its hosts
    for r in rrows:
        hosts = r["hosts"].split()
        assert hosts and all(h in size for h in hosts)
        assert int(r["gpus"]) <= sum(size[h] for h in hosts)
    # host capacity never exceeded, from runs.csv's placement column alone
    assert host_capacity_overruns(rrows, size) == []

    # protected runs are never preempted (by rebalancing or drain): allocated runs that end
    # preempted/drained end at or after protected_until
    for r in rrows:
        if r["end_reason"] in ("preempted", "drained") and r["allocated"] == "1":
            assert float(r["end"]) >= float(r["protected_until"]) - 1e-9
    # ... and no rebalancing Preempt decision ever hit protected work or a budget within its
    # entitlement at the level where victim and requester diverge
    h = cfg.params.hysteresis
    for p in res.preemptions:
        if p.for_workload_id is None or not p.allocated:
            continue
        assert p.time >= p.protected_until
        r = ratio_at_divergence(p.budget, p.for_budget, p.usage, p.capacity, shares)
        assert r > 1.0 + h - 1e-9, (p.reason, r)

    # unallocated never charged
    job_by_id = {r["job_id"]: r for r in jrows}
    for j in jrows:
        if float(j["min_runtime"]) == 0:
            assert float(j["allocated_gpu_s"]) == 0
    for r in rrows:
        if r["allocated"] == "0":
            assert float(job_by_id[r["job_id"]]["min_runtime"]) == 0

    # every workload is terminal or still queued / running at the end, consistently
    assert len(jrows) == len(jobs)
    last_run = {}
    for r in rrows:
        last_run[r["job_id"]] = r
    for j in jrows:
        st_ = j["state"]
        assert st_ in TERMINAL | {"queued", "running"}
        lr = last_run.get(j["job_id"])
        if st_ == "running":
            assert lr["end_reason"] == "still_running"
        if st_ == "completed":
            assert lr["end_reason"] == "completed"
        if st_ in ("completed", "preempted", "failed"):
            # all the time from submission to the end is either queued or running
            span = float(j["end_time"]) - float(j["submit_time"])
            assert abs(float(j["wait_s"]) + float(j["run_s"]) - span) < 1e-2
    if cfg.until is None:
        assert not any(j["state"] == "running" for j in jrows)

    # identical results for the same seed
    _, _, _, jtxt2, rtxt2 = run_and_read(cluster, shares, jobs, cfg)
    assert (jtxt, rtxt) == (jtxt2, rtxt2)


def _records(result) -> tuple[list, list]:
    jobs = [(r.job.job_id, r.state, r.reason, r.first_start, r.end_time, r.wait_s, r.preemptions)
            for r in result.jobs]
    runs = [(r.job_id, r.run, r.start, r.end, r.end_reason, r.hosts, r.slots)
            for r in result.runs]
    return jobs, runs


def _read_whole_queue(jobs, shares, cluster, cfg):
    """The same simulation with every pass walking the whole queue in submission order."""
    from scheduler.engine.policies import Policy

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Policy, "backfill_line", property(lambda policy: False))
        return simulate(jobs, shares, cluster, cfg)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_fifo_backfill_read_per_size_replays_as_walking_the_whole_queue(scenario):
    """Passes that look only at what may start or hold hosts, and name everyone else's wait by
    size (``Pass.rest``, given to a job as it leaves the queue), give every job and run what
    walking the whole queue in every pass gives: starts, ends, places and last reasons."""
    from dataclasses import replace

    cluster, shares, jobs, cfg = scenario
    cfg = replace(cfg, params=replace(cfg.params, policy="fifo-backfill"))
    assert _records(simulate(jobs, shares, cluster, cfg)) == _records(
        _read_whole_queue(jobs, shares, cluster, cfg))


def test_fifo_backfill_read_per_size_replays_the_contended_philly_trace_as_the_whole_queue():
    from scheduler.engine.traces import PHILLY_TRACE, parse_cluster, read_trace

    trace = read_trace(PHILLY_TRACE, limit=1500)
    cluster, cfg = parse_cluster("44x8"), SimConfig(params=Params(policy="fifo-backfill"))
    per_size = simulate(trace.jobs, trace.shares, cluster, cfg)
    assert any(r.wait_s > 0 for r in per_size.jobs)  # contended: work waits, and hosts are held
    assert _records(per_size) == _records(
        _read_whole_queue(trace.jobs, trace.shares, cluster, cfg))


def _read_lists_per_partition(jobs, shares, cluster, cfg):
    """The same simulation with each partition's queue handed to its pass as a plain list,
    walked whole in every pass."""
    from scheduler.engine import partitions

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(partitions, "PendingQueue", type("NotKept", (), {}))
        return simulate(jobs, shares, cluster, cfg)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["fifo", "sjf", "fifo-backfill"]))
def test_partitions_on_kept_queues_replay_as_plain_lists(scenario, inside):
    """Each partition reading its own kept queue (``PendingQueue.by_group``), and a partition
    whose queue, runs and hosts are as they were when its pass decided nothing not walked
    again, give every job and run what handing each partition a plain list of its queue in
    every pass gives, hosts failing and coming back included."""
    from dataclasses import replace

    cluster, shares, jobs, cfg = scenario
    leaves = sorted({j.budget for j in jobs})  # one group per budget with work
    cluster = replace(cluster, hosts=[replace(h, group=leaves[i % len(leaves)])
                                      for i, h in enumerate(cluster.hosts)])
    cfg = replace(cfg, params=replace(cfg.params, policy="partitions", partition_policy=inside))
    assert _records(simulate(jobs, shares, cluster, cfg)) == _records(
        _read_lists_per_partition(jobs, shares, cluster, cfg))


@pytest.mark.parametrize("inside", ["fifo", "sjf", "fifo-backfill"])
def test_partitions_on_kept_queues_replay_the_contended_philly_trace_as_plain_lists(inside):
    """Each partition reading its own kept queue (``PendingQueue.by_group``) gives every job
    and run what handing each partition a plain list of its queue gives."""
    from scheduler.engine.traces import PHILLY_TRACE, cluster_from_sizes, read_trace

    trace = read_trace(PHILLY_TRACE, limit=1500)
    cluster = cluster_from_sizes(fraction=8)  # an eighth of each VC's nodes: contended
    cfg = SimConfig(params=Params(policy="partitions", partition_policy=inside))
    kept = simulate(trace.jobs, trace.shares, cluster, cfg)
    assert sum(r.wait_s > 0 for r in kept.jobs) > 100  # contended inside the partitions
    assert _records(kept) == _records(
        _read_lists_per_partition(trace.jobs, trace.shares, cluster, cfg))


def _decided(result) -> tuple[list, list]:
    """``_records`` without the last reasons: a pass made only to say again why work waits
    can word a claimant's wait otherwise ("waiting for the GPUs claimed for it" after
    "preempting ... to make room"), and one not made leaves the earlier words."""
    jobs, runs = _records(result)
    return [job[:2] + job[3:] for job in jobs], runs


def _pass_for_every_submission(jobs, shares, cluster, cfg):
    """The same simulation with a pass made for every submission, as the live loop does."""
    from scheduler.engine.scheduling import EngineMemo

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EngineMemo, "joining_wait", lambda memo, w: None)
        return simulate(jobs, shares, cluster, cfg)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_submissions_told_their_wait_replay_as_a_pass_made_for_each(scenario):
    """Work that joins a settled cluster and is told its wait without a pass
    (``EngineMemo.joining_wait``) gives every job and run what a pass made for every
    submission gives: starts, ends, places, waits and preemptions."""
    from dataclasses import replace

    cluster, shares, jobs, cfg = scenario
    cfg = replace(cfg, params=replace(cfg.params, policy="fairshare"))
    assert _decided(simulate(jobs, shares, cluster, cfg)) == _decided(
        _pass_for_every_submission(jobs, shares, cluster, cfg))


def test_submissions_told_their_wait_replay_the_contended_philly_trace_as_a_pass_for_each():
    from scheduler.engine.traces import PHILLY_TRACE, parse_cluster, read_trace

    trace = read_trace(PHILLY_TRACE, limit=3000)
    cluster, cfg = parse_cluster("20x8"), SimConfig(params=Params())
    told = simulate(trace.jobs, trace.shares, cluster, cfg)
    assert told.summary["skipped_for_joins"] > 100  # saturated: most submissions only wait
    assert told.summary["preemptions"]["total"] > 0
    assert _decided(told) == _decided(
        _pass_for_every_submission(trace.jobs, trace.shares, cluster, cfg))
