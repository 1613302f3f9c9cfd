"""Placement: best-fit on one host, whole hosts within one network group, real indices."""

from __future__ import annotations

from dataclasses import replace

from engine_builders import hosts, job, run
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.engine import Floor, FloorPlan, HostState, Placement, place
from scheduler.engine.placement import Room, RunLog


def floor_with(host_list, *runs):
    return Floor(host_list, runs)


def test_small_workload_goes_to_the_tightest_host_that_fits():
    busy = run(job("x", gpus=5), "h1", range(5))  # h1 has 3 free, h0 all 8
    p = place(2, floor_with(hosts(2), busy))
    assert p.hosts == ("h1",)


def test_placement_uses_real_free_indices():
    busy = run(job("x", gpus=3), "h0", [0, 2, 4])
    p = place(2, floor_with(hosts(1), busy))
    assert p == Placement((("h0", (1, 3)),))


def test_single_host_workload_is_never_split_across_hosts():
    a = run(job("x", gpus=4), "h0", range(4))
    b = run(job("y", gpus=4), "h1", range(4))
    assert place(6, floor_with(hosts(2), a, b)) is None


def test_large_workload_takes_whole_hosts_of_one_network_group():
    # groups: h0, h2 in g0; h1, h3 in g1. One GPU used on h2 leaves only g1 whole.
    busy = run(job("x"), "h2", [0])
    p = place(16, floor_with(hosts(4, groups=2), busy))
    assert p.hosts == ("h1", "h3")
    assert p.gpus == 16


def test_large_workload_prefers_the_group_it_fills_exactly():
    # g0 has 3 whole hosts (h0, h2, h4), g1 has 2 (h1, h3): 16 GPUs best fit g1
    p = place(16, floor_with(hosts(5, groups=2)))
    assert p.hosts == ("h1", "h3")


def test_large_workload_spans_groups_when_no_group_suffices():
    p = place(16, floor_with(hosts(2, groups=2)))
    assert set(p.hosts) == {"h0", "h1"}


def test_large_workload_does_not_use_partly_busy_hosts():
    busy = run(job("x"), "h1", [7])
    assert place(16, floor_with(hosts(2), busy)) is None


def test_remainder_of_a_large_workload_uses_lowest_indices_of_its_last_host():
    p = place(12, floor_with(hosts(2)))
    assert p == Placement((("h0", tuple(range(8))), ("h1", (0, 1, 2, 3))))


def test_hosts_that_are_not_available_take_no_placements():
    host_list = hosts(3)
    host_list[0].state = HostState.DRAINING
    host_list[1].state = HostState.DOWN
    p = place(1, floor_with(host_list))
    assert p.hosts == ("h2",)


def test_held_host_only_takes_work_that_ends_before_the_reservation():
    f = floor_with(hosts(1))
    f.hold("h0", until=1000.0)
    assert place(1, f) is None
    assert place(1, f, ends=2000.0) is None
    assert place(1, f, ends=900.0).hosts == ("h0",)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=6),  # GPUs used on each host
    st.lists(st.booleans(), min_size=6, max_size=6),  # whether each host is available
    st.sampled_from([1, 2, 3, 4, 8, 12, 16, 24]),
)
def test_may_fit_holds_wherever_place_finds_room(used_per_host, available, gpus):
    """``Room.may_fit`` is what drivers ask before a pass that could start a line's head: it
    may say yes where ``place`` then finds nothing, never no where ``place`` finds room."""
    cluster = [replace(h, state=HostState.AVAILABLE if up else HostState.DOWN)
               for h, up in zip(hosts(len(used_per_host), groups=2), available, strict=False)]
    busy = [run(job(f"x{i}", gpus=n), h.name, range(n))
            for i, (h, n) in enumerate(zip(cluster, used_per_host, strict=True)) if n]
    used = {h.name: set(range(n)) for h, n in zip(cluster, used_per_host, strict=True)}
    if place(gpus, floor_with(cluster, *busy)) is not None:
        assert Room(cluster, used).may_fit(gpus)


def test_gpus_scattered_over_hosts_are_no_room():
    cluster = hosts(2)
    used = {"h0": set(range(5)), "h1": set(range(5))}  # 6 free in all, 3 on each
    assert not Room(cluster, used).may_fit(4) and Room(cluster, used).may_fit(3)
    assert not Room(cluster, {"h0": set(), "h1": {0}}).may_fit(16)  # one host not whole


def test_a_host_that_is_not_available_is_no_room():
    cluster = [hosts(2)[0], replace(hosts(2)[1], state=HostState.DRAINING)]
    room = Room(cluster, {"h0": set(range(4)), "h1": set()})
    assert (room.total, room.may_fit(4), room.may_fit(5), room.may_fit(16)) == (4, True, False,
                                                                                 False)


_ROOM_STEPS = st.lists(st.tuples(st.integers(0, 3), st.integers(-8, 8), st.booleans()),
                       max_size=40)


@settings(max_examples=300, deadline=None)
@given(_ROOM_STEPS, st.sampled_from([1, 3, 8, 12, 16, 24, 32]))
def test_a_room_kept_step_by_step_is_the_room_counted_afresh(steps, gpus):
    """A driver keeps one ``Room`` across a run, told of every GPU taken or given back and of
    every host that comes or goes: it must answer as one counted from the hosts as they are."""
    cluster = hosts(4)
    used = {h.name: set() for h in cluster}
    room = Room(cluster, used)
    for index, change, flip in steps:
        host = cluster[index]
        if flip:
            if host.state == HostState.AVAILABLE:
                room.close(host.name)
                cluster[index] = host = replace(host, state=HostState.DOWN)
            else:
                cluster[index] = host = replace(host, state=HostState.AVAILABLE)
                room.open(host.name, host.gpus, host.gpus - len(used[host.name]))
        taken = used[host.name]
        change = max(-(host.gpus - len(taken)), min(change, len(taken)))  # what can happen
        if change < 0:
            taken.update(sorted(set(range(host.gpus)) - taken)[:-change])
        else:
            for i in sorted(taken)[:change]:
                taken.discard(i)
        room.change(host.name, change)
        fresh = Room(cluster, used)
        assert (room.total, room.whole, room.may_fit(gpus)) == (fresh.total, fresh.whole,
                                                                fresh.may_fit(gpus))
        assert room.total == sum(h.gpus - len(used[h.name]) for h in cluster
                                 if h.state == HostState.AVAILABLE)


# each of 8 runs on its own GPUs of 4 hosts: (budget, GPUs, allocated)
_RUNS = [("a/a1", 3, True), ("a/a1", 5, True), ("b/b1", 2, True), ("b/b1", 4, False),
         ("a/a2", 7, True), ("b/b1", 1, True), ("a/a2", 6, False), ("a/a1", 2, True)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(range(len(_RUNS))), max_size=8),
                          st.lists(st.booleans(), min_size=8, max_size=8),
                          st.sampled_from([HostState.AVAILABLE, HostState.DRAINING,
                                           HostState.DOWN])),
                min_size=1, max_size=8))
def test_a_kept_plan_counts_the_gpus_each_budget_holds_as_a_count_of_its_runs(steps):
    """A ``FloorPlan`` kept across passes follows what each budget's unsignalled allocated runs
    hold (``holding``) and the healthy GPUs, whatever starts, ends, is signalled or changes host
    state between passes."""
    from scheduler.engine.placement import FloorPlan

    runs = []
    for i, (budget, gpus, allocated) in enumerate(_RUNS):
        w = job(f"r{i}", budget, gpus=gpus, min_runtime=3600.0 if allocated else 0.0)
        runs.append(run(w, f"h{i // 2}", range(8 - gpus, 8) if i % 2 else range(gpus)))
    plan = FloorPlan()
    cluster = hosts(4)
    for present, signals, h0_state in steps:
        for r, signalled in zip(runs, signals, strict=True):
            r.signalled_at = 1.0 if signalled else None
        if h0_state != cluster[0].state:
            cluster = [replace(cluster[0], state=h0_state), *cluster[1:]]
        running = [runs[i] for i in sorted(set(present))]
        plan.update(cluster, running)
        expected: dict[str, int] = {}
        for r in running:
            if r.signalled_at is None and r.workload.min_runtime > 0:
                expected[r.workload.budget] = expected.get(r.workload.budget, 0) + r.gpus
        assert plan.holding == expected
        assert plan.healthy == (24 if h0_state == HostState.DOWN else 32)


# a step of a driver between passes: (action, which run or workload, GPUs, allocated)
_RUN_STEPS = st.lists(st.tuples(st.sampled_from(["start", "end", "signal"]), st.integers(0, 30),
                                st.integers(1, 16), st.booleans()), max_size=12)


def _plan_picture(plan: FloorPlan) -> tuple:
    return (plan.used, {h: sorted(((r.workload.id, i) for r, i in runs)) for h, runs in
                        plan.runs.items()}, {h: sorted(i) for h, i in plan.releasing.items()},
            plan.free, [sorted(b) for b in plan.bucket], plan.whole, plan.holding, plan.known,
            plan.signalled)


@settings(max_examples=200, deadline=None)
@given(st.lists(_RUN_STEPS, min_size=1, max_size=8))
def test_a_plan_told_what_changed_is_the_plan_that_compares_every_run(passes):
    """A driver that tells the floor plan each run it starts, ends or signals (``RunLog``)
    must leave it as a plan that compares every run with the last pass's finds it, pass
    after pass, including runs that start and end between two passes."""
    cluster = hosts(3)
    running: dict[str, object] = {}
    log, told, compared = RunLog(), FloorPlan(), FloorPlan()
    made = 0
    for steps in passes:
        for action, which, gpus, allocated in steps:
            if action == "start":
                floor = Floor(cluster, running.values())
                placement = place(gpus, floor)
                if placement is not None:
                    made += 1
                    w = job(f"w{made}", budget="a/a1" if allocated else "b/b1", gpus=gpus,
                            min_runtime=3600.0 if allocated else 0.0)
                    r = run(w, "", (), slots=placement.slots)
                    running[w.id] = r
                    log.note(r, True)
            elif running:
                r = list(running.values())[which % len(running)]
                if action == "end":
                    del running[r.workload.id]
                    log.note(r, False)
                elif r.signalled_at is None:
                    r.signalled_at = 1.0
                    log.note(r, True)
        told.update(cluster, list(running.values()), log)
        compared.update(cluster, list(running.values()))
        assert _plan_picture(told) == _plan_picture(compared)
