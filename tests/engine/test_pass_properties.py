"""Properties of a pass over random clusters, trees, pending and running work."""

from __future__ import annotations

import math

from engine_builders import budget_shares
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine import (
    BudgetTree,
    ClusterState,
    Host,
    HostState,
    Params,
    Placement,
    Preempt,
    Run,
    Start,
    Stop,
    Workload,
    schedule,
)

NOW = 100_000.0


@st.composite
def scenarios(draw):
    n_hosts = draw(st.integers(1, 6))
    sizes = draw(st.sampled_from([[8], [4], [2, 4, 8]]))
    states = [HostState.AVAILABLE] * 4 + [HostState.DRAINING, HostState.DOWN]
    host_list = [
        Host(
            f"h{i}",
            draw(st.sampled_from(sizes)),
            group=f"g{draw(st.integers(0, 2))}",
            state=draw(st.sampled_from(states)),
        )
        for i in range(n_hosts)
    ]
    tree = BudgetTree.from_shares(draw(budget_shares()))
    leaves = tree.leaves
    capacity = draw(st.sampled_from([0.0, 1e5, 1e6]))
    usage = {leaf: draw(st.sampled_from([0.0, 1e4, 1e5, 5e5, 2e6])) for leaf in leaves}

    def workload(i, max_gpus):
        return Workload(
            id=f"w{i}",
            budget=draw(st.sampled_from(leaves)),
            gpus=draw(st.integers(1, max_gpus)),
            min_runtime=draw(st.sampled_from([0.0, 600.0, 3600.0])),
            resumable=draw(st.booleans()),
            submitted=draw(st.floats(0, NOW)),
            duration=draw(st.one_of(st.none(), st.floats(1, 10_000))),
        )

    running, i = [], 0
    for h in host_list:
        if h.state not in (HostState.AVAILABLE, HostState.DRAINING):
            continue
        free = list(range(h.gpus))
        while free and draw(st.booleans()):
            w = workload(i, len(free))
            i += 1
            idx, free = tuple(free[: w.gpus]), free[w.gpus :]
            started = NOW - draw(st.sampled_from([0.0, 100.0, 5000.0]))
            signalled = draw(st.sampled_from([None, None, NOW - 50.0, NOW - 400.0]))
            running.append(
                Run(w, started, Placement(((h.name, idx),)), started + w.min_runtime, signalled)
            )
    biggest = 2 * max(h.gpus for h in host_list)
    pending = [workload(1000 + j, biggest) for j in range(draw(st.integers(0, 12)))]
    state = ClusterState(NOW, host_list, running, pending, usage=usage, capacity=capacity)
    params = Params(
        policy=draw(st.sampled_from(
            ["fairshare", "fairshare", "fifo", "fifo-backfill", "sjf", "quota"])),
        hysteresis=draw(st.sampled_from([0.0, 0.1])),
    )
    return state, tree, params


@st.composite
def contended(draw):
    """A full cluster of 8-GPU hosts, runs of a few budgets (some past their minimum runtime,
    some unallocated) and a long queue of the same budgets and sizes: many waiting workloads
    search for victims in one pass, and the pass's own preemptions change what later ones find."""
    shares = {f"b{i}": draw(st.integers(1, 5)) for i in range(draw(st.integers(2, 4)))}
    tree = BudgetTree.from_shares(shares)
    leaves = tree.leaves
    hosts = [Host(f"h{i}", 8, group=f"g{i % 2}") for i in range(draw(st.integers(2, 6)))]
    running, i = [], 0
    for h in hosts:
        free = list(range(8))
        while free:
            gpus = min(len(free), draw(st.sampled_from([1, 2, 4, 8])))
            w = Workload(f"r{i}", draw(st.sampled_from(leaves)), gpus,
                         draw(st.sampled_from([0.0, 600.0, 600.0, 3600.0])), draw(st.booleans()),
                         0.0, duration=draw(st.one_of(st.none(), st.floats(1, 10_000))))
            i += 1
            idx, free = tuple(free[:gpus]), free[gpus:]
            started = NOW - draw(st.sampled_from([100.0, 1000.0, 5000.0]))
            running.append(Run(w, started, Placement(((h.name, idx),)), started + w.min_runtime))
    pending = [
        Workload(f"w{j}", draw(st.sampled_from(leaves)), draw(st.sampled_from([1, 2, 4, 8, 16])),
                 draw(st.sampled_from([0.0, 600.0, 600.0])), draw(st.booleans()),
                 draw(st.floats(0, NOW)), duration=draw(st.one_of(st.none(), st.floats(1, 10_000))))
        for j in range(draw(st.integers(5, 30)))
    ]
    usage = {leaf: draw(st.sampled_from([0.0, 1e5, 5e5, 2e6])) for leaf in leaves}
    state = ClusterState(NOW, hosts, running, pending, usage=usage, capacity=1e6)
    return state, tree, Params(hysteresis=draw(st.sampled_from([0.0, 0.1])))


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios())
def test_no_gpu_is_assigned_twice_nor_beyond_a_host(case):
    state, tree, params = case
    result = schedule(state, tree, params)
    stopped = {id(d.run) for d in result.of(Stop)}
    size = {h.name: h.gpus for h in state.hosts}
    held = [pair for r in state.running if id(r) not in stopped for pair in r.placement.pairs()]
    held += [pair for d in result.of(Start) for pair in d.placement.pairs()]
    assert len(held) == len(set(held))
    assert all(0 <= index < size[host] for host, index in held)


@SETTINGS
@given(scenarios())
def test_starts_only_on_available_hosts_with_the_gpus_asked(case):
    state, tree, params = case
    available = {h.name for h in state.hosts if h.state == HostState.AVAILABLE}
    for d in schedule(state, tree, params).of(Start):
        assert set(d.placement.hosts) <= available
        assert d.placement.gpus == d.workload.gpus


@SETTINGS
@given(scenarios())
def test_rebalancing_never_preempts_a_protected_run(case):
    state, tree, params = case
    for d in schedule(state, tree, params).of(Preempt):
        if d.for_workload_id is not None:
            assert d.run.workload.min_runtime == 0 or state.now >= d.run.protected_until


@SETTINGS
@given(scenarios())
def test_rebalancing_never_preempts_a_budget_within_its_entitlement(case):
    state, tree, params = case
    for d in schedule(state, tree, params).of(Preempt):
        victim = d.run.workload
        if d.for_workload_id is None or victim.min_runtime == 0:
            continue
        entitlement = tree.fraction(victim.budget) * state.capacity
        used = state.usage.get(victim.budget, 0.0)
        if entitlement > 0:
            assert used / entitlement > 1 + params.hysteresis
        else:  # no entitlement at all: only a budget without shares, or one that used time
            assert tree.fraction(victim.budget) == 0 or used > 0


@SETTINGS
@given(scenarios())
def test_only_fair_share_preempts_for_rebalancing(case):
    state, tree, params = case
    rebalancing = [d for d in schedule(state, tree, params).of(Preempt) if d.for_workload_id]
    assert params.policy == "fairshare" or rebalancing == []


@SETTINGS
@given(scenarios())
def test_a_signalled_run_is_never_signalled_again(case):
    state, tree, params = case
    for d in schedule(state, tree, params).of(Preempt):
        assert d.run.signalled_at is None


@SETTINGS
@given(scenarios())
def test_every_pending_workload_either_starts_or_has_a_reason(case):
    state, tree, params = case
    result = schedule(state, tree, params)
    began = {d.workload.id for d in result.of(Start)}
    for w in state.pending:
        assert (w.id in began) != bool(result.waiting.get(w.id))


@SETTINGS
@given(scenarios())
def test_a_pass_leaves_its_input_state_untouched(case):
    state, tree, params = case
    before = [(r.signalled_at, r.placement, r.protected_until) for r in state.running]
    pending = list(state.pending)
    schedule(state, tree, params)
    assert [(r.signalled_at, r.placement, r.protected_until) for r in state.running] == before
    assert state.pending == pending


def _summary(result):
    out = []
    for d in result.decisions:
        target = getattr(d, "workload", None) or getattr(d, "run", None) or d.host
        name = getattr(target, "id", None) or getattr(getattr(target, "workload", None), "id", None)
        out.append((type(d).__name__, name or target.name, getattr(d, "placement", None)))
    return out, result.waiting


def _decide_alike(one, other) -> None:
    """The two passes make the same decisions, with the same reasons, and list the same waits
    (``_summary``)."""
    assert [(type(d).__name__, d.reason) for d in one.decisions] == [
        (type(d).__name__, d.reason) for d in other.decisions
    ]
    assert _summary(one) == _summary(other)


def _walked_with(case, **methods):
    """A pass over ``case`` with these methods of the walk replaced."""
    import pytest

    from scheduler.engine import scheduling

    state, tree, params = case
    with pytest.MonkeyPatch.context() as mp:
        for name, method in methods.items():
            mp.setattr(scheduling._Walk, name, method)
        return schedule(state, tree, params)


def _state_at(case, now, running, pending, usage, claims, memo=None) -> ClusterState:
    """The state a driver hands a pass of ``case`` at ``now``, with its claims carried."""
    state = case[0]
    return ClusterState(now, state.hosts, list(running), list(pending), usage, state.capacity,
                        claims, memo=memo)


def _drive(case, rng, step_s: float, decide) -> None:
    """Drive several passes like a driver would: ``decide(now, running, pending, usage, claims)``
    makes each pass, and what it decides is applied (start, signal, stop) and its claims are
    carried to the next; between passes runs finish, hosts change state and budgets cross
    their entitlement as usage moves."""
    from scheduler.engine import Hold, HostDrained

    state = case[0]
    running, pending, usage = list(state.running), list(state.pending), dict(state.usage)
    claims = list(state.claims)
    for step in range(5):
        now = state.now + step_s * step
        result = decide(now, running, pending, usage, claims)
        claims = result.claims  # carried to the next pass, as a driver does
        for d in result.decisions:
            if isinstance(d, Start):
                running.append(Run(d.workload, now, d.placement, now + d.workload.min_runtime))
                pending.remove(d.workload)
            elif isinstance(d, Preempt):
                d.run.signalled_at = now
            elif isinstance(d, Stop):
                running.remove(d.run)
            elif isinstance(d, (Hold, HostDrained)):
                pass
        if running and rng.random() < 0.5:
            running.remove(rng.choice(running))  # a run completes
        if rng.random() < 0.3:
            host = rng.choice(state.hosts)
            host.state = rng.choice([HostState.AVAILABLE, HostState.DRAINING])
        if rng.random() < 0.5:
            usage = {leaf: rng.choice([0.0, 1e4, 1e5, 5e5, 2e6]) for leaf in usage}


def _drive_with_and_without_memo(case, rng, step_s: float) -> None:
    """With a memo each pass must decide what a pass without one decides, with the same
    reasons."""
    from scheduler.engine import EngineMemo

    _, tree, params = case
    memo = EngineMemo()

    def decide(now, running, pending, usage, claims):
        expected = schedule(_state_at(case, now, running, pending, usage, claims), tree, params)
        again = _state_at(case, now, running, pending, usage, claims, memo)
        _decide_alike(schedule(again, tree, params), expected)
        return expected

    _drive(case, rng, step_s, decide)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.randoms(use_true_random=False))
def test_a_memo_reused_across_passes_decides_exactly_as_a_fresh_pass(case, rng):
    _drive_with_and_without_memo(case, rng, step_s=200.0)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contended(), st.randoms(use_true_random=False))
def test_a_memo_reused_across_contended_passes_decides_exactly_as_a_fresh_pass(case, rng):
    """Under contention, where the preemption board kept across passes is read most: runs
    leave their protection and budgets cross their entitlement between passes."""
    _drive_with_and_without_memo(case, rng, step_s=400.0)


def _rules_at(case, now, usage):
    """The rules a pass of ``case`` at ``now`` with ``usage`` decides preemption by, holdings
    left empty (the board does not read them)."""
    from scheduler.engine.fairshare import Standing
    from scheduler.engine.preemption import Holdings, Rules

    state, tree, params = case
    healthy = sum(h.gpus for h in state.hosts if h.state != HostState.DOWN)
    return Rules(Standing(tree, usage, state.capacity), params, now,
                 Holdings(tree.fraction, healthy))


def _board_reads(board):
    """What a preemption board says of each host: its row, its allocated candidates' pairs,
    and its candidates in order of preference with their costs."""
    reads = {}
    for i, host in enumerate(board.hosts):
        row = zip(board.pair[i].tolist(), board.gpus[i].tolist(), strict=True)
        pairs = sorted((board.pair_budget[p], int(board.pair_gpus[p]), g) for p, g in row if p >= 0)
        options = [(cost, n, r.workload.id, r.number) for cost, n, r in board.options_at(host)]
        reads[host] = (int(board.base[i]), int(board.within[i]), float(board.until[i]),
                       float(board.most_over_used()[i]), pairs, options, board.emptiable_at(host))
    return reads


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contended(), st.randoms(use_true_random=False))
def test_a_board_kept_from_the_last_pass_reads_as_one_made_afresh(case, rng):
    """The board a pass leaves, brought to the next pass's floor and ratios, says of every
    host what a board made from that floor says."""
    from scheduler.engine import EngineMemo
    from scheduler.engine.preemption import Board

    state, tree, params = case
    memo = EngineMemo()

    def decide(now, running, pending, usage, claims):
        memo.plan.update(state.hosts, running)
        floor = memo.plan.floor()
        rules = _rules_at(case, now, usage)
        kept = memo.board
        if kept is not None and kept.follows(floor, rules):
            kept.rebase(floor, rules)
            assert _board_reads(kept) == _board_reads(Board(memo.plan.floor(), rules))
        return schedule(_state_at(case, now, running, pending, usage, claims, memo), tree,
                        params)

    _drive(case, rng, 400.0, decide)


def _held_by(case, running):
    """What each budget holds with unsignalled allocated runs, as a pass counts it."""
    from scheduler.engine.preemption import Holdings

    state, tree, _ = case
    holdings = Holdings(tree.fraction, sum(h.gpus for h in state.hosts
                                           if h.state != HostState.DOWN))
    for run in running:
        if run.workload.min_runtime > 0 and run.signalled_at is None:
            holdings.add(run.workload.budget, run.gpus)
    return holdings


def _reach_reads(board, w):
    reach = board.reach(w)
    return reach.open.tolist(), reach.bound.tolist(), reach.refused.tolist()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contended(), st.randoms(use_true_random=False))
def test_a_reach_kept_from_earlier_passes_reads_as_one_made_afresh(case, rng):
    """What each host offers a requester, kept on the board from pass to pass and while the
    holdings move within one, is what a board made afresh offers it."""
    from scheduler.engine import EngineMemo
    from scheduler.engine.fairshare import Standing
    from scheduler.engine.preemption import Board, Rules

    state, tree, params = case
    memo = EngineMemo()

    def decide(now, running, pending, usage, claims):
        memo.plan.update(state.hosts, running)
        floor = memo.plan.floor()

        def rules():
            return Rules(Standing(tree, usage, state.capacity), params, now,
                         _held_by(case, running), memo.board)

        kept = rules()
        if memo.board is not None and memo.board.follows(floor, kept):
            board, fresh = kept.board(floor), Board(memo.plan.floor(), rules())
            allocated = [w for w in pending if w.min_runtime > 0]
            for moved in rng.sample(allocated, min(3, len(allocated))):
                for w in allocated:
                    assert _reach_reads(board, w) == _reach_reads(fresh, w)
                kept.holdings.add(moved.budget, moved.gpus)  # as a pass moves them
                fresh.rules.holdings.add(moved.budget, moved.gpus)
        return schedule(_state_at(case, now, running, pending, usage, claims, memo), tree,
                        params)

    _drive(case, rng, 400.0, decide)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contended(), st.randoms(use_true_random=False))
def test_a_kept_board_says_a_search_finds_nothing_only_where_a_fresh_one_finds_nothing(case, rng):
    """The searches that found no victims in earlier passes, carried on the kept board, skip a
    search only where one on a board made afresh, with a host held or not, finds no victims
    and no run the final-share rule keeps."""
    from scheduler.engine import EngineMemo
    from scheduler.engine.preemption import victims_for

    state, tree, params = case
    memo = EngineMemo()

    def decide(now, running, pending, usage, claims):
        memo.plan.update(state.hosts, running)

        def rules():
            return _rules_at(case, now, usage)

        kept, floor, fresh = memo.board, memo.plan.floor(), memo.plan.floor()
        if kept is not None and kept.follows(floor, rules()):
            kept.rebase(floor, rules())
            held = rng.choice([None, *floor.size])
            if held is not None:
                until = now + rng.choice([600.0, 3600.0, 4 * 3600.0])
                floor.hold(held, until)
                fresh.hold(held, until)
                kept.sync()
            for w in pending:
                for ends in (now + 1800.0, now + 7200.0, math.inf):
                    if w.min_runtime > 0 and kept.finds_nothing(w, ends):
                        afresh = rules()
                        assert victims_for(w, fresh, afresh, ends) is None
                        assert w.id not in afresh.blocked
        return schedule(_state_at(case, now, running, pending, usage, claims, memo), tree,
                        params)

    _drive(case, rng, 400.0, decide)


@SETTINGS
@given(scenarios())
def test_cached_waiting_reasons_are_those_formatted_afresh(case):
    """The cached waiting reasons give the same decisions, reasons and waits as formatting
    every reason afresh."""
    from scheduler.engine import scheduling

    fast = schedule(*case)
    cached = scheduling._Walk._why

    def afresh(walk, w):
        walk._whys.clear()
        return cached(walk, w)

    plain = _walked_with(case, _why=afresh)
    _decide_alike(fast, plain)
    assert fast.order == plain.order


@SETTINGS
@given(st.one_of(scenarios(), contended()))
def test_a_stopped_walk_decides_exactly_what_a_full_walk_decides(case):
    """Past the point where nothing more can start, preempt or hold, the walk gives the rest of
    the queue shared waits, and leaves the rest of a leaf's line once none of it can: decisions,
    reasons and waits are those of considering each one."""
    stopped = schedule(*case)
    full = _walked_with(case, _settled=lambda walk, w, record=True: None,
                        _inert=lambda walk, leaf, spans, after: False)
    _decide_alike(stopped, full)
    assert stopped.waits == full.waits
    assert stopped.claims == full.claims
    assert (stopped.claims_open_room, stopped.lifts_share_block) == (
        full.claims_open_room, full.lifts_share_block)


@SETTINGS
@given(st.one_of(scenarios(), contended()))
def test_a_budget_skipping_searches_after_finding_no_victims_decides_as_searching(case):
    """A request skips its victim search when a request of its budget no larger found none on
    the hosts open to it, or on more (every host, where the held ones are closed to it):
    decisions, reasons and waits are those of every request searching."""
    skipping = schedule(*case)
    searching = _walked_with(case, _found_nothing=lambda walk, budget, g, ends: False)
    _decide_alike(skipping, searching)
    assert skipping.waits == searching.waits


@SETTINGS
@given(st.one_of(scenarios(), contended()))
def test_a_victim_search_remembered_for_an_unchanged_floor_decides_as_searching_again(case):
    """A search that found no victims is not repeated for the same budget, size and open hosts
    while the floor and holdings are unchanged: decisions, reasons and waits are those of
    searching afresh for every waiting workload."""
    import itertools

    remembered = schedule(*case)
    never_equal = itertools.count()
    afresh = _walked_with(case, _opening=lambda walk, ends: next(never_equal))
    _decide_alike(remembered, afresh)
    assert remembered.waits == afresh.waits


@SETTINGS
@given(st.one_of(scenarios(), contended()))
def test_a_pass_on_a_kept_queue_decides_exactly_what_a_pass_on_a_list_decides(case):
    """A driver's ``PendingQueue`` (ranked by merging its leaves) and the same workloads as a
    list (ranked by one sort) give the same order, decisions, reasons and waits."""
    from dataclasses import replace

    from scheduler.engine.pending import PendingQueue

    state, tree, params = case
    listed = schedule(state, tree, params)
    kept = schedule(replace(state, pending=PendingQueue(state.pending)), tree, params)
    assert kept.order == listed.order
    _decide_alike(kept, listed)
    assert kept.waits == listed.waits


@SETTINGS
@given(contended())
def test_a_driver_that_reads_no_order_gets_the_same_pass_without_one(case):
    """The simulator's memo reads no ``Pass.order``: a fair-share pass on its kept queue
    decides what a pass that lists the order decides, and lists none."""
    from dataclasses import replace

    from scheduler.engine.pending import PendingQueue
    from scheduler.engine.scheduling import EngineMemo

    state, tree, params = case
    listing = schedule(replace(state, pending=PendingQueue(state.pending), memo=EngineMemo()),
                       tree, params)
    silent = schedule(replace(state, pending=PendingQueue(state.pending),
                              memo=EngineMemo(reads_order=False)), tree, params)
    _decide_alike(silent, listing)
    assert silent.waits == listing.waits
    assert silent.order == [] and len(listing.order) == len(state.pending)


def strict(case):
    """The same case under strict FIFO: a long line behind a head that cannot start."""
    from dataclasses import replace

    state, tree, params = case
    return state, tree, replace(params, policy="fifo")


def backfill(case):
    """The same case under FIFO with backfill: a reservation, and a long queue around it."""
    from dataclasses import replace

    state, tree, params = case
    return state, tree, replace(params, policy="fifo-backfill")


def partitioned(case_and_inside):
    """The same case under static partitions, one group of hosts per budget (a budget without
    hosts has nowhere to run), each run of its host's group, ``inside`` each partition."""
    from dataclasses import replace

    (state, tree, params), inside = case_and_inside
    leaves = tree.leaves
    hosts = [replace(h, group=leaves[i % len(leaves)]) for i, h in enumerate(state.hosts)]
    group = {h.name: h.group for h in hosts}
    running = [replace(r, workload=replace(r.workload, budget=group[r.placement.hosts[0]]))
               for r in state.running]
    return (replace(state, hosts=hosts, running=running), tree,
            replace(params, policy="partitions", partition_policy=inside))


@SETTINGS
@given(st.one_of(scenarios(), contended(), contended().map(strict), contended().map(backfill),
                 scenarios().map(backfill),
                 st.tuples(contended(), st.sampled_from(["fifo", "fifo-backfill"])).map(
                     partitioned)), st.data())
def test_passes_that_name_waits_in_bulk_show_every_workload_a_full_passs_wait(case, data):
    """A driver keeping its queue and memo across passes, and keeping the wait of whatever a
    pass leaves out, shows every waiting workload the wait a pass on a plain list gives it
    (which leaves nothing out), while work joins and leaves and time moves between passes.
    Under fair share and FIFO with backfill the pass names the others' waits in bulk
    (``Pass.rest``); under partitions each partition's queue is kept like the whole queue."""
    from dataclasses import replace

    from scheduler.engine.pending import PendingQueue
    from scheduler.engine.scheduling import EngineMemo

    state, tree, params = case
    queue, memo = PendingQueue(state.pending), EngineMemo()
    # a strict line's workloads share its wait (``Pass.behind``): the line of each, and the
    # last wait of each line
    shown, in_line, line_wait = {}, {}, {}
    for step in range(4):
        kept = schedule(replace(state, pending=queue, memo=memo), tree, params)
        full = schedule(replace(state, pending=list(queue)), tree, params)
        assert _summary(kept)[0] == _summary(full)[0]
        if params.policy == "partitions":
            assert set(kept.order) <= set(full.order)
        elif params.policy == "fairshare":
            assert kept.order == full.order
        elif kept.rest is None:
            # a strict line is read up to its head
            assert kept.order == full.order[:len(kept.order)]
            assert kept.behind or kept.order == full.order
        else:  # the walk per size looks at some of the queue, in its order
            order = iter(full.order)
            assert all(wid in order for wid in kept.order)
        if kept.rest is not None:
            shown.update((w.id, kept.rest.of(w)) for w in queue
                         if w.id in full.waits and w.id not in kept.waits)
        line_wait.update(kept.behind)
        lines = {id(wait): line for line, wait in kept.behind.items()}
        for wid, wait in kept.waits.items():
            if id(wait) in lines:
                in_line[wid] = lines[id(wait)]
            else:
                in_line.pop(wid, None)
                shown[wid] = wait
        shown.update((wid, line_wait[line]) for wid, line in in_line.items())
        assert {w.id: shown[w.id] for w in queue if w.id in full.waits} == full.waits
        if len(queue):
            for w in data.draw(st.lists(st.sampled_from(list(queue)), unique=True), "leaving"):
                queue.remove(w)
        # newcomers like the work already there: the same budgets and sizes, so that they join
        # tails that are otherwise unchanged
        like = list(queue) or state.pending
        for j in range(data.draw(st.integers(0, 3), "joining") if like else 0):
            queue.add(replace(data.draw(st.sampled_from(like), "like"), id=f"n{step}-{j}",
                              submitted=data.draw(st.floats(0, NOW), "submitted")))
        state = replace(state, now=state.now + data.draw(st.sampled_from([0.0, 60.0, 3600.0])))
