"""Fair share under preemption, as properties over random trees, clusters and submissions.

Two passes are driven by hand (the second one later, with the first one's claims), and each is
checked against DESIGN.md's rules written out again here: ratios from usage and fractions,
GPU shares from the runs and claims the pass starts from and the decisions it made, in the
order it considered the workloads.
"""

from __future__ import annotations

from dataclasses import replace

from engine_builders import budget_shares
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine import (
    BudgetTree,
    ClusterState,
    Host,
    Params,
    Placement,
    Preempt,
    Run,
    Start,
    Stop,
    Workload,
    schedule,
)
from scheduler.engine.model import ancestors

NOW = 100_000.0
PARAMS = Params(grace=300.0, unallocated_grace=30.0, hysteresis=0.1)


@st.composite
def clusters(draw):
    n_hosts = draw(st.integers(1, 5))
    host_list = [Host(f"h{i}", draw(st.sampled_from([4, 8]))) for i in range(n_hosts)]
    tree = BudgetTree.from_shares(draw(budget_shares(programs=(2, 3), least=1)))
    gpus = sum(h.gpus for h in host_list)
    capacity = gpus * 7 * 86400.0
    # usage from idle to far over entitlement, so every branch may be a victim or a requester
    usage = {leaf: draw(st.sampled_from([0.0, 0.3, 0.9, 1.05, 1.5, 3.0])) * tree.fraction(leaf)
             * capacity for leaf in tree.leaves}

    def workload(i, max_gpus):
        return Workload(
            id=f"w{i}",
            budget=draw(st.sampled_from(tree.leaves)),
            gpus=draw(st.integers(1, max_gpus)),
            min_runtime=draw(st.sampled_from([0.0, 600.0, 3600.0, 3600.0])),
            resumable=draw(st.booleans()),
            submitted=float(i),
            duration=draw(st.one_of(st.none(), st.floats(60, 10_000))),
        )

    running, i = [], 0
    for h in host_list:
        free = list(range(h.gpus))
        while free and draw(st.integers(0, 3)):
            w = workload(i, len(free))
            i += 1
            idx, free = tuple(free[: w.gpus]), free[w.gpus :]
            started = NOW - draw(st.sampled_from([0.0, 1000.0, 50_000.0]))
            signalled = draw(st.sampled_from([None, None, None, NOW - 100.0]))
            running.append(
                Run(w, started, Placement(((h.name, idx),)), started + w.min_runtime, signalled)
            )
    biggest = 2 * max(h.gpus for h in host_list)
    pending = [workload(1000 + j, biggest) for j in range(draw(st.integers(1, 10)))]
    # submitted between the passes: they may rank above a claimant and find its GPUs free
    arrivals = [workload(2000 + j, 8) for j in range(draw(st.integers(0, 4)))]
    later = draw(st.sampled_from([10.0, 60.0, 400.0]))
    return ClusterState(NOW, host_list, running, pending, usage, capacity), tree, (later, arrivals)


def apply(state: ClusterState, result, between) -> ClusterState:
    """A driver: starts become runs, preempted runs are signalled, stopped runs leave (back to
    pending if resumable); the next pass comes ``later`` with this pass's claims and the
    workloads submitted since."""
    later, arrivals = between
    # signalled runs are copies: the state this pass saw must stay as it was for the checks
    signalled = {id(d.run) for d in result.decisions if isinstance(d, Preempt)}
    running = [replace(r, signalled_at=state.now) if id(r) in signalled else r
               for r in state.running]
    pending = {w.id: w for w in state.pending}
    pending.update((w.id, w) for w in arrivals)
    for d in result.decisions:
        if isinstance(d, Start):
            del pending[d.workload.id]
            w = d.workload
            running.append(Run(w, state.now, d.placement, state.now + w.min_runtime))
        elif isinstance(d, Stop):
            running = [r for r in running if r.workload.id != d.run.workload.id]
            if d.requeue:
                pending[d.run.workload.id] = d.run.workload
    return replace(state, now=state.now + later, running=running, pending=list(pending.values()),
                   claims=list(result.claims))


def two_passes(state, tree, between):
    first = schedule(state, tree, PARAMS)
    checks = [(state, first)]
    second_state = apply(state, first, between)
    checks.append((second_state, schedule(second_state, tree, PARAMS)))
    return checks


def ratio(tree, state, node):
    used = sum(u for leaf, u in state.usage.items() if leaf == node or leaf.startswith(node + "/"))
    return used / (tree.fraction(node) * state.capacity)


def diverge(a, b):
    pa, pb = ancestors(a), ancestors(b)
    i = next(k for k in range(min(len(pa), len(pb)) + 1)
             if k == min(len(pa), len(pb)) or pa[k] != pb[k])
    return pa[i], pb[i]


def rebalancing(result):
    """Allocated runs preempted for a requester (not for a drain)."""
    return [d for d in result.decisions
            if isinstance(d, Preempt) and d.for_workload_id and d.run.workload.min_runtime > 0]


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(clusters())
def test_a_branch_within_one_plus_hysteresis_never_loses_gpus_to_rebalancing(case):
    state, tree, between = case
    for st_, result in two_passes(state, tree, between):
        pending = {w.id: w for w in st_.pending}
        for d in rebalancing(result):
            requester = pending[d.for_workload_id]
            _, theirs = diverge(requester.budget, d.run.workload.budget)
            path = ancestors(d.run.workload.budget)
            for node in path[path.index(theirs):]:
                assert ratio(tree, st_, node) > 1 + PARAMS.hysteresis, (node, d.reason)


def held_at_start(state):
    """GPUs each node holds with allocated work when the pass starts: running allocated runs
    not on their way out, and the GPUs claimed for pending allocated workloads."""
    held = {}

    def add(leaf, gpus):
        for node in ancestors(leaf):
            held[node] = held.get(node, 0) + gpus

    for run in state.running:
        if run.workload.min_runtime > 0 and run.signalled_at is None:
            add(run.workload.budget, run.gpus)
    pending = {w.id: w for w in state.pending}
    for claim in state.claims:
        w = pending.get(claim.workload_id)
        if w is not None and w.min_runtime > 0:
            add(w.budget, claim.total)
    return held, add


@SETTINGS
@given(clusters())
def test_no_preemption_leaves_the_requesters_branch_above_the_victims_and_its_share(case):
    state, tree, between = case
    for st_, result in two_passes(state, tree, between):
        held, add = held_at_start(st_)
        healthy = sum(h.gpus for h in st_.hosts)

        def share(node, change, held=held, healthy=healthy):
            return (held.get(node, 0) + change) / (tree.fraction(node) * healthy)

        pending = {w.id: w for w in st_.pending}
        carried = {c.workload_id for c in st_.claims if c.workload_id in pending}
        made = {c.workload_id for c in result.claims if c.since == st_.now}
        starts = {d.workload.id: d for d in result.decisions if isinstance(d, Start)}
        for wid in result.order:  # the order the pass considered them
            w = pending[wid]
            victims = [d.run for d in result.decisions
                       if isinstance(d, Preempt) and d.for_workload_id == wid]
            allocated = [r for r in victims if r.workload.min_runtime > 0]
            if allocated:
                change = {}
                for node in ancestors(w.budget):
                    change[node] = change.get(node, 0) + w.gpus
                for r in allocated:
                    for node in ancestors(r.workload.budget):
                        change[node] = change.get(node, 0) - r.gpus
                for r in allocated:
                    mine, theirs = diverge(w.budget, r.workload.budget)
                    # at or below the victim's branch, or within its own entitlement
                    after_mine = share(mine, change.get(mine, 0))
                    assert after_mine <= max(share(theirs, change.get(theirs, 0)), 1) + 1e-9
            if w.min_runtime <= 0:
                continue
            for r in allocated:
                add(r.workload.budget, -r.gpus)
            if wid in carried:
                continue  # its GPUs were counted with its claim
            if wid in starts or wid in made:
                add(w.budget, w.gpus)


@SETTINGS
@given(clusters())
def test_claimed_gpus_go_only_to_their_claimants(case):
    """Claims are GPU counts per host: workloads without a claim on a host start there on no
    more than the free GPUs the claims leave (a claimant that starts elsewhere gives its
    claim back, so such cases are left out)."""
    state, tree, between = case
    first = schedule(state, tree, PARAMS)
    second_state = apply(state, first, between)
    second = schedule(second_state, tree, PARAMS)
    stopped = {id(d.run) for d in second.decisions if isinstance(d, Stop)}
    pending = {w.id for w in second_state.pending}
    starts = {d.workload.id: d for d in second.decisions if isinstance(d, Start)}
    claims = [c for c in second_state.claims if c.workload_id in pending]
    if any(c.workload_id in starts
           and set(starts[c.workload_id].placement.hosts) != set(c.hosts) for c in claims):
        return
    for host in {h for c in claims for h in c.hosts}:
        claimed = sum(n for c in claims for h, n in c.gpus if h == host)
        claimants = {c.workload_id for c in claims if host in c.hosts}
        size = next(h.gpus for h in second_state.hosts if h.name == host)
        busy = sum(len(idx) for r in second_state.running if id(r) not in stopped
                   for h, idx in r.placement.slots if h == host)
        others = sum(len(idx) for wid, d in starts.items() if wid not in claimants
                     for h, idx in d.placement.slots if h == host)
        assert others <= max(0, size - busy - claimed), (host, claims, others)


@SETTINGS
@given(clusters())
def test_no_gpu_is_held_twice_across_passes(case):
    state, tree, (later, arrivals) = case
    for _ in range(3):
        result = schedule(state, tree, PARAMS)
        state = apply(state, result, (later, arrivals))
        arrivals = [replace(w, id=w.id + "+") for w in arrivals]
        pairs = [p for r in state.running for p in r.placement.pairs()]
        assert len(pairs) == len(set(pairs))
        size = {h.name: h.gpus for h in state.hosts}
        assert all(0 <= i < size[h] for h, i in pairs)
