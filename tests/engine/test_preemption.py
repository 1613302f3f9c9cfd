"""Who may be preempted, and which set is chosen."""

from __future__ import annotations

import math

from engine_builders import HOUR, hosts, job, one_pass, preempted, run, started, state, tree

from scheduler.engine.model import Host

NOW = 10 * HOUR
ONE_HOST = hosts(1)
CAPACITY = 1000.0  # GPU-s; entitlements below are fractions of it


def usage(**ratios):
    """Leaf usage giving each leaf (a__a1 -> "a/a1") the ratio asked, for halves-of-halves
    trees where every leaf below has fraction 0.5 (one leaf per program) or 0.25."""
    return {k.replace("__", "/"): v for k, v in ratios.items()}


def past(w, host, idx):
    """A run started long ago: past its protection."""
    return run(w, host, idx, started=0.0)


def busy(budget, *host_names):
    """Protected runs of ``budget`` filling whole hosts: GPUs its branch holds besides the
    contested host h0, so that the final-share rule lets h0's GPUs move (the requester's
    branch then stays below the victim's)."""
    return [run(job(f"busy-{h}", budget, gpus=8), h, range(8), started=NOW) for h in host_names]


THREE_HOSTS = hosts(3)
TWO = tree(a=1, b=1, a__a1=1, b__b1=1)  # a/a1 and b/b1 each hold 50%: entitlement 500


def test_unallocated_runs_are_preempted_before_allocated_ones():
    free = past(job("free", "b/b1", gpus=4, min_runtime=0), "h0", range(4))
    paid = past(job("paid", "b/b1", gpus=4), "h0", range(4, 8))
    st = state(
        NOW,
        ONE_HOST,
        [free, paid],
        [job("req", "a/a1", gpus=4)],
        usage={"b/b1": 900.0, "a/a1": 200.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, TWO)) == ["free"]


def test_preemption_reason_names_both_branches_and_their_ratios():
    # a/a1: 200/500 = 40%; b/b1: 900/500 = 180%; they diverge at the programs a and b
    paid = past(job("paid", "b/b1", gpus=8), "h0", range(8))
    st = state(
        NOW,
        THREE_HOSTS,
        [paid, *busy("b/b1", "h1", "h2")],
        [job("req", "a/a1", gpus=8)],
        usage={"b/b1": 900.0, "a/a1": 200.0},
        capacity=CAPACITY,
    )
    [decision] = one_pass(st, TWO).decisions
    assert decision.reason == (
        "preempted to make room for workload #req of a/a1: b at 180% of entitlement, a at 40%"
    )
    assert decision.for_workload_id == "req"


NESTED = tree(a=1, b=1, a__a1=1, a__a2=1, b__b1=1)  # a1, a2: 250 each; b1: 500


def test_ratios_compared_where_branches_diverge_inside_a_program():
    # a1 at 10% (25/250), a2 at 200% (500/250); program a at 525/500 = 105% is not over,
    # but a1 and a2 diverge at the project level, where a2 is over its entitlement
    victim = past(job("v", "a/a2", gpus=8), "h0", range(8))
    st = state(
        NOW,
        THREE_HOSTS,
        [victim, *busy("a/a2", "h1", "h2")],
        [job("req", "a/a1", gpus=8)],
        usage={"a/a1": 25.0, "a/a2": 500.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, NESTED)) == ["v"]


def test_over_used_leaf_is_safe_when_its_program_is_within_hysteresis_at_divergence():
    # requester b/b1 at 0%; victim a/a2 at 200% but programs diverge: a at 105% <= 110%
    victim = past(job("v", "a/a2", gpus=8), "h0", range(8))
    st = state(
        NOW,
        ONE_HOST,
        [victim],
        [job("req", "b/b1", gpus=8)],
        usage={"a/a1": 25.0, "a/a2": 500.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, NESTED)) == []


def test_zero_hysteresis_lets_a_branch_just_over_entitlement_be_preempted():
    victim = past(job("v", "a/a2", gpus=8), "h0", range(8))
    st = state(
        NOW,
        THREE_HOSTS,
        [victim, *busy("a/a2", "h1", "h2")],
        [job("req", "b/b1", gpus=8)],
        usage={"a/a1": 25.0, "a/a2": 500.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, NESTED, hysteresis=0.0)) == ["v"]


def test_protected_run_is_never_preempted_for_rebalancing():
    young = run(job("young", "b/b1", gpus=8, min_runtime=HOUR), "h0", range(8), started=NOW - 60)
    st = state(
        NOW,
        ONE_HOST,
        [young],
        [job("req", "a/a1", gpus=8)],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    result = one_pass(st, TWO)
    assert preempted(result) == []


def test_budget_within_entitlement_is_never_preempted():
    # b/b1 at 90% ranks below a/a1 at 10%, but is within its entitlement
    victim = past(job("v", "b/b1", gpus=8), "h0", range(8))
    st = state(
        NOW,
        ONE_HOST,
        [victim],
        [job("req", "a/a1", gpus=8)],
        usage={"b/b1": 450.0, "a/a1": 50.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, TWO)) == []


def test_leaf_within_entitlement_is_safe_even_when_its_program_is_over():
    # b at (775 + 125) / 500 = 180%, but its leaf b2 is at 125/250 = 50%
    t = tree(a=1, b=1, a__a1=1, b__b1=1, b__b2=1)
    victim = past(job("v", "b/b2", gpus=8), "h0", range(8))
    st = state(
        NOW,
        ONE_HOST,
        [victim],
        [job("req", "a/a1", gpus=8)],
        usage={"b/b1": 775.0, "b/b2": 125.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, t)) == []


def test_run_of_a_higher_ranked_branch_is_never_preempted():
    # requester b/b1 at 200%, victim a/a1 at 150%: a ranks above b
    victim = past(job("v", "a/a1", gpus=8), "h0", range(8))
    st = state(
        NOW,
        ONE_HOST,
        [victim],
        [job("req", "b/b1", gpus=8)],
        usage={"a/a1": 750.0, "b/b1": 1000.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, TWO)) == []


def test_victim_set_frees_the_fewest_gpus():
    guard = run(job("guard", "b/b1", gpus=2), "h0", [0, 1], started=NOW)  # protected
    four = past(job("four", "b/b1", gpus=4), "h0", [2, 3, 4, 5])
    two = past(job("two", "b/b1", gpus=2), "h0", [6, 7])
    st = state(
        NOW,
        ONE_HOST,
        [guard, four, two],
        [job("req", "a/a1", gpus=2)],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, TWO)) == ["two"]


def test_resumable_victim_is_preferred_at_equal_cost():
    keeps = past(job("keeps", "b/b1", gpus=4, resumable=False), "h0", range(4))
    resumes = past(job("resumes", "b/b1", gpus=4, resumable=True), "h0", range(4, 8))
    st = state(
        NOW,
        ONE_HOST,
        [keeps, resumes],
        [job("req", "a/a1", gpus=4)],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, TWO)) == ["resumes"]


def test_most_over_used_victim_is_preferred_at_equal_cost():
    # three programs of 1/3 each (entitlement 333.3): b at 300%, c at 150%
    t = tree(a=1, b=1, c=1, a__a1=1, b__b1=1, c__c1=1)
    b = past(job("b-run", "b/b1", gpus=4), "h0", range(4))
    c = past(job("c-run", "c/c1", gpus=4), "h0", range(4, 8))
    st = state(
        NOW,
        THREE_HOSTS,
        [b, c, *busy("b/b1", "h1"), *busy("c/c1", "h2")],
        [job("req", "a/a1", gpus=4)],
        usage={"b/b1": 1000.0, "c/c1": 500.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, t)) == ["b-run"]


def test_unallocated_workload_never_preempts():
    free = past(job("free", "b/b1", gpus=8, min_runtime=0), "h0", range(8))
    st = state(
        NOW, ONE_HOST, [free], [job("req", "a/a1", gpus=8, min_runtime=0)], capacity=CAPACITY
    )
    assert preempted(one_pass(st, TWO)) == []


def test_requester_waiting_on_signalled_gpus_triggers_no_further_preemption():
    leaving = run(job("leaving", "b/b1", gpus=4), "h0", range(4), signalled_at=NOW - 10)
    other = past(job("other", "b/b1", gpus=4), "h0", range(4, 8))
    st = state(
        NOW,
        ONE_HOST,
        [leaving, other],
        [job("req", "a/a1", gpus=4)],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    result = one_pass(st, TWO)
    assert preempted(result) == []
    assert "being released" in result.waiting["req"]


def test_second_requester_does_not_reuse_gpus_claimed_by_the_first():
    leaving = run(job("leaving", "b/b1", gpus=4), "h0", range(4), signalled_at=NOW - 10)
    other = past(job("other", "b/b1", gpus=4), "h0", range(4, 8))
    first = job("first", "a/a1", gpus=4, submitted=1)
    second = job("second", "a/a1", gpus=4, submitted=2)
    st = state(
        NOW,
        THREE_HOSTS,
        [leaving, other, *busy("b/b1", "h1", "h2")],
        [first, second],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    result = one_pass(st, TWO)
    assert preempted(result) == ["other"]
    assert "being released" in result.waiting["first"]
    assert "preempting 1 run" in result.waiting["second"]


def test_waiting_reason_says_nothing_may_be_preempted_and_gives_the_ratio():
    young = run(job("young", "b/b1", gpus=8), "h0", range(8), started=NOW - 60)
    st = state(
        NOW,
        ONE_HOST,
        [young],
        [job("req", "a/a1", gpus=8)],
        usage={"a/a1": 100.0, "b/b1": 900.0},
        capacity=CAPACITY,
    )
    why = one_pass(st, TWO).waiting["req"]
    assert why.startswith("needs 8 GPUs, 0 free; no run it may preempt (a/a1 at 20%")


def test_large_requester_empties_whole_hosts_of_one_group():
    # four hosts, groups g0 = h0 h2, g1 = h1 h3; h1 holds a protected run, so only g0 can be
    # emptied for a 16-GPU requester
    host_list = hosts(4, groups=2)
    runs = [past(job(f"v{i}", "b/b1", gpus=8), f"h{i}", range(8)) for i in (0, 2, 3)]
    runs.append(run(job("young", "b/b1", gpus=8), "h1", range(8), started=NOW - 60))
    st = state(
        NOW,
        host_list,
        runs,
        [job("req", "a/a1", gpus=16)],
        usage={"b/b1": 900.0},
        capacity=CAPACITY,
    )
    assert sorted(preempted(one_pass(st, TWO))) == ["v0", "v2"]


def test_deeper_tree_compares_researchers_under_one_project():
    # a/p/alice and a/p/bob split project a/p (1 of 1 under a, a 1 of 2): 25% each = 250;
    # bob at 200% and alice at 0% diverge under a/p
    t = tree(a=1, b=1, a__p=1, a__p__alice=1, a__p__bob=1, b__b1=1)
    victim = past(job("v", "a/p/bob", gpus=8), "h0", range(8))
    st = state(
        NOW,
        THREE_HOSTS,
        [victim, *busy("a/p/bob", "h1", "h2")],
        [job("req", "a/p/alice", gpus=8)],
        usage={"a/p/bob": 500.0},
        capacity=CAPACITY,
    )
    assert preempted(one_pass(st, t)) == ["v"]


THREE = tree(a=1, b=1, c=1, a__a1=1, b__b1=1, c__c1=1)  # a1, b1, c1: a third each


def _held_floor_state(debug_duration: float):
    """Two full hosts. b/b1's protected runs keep h0 and h1 busy for 5 more hours; h1 also
    runs 4 GPUs of unallocated work. a/a1 (0%) asks for 16 GPUs: it can neither start nor
    preempt (protected work), so it holds h0 and h1 until NOW + 5 h. c/c1 (30%) ranks below
    a/a1 and asks for one GPU."""
    cap = 16 * NOW
    prot = run(job("prot", "b/b1", gpus=8, min_runtime=8 * HOUR), "h0", range(8),
               started=NOW - 3 * HOUR)
    prot2 = run(job("prot2", "b/b1", gpus=4, min_runtime=8 * HOUR), "h1", range(4),
                started=NOW - 3 * HOUR)
    free = run(job("free", "b/b1", gpus=4, min_runtime=0), "h1", range(4, 8),
               started=NOW - HOUR)
    big = job("big", "a/a1", gpus=16, min_runtime=8 * HOUR, duration=10 * HOUR)
    dbg = job("dbg", "c/c1", gpus=1, min_runtime=900, duration=debug_duration, submitted=NOW)
    usage = {"a/a1": 0.0, "b/b1": 0.6 * cap, "c/c1": 0.1 * cap}
    return state(NOW, hosts(2), [prot, prot2, free], [big, dbg], usage=usage, capacity=cap)


def test_short_requester_may_preempt_unallocated_work_on_a_held_host():
    # dbg would be gone by NOW + 300 s grace + 600 s, long before the hold starts (NOW + 5 h):
    # the backfill rule lets it use the held host, so it may also displace unallocated work
    result = one_pass(_held_floor_state(600.0), THREE)
    [hold] = [d for d in result.decisions if type(d).__name__ == "Hold"]
    assert hold.hosts == ("h0", "h1") and hold.until == NOW + 5 * HOUR
    assert preempted(result) == ["free"]
    assert result.waiting["dbg"].startswith("preempting 1 run(s) on h1")


def test_requester_that_would_outlast_the_reservation_leaves_a_held_host_alone():
    # 6 h of work ends after the hold starts (NOW + 5 h): not allowed on h0 or h1
    result = one_pass(_held_floor_state(6 * HOUR), THREE)
    assert preempted(result) == []
    assert "hosts held for workload #big" in result.waiting["dbg"]


def test_a_request_outlasting_the_reservation_finds_no_victims_without_stopping_a_short_one():
    # c/c1's long request, ahead in its line, may not use the held hosts and finds no victims
    # elsewhere; its short request may use them: it searches anew and displaces the
    # unallocated work on h1
    st = _held_floor_state(600.0)
    st.pending.append(job("long", "c/c1", gpus=1, min_runtime=900, duration=6 * HOUR,
                          submitted=NOW - 60))
    result = one_pass(st, THREE)
    assert preempted(result) == ["free"]
    assert result.waiting["dbg"].startswith("preempting 1 run(s) on h1")
    assert "hosts held for workload #big" in result.waiting["long"]


def test_debug_job_of_an_over_used_program_waits_for_a_branch_within_entitlement():
    # c/c1 at 150% asks for one GPU; b/b1 (90%, past protection) fills the host: b ranks
    # above c and is within its entitlement, so nothing may be preempted
    cap = 8 * NOW
    busy = past(job("busy", "b/b1", gpus=8), "h0", range(8))
    dbg = job("dbg", "c/c1", gpus=1, min_runtime=900, duration=600, submitted=NOW)
    usage = {"b/b1": 0.9 * cap / 3, "c/c1": 1.5 * cap / 3}
    result = one_pass(state(NOW, ONE_HOST, [busy], [dbg], usage=usage, capacity=cap), THREE)
    assert preempted(result) == [] and not started(result)
    assert "no run it may preempt (c/c1 at 150% of entitlement)" in result.waiting["dbg"]


def _flooded_by_a1():
    """Scenario 2 of issue 10 in one pass: a1 (35%) holds all 64 GPUs with 8-GPU runs past
    their protection and is far over its entitlement; b (65%, idle) asks for 8 x 8 GPUs."""
    t = tree(a1=35, b=65)
    runs = [past(job(f"a1-{i}", "a1", gpus=8), f"h{i}", range(8)) for i in range(8)]
    pending = [job(f"b-{i}", "b", gpus=8, submitted=i) for i in range(8)]
    cap = 64 * 7 * 86400.0
    return state(NOW, hosts(8), runs, pending, usage={"a1": cap}, capacity=cap), t


def test_one_pass_stops_at_the_final_share_crossing():
    # b after k transfers holds 8k of 41.6 entitled GPUs, a1 64 - 8k of 22.4: k = 5 gives
    # 96% against 107%, k = 6 would give 115%, above a1 at 71% and above b's own share
    st, t = _flooded_by_a1()
    assert len(preempted(one_pass(st, t))) == 5


def test_the_first_request_beyond_the_crossing_says_why_it_waits():
    st, t = _flooded_by_a1()
    why = one_pass(st, t).waiting["b-5"]
    assert ("final-share rule: b would hold 115% of its GPU share, above its own share and "
            "above a1 at 71%") in why


def test_a_branch_may_reclaim_up_to_its_share_from_the_last_run_of_an_over_used_one():
    # b/b1 (50%, at 180% of its window entitlement) holds the whole 8-GPU host with one run;
    # a/a1 asks for 4: after the transfer a holds 4 of its 4 entitled GPUs (100%), above b
    # (0%) but within its own share, so it may (KAI's reclaim)
    paid = past(job("paid", "b/b1", gpus=8), "h0", range(8))
    st = state(NOW, ONE_HOST, [paid], [job("req", "a/a1", gpus=4)],
               usage={"b/b1": 900.0}, capacity=CAPACITY)
    assert preempted(one_pass(st, TWO)) == ["paid"]


def test_a_branch_may_not_reclaim_beyond_its_share_from_the_last_run_of_another():
    # the same, asking for all 8 GPUs: a would hold 200% of its share, b 0%
    paid = past(job("paid", "b/b1", gpus=8), "h0", range(8))
    st = state(NOW, ONE_HOST, [paid], [job("req", "a/a1", gpus=8)],
               usage={"b/b1": 900.0}, capacity=CAPACITY)
    assert preempted(one_pass(st, TWO)) == []


def test_a_kept_board_forgets_the_hosts_the_last_pass_held():
    """A reservation lives for one pass: the next pass's board has the held host open again,
    though the host's runs are the same."""
    from scheduler.engine.fairshare import Standing
    from scheduler.engine.model import Params
    from scheduler.engine.placement import FloorPlan
    from scheduler.engine.preemption import Board, Holdings, Rules

    plan = FloorPlan()
    plan.update(ONE_HOST, [past(job("b-run", "b/b1", gpus=4), "h0", range(4))])
    rules = Rules(Standing(TWO, {"b/b1": 1000.0}, CAPACITY), Params(), NOW,
                  Holdings(TWO.fraction, 8))
    floor = plan.floor()
    kept = Board(floor, rules)
    floor.hold("h0", NOW + HOUR)
    kept.sync()
    assert kept.until.tolist() == [NOW + HOUR]
    kept.rebase(plan.floor(), rules)
    assert kept.until.tolist() == [math.inf]


def test_a_kept_board_finds_a_run_whose_protection_expired_between_others_on_its_host():
    """A board kept across passes remakes a host's row when the first of its protections
    expires, whichever runs are listed around it there and stay protected longer."""
    from scheduler.engine.fairshare import Standing
    from scheduler.engine.model import Params
    from scheduler.engine.placement import FloorPlan
    from scheduler.engine.preemption import Board, Holdings, Rules

    def protected_for(name, hours, indices):
        w = job(name, "b/b1", gpus=len(indices), min_runtime=hours * HOUR)
        return run(w, "h0", indices, started=NOW - HOUR / 2)

    plan = FloorPlan()
    plan.update(ONE_HOST, [protected_for("before", 3, range(3)),
                           protected_for("early", 1, range(3, 5)),
                           protected_for("after", 3, range(5, 8))])

    def rules(now):
        standing = Standing(TWO, {"b/b1": 1000.0}, CAPACITY)  # b/b1 at 200%
        return Rules(standing, Params(), now, Holdings(TWO.fraction, 8))

    kept = Board(plan.floor(), rules(NOW))
    assert kept.options_at("h0") == []  # all three protected
    later, floor = rules(NOW + HOUR), plan.floor()
    assert kept.follows(floor, later)
    kept.rebase(floor, later)
    assert [r.workload.id for _, _, r in kept.options_at("h0")] == ["early"]


TWO_HOSTS = hosts(2)
REQUEST = job("req", "a/a1", gpus=4)


class Passes:
    """A cluster's floor and the preemption board kept across its passes, as a driver with an
    ``EngineMemo`` keeps them; ratios as in ``TWO``."""

    def __init__(self, runs, used, now=NOW):
        from scheduler.engine.placement import FloorPlan
        from scheduler.engine.preemption import Board

        self.plan = FloorPlan()
        self.plan.update(TWO_HOSTS, runs)
        self.floor = self.plan.floor()
        self.board = Board(self.floor, self.rules(now, used))

    @staticmethod
    def rules(now, used):
        from scheduler.engine.fairshare import Standing
        from scheduler.engine.model import Params
        from scheduler.engine.preemption import Holdings, Rules

        return Rules(Standing(TWO, used, CAPACITY), Params(), now, Holdings(TWO.fraction, 16))

    def next(self, runs, used, now=NOW):
        """The next pass: its floor has ``runs``, its standing ``used`` usage."""
        self.plan.update(TWO_HOSTS, runs)
        self.floor, rules = self.plan.floor(), self.rules(now, used)
        assert self.board.follows(self.floor, rules)
        self.board.rebase(self.floor, rules)

    def searched(self, requester, rules, ends=math.inf):
        """A victim search on this pass's floor, noted on the board as a pass notes it when it
        finds nothing (``_Walk._victims``)."""
        from scheduler.engine.preemption import victims_for

        found = victims_for(requester, self.floor, rules, ends)
        assert found is None and requester.id not in rules.blocked
        self.board.found_nothing(requester, ends)


def protected(name, host):
    """b/b1's run filling ``host``, protected for hours yet."""
    return run(job(name, "b/b1", gpus=8, min_runtime=8 * HOUR), host, range(8), started=NOW)


B_OVER = {"b/b1": 900.0, "a/a1": 100.0}  # b/b1 at 180%, a/a1 at 20%


def test_a_search_that_found_nothing_holds_in_the_next_pass_while_no_host_offers_more():
    """b/b1's runs on both hosts are protected: a/a1 finds no victims, and in the next pass,
    with the same runs a minute later, none again."""
    runs = [protected("b0", "h0"), protected("b1", "h1")]
    passes = Passes(runs, B_OVER)
    passes.searched(REQUEST, passes.board.rules)
    passes.next(runs, B_OVER, NOW + 60)
    assert passes.board.finds_nothing(REQUEST, math.inf)
    assert passes.board.finds_nothing(job("larger", "a/a1", gpus=6), math.inf)
    assert not passes.board.finds_nothing(job("smaller", "a/a1", gpus=2), math.inf)


def test_a_search_that_found_nothing_is_made_again_when_a_run_ends():
    """h1's run ends: its GPUs are free, and a/a1 may have them."""
    runs = [protected("b0", "h0"), protected("b1", "h1")]
    passes = Passes(runs, B_OVER)
    passes.searched(REQUEST, passes.board.rules)
    passes.next(runs[:1], B_OVER, NOW + 60)
    assert not passes.board.finds_nothing(REQUEST, math.inf)


def test_a_search_that_found_nothing_is_made_again_when_a_protection_expires():
    """b0 was protected for an hour only: past it, b/b1 being over-used, a/a1 may preempt it."""
    short = run(job("b0", "b/b1", gpus=8, min_runtime=HOUR), "h0", range(8), started=NOW)
    runs = [short, protected("b1", "h1")]
    passes = Passes(runs, B_OVER)
    passes.searched(REQUEST, passes.board.rules)
    passes.next(runs, B_OVER, NOW + 2 * HOUR)
    assert not passes.board.finds_nothing(REQUEST, math.inf)


def test_a_search_that_found_nothing_is_made_again_on_a_host_held_from_it_then():
    """h0's run is past its protection but h0 was held from a/a1's search (its reservation
    starting before a/a1 would be gone): h0 is open to a request gone before the reservation
    starts, and in the next pass, which holds nothing, to every request."""
    runs = [past(job("b0", "b/b1", gpus=8), "h0", range(8)), protected("b1", "h1")]
    passes = Passes(runs, B_OVER)
    passes.floor.hold("h0", NOW + HOUR)
    passes.board.sync()
    passes.searched(REQUEST, passes.board.rules, ends=NOW + 2 * HOUR)
    assert passes.board.finds_nothing(REQUEST, NOW + 2 * HOUR)  # h0 still held from it
    assert not passes.board.finds_nothing(REQUEST, NOW + HOUR / 2)  # gone before it starts
    passes.next(runs, B_OVER, NOW + 60)
    assert not passes.board.finds_nothing(REQUEST, NOW + 2 * HOUR)


def test_a_search_that_found_nothing_is_made_again_when_its_budget_comes_to_outrank_another():
    """b/b1's run on h0 is past its protection and b/b1 over-used throughout, but a/a1 ranks
    below it (a/a1 at 150%, b/b1 at 130%) until a/a1's usage falls to 120%: no host's runs
    changed, yet a/a1 may preempt b/b1's run now."""
    runs = [past(job("b0", "b/b1", gpus=8), "h0", range(8)), protected("b1", "h1")]
    passes = Passes(runs, {"a/a1": 750.0, "b/b1": 650.0})
    passes.searched(REQUEST, passes.board.rules)
    passes.next(runs, {"a/a1": 600.0, "b/b1": 650.0}, NOW + 60)
    assert not passes.board.finds_nothing(REQUEST, math.inf)


def test_a_request_on_whole_hosts_searches_though_a_smaller_one_on_one_host_found_nothing():
    """On one 8-GPU host and three 4-GPU hosts, 8 GPUs on one host can only come from the big
    host, whose run is protected; 12 on whole hosts can come from the small ones, past their
    protection. A 12-GPU request is told what it is told alone, with an 8-GPU one of its
    budget before it that found no victims."""
    mixed = [Host("big", 8, group="g0")] + [Host(f"s{i}", 4, group="g0") for i in range(3)]
    runs = [run(job("b-big", "b/b1", gpus=8, min_runtime=8 * HOUR), "big", range(8),
                started=NOW)]
    runs += [past(job(f"b-s{i}", "b/b1", gpus=4), f"s{i}", range(4)) for i in range(3)]
    large = job("large", "a/a1", gpus=12, submitted=1.0)

    def told(pending):
        return one_pass(state(NOW, mixed, runs, pending, usage=B_OVER, capacity=CAPACITY),
                        TWO).waits["large"].reason

    assert told([job("small", "a/a1", gpus=8), large]) == told([large])


def test_unallocated_work_walked_to_the_end_of_its_line_leaves_its_budget_searching():
    """A pass holds h0 for b/b1's 8-GPU request; a/a1's unallocated u0 takes h1's two free
    GPUs, and u1 and u2 behind it find no room. Unallocated work never searches for victims,
    so nothing is known in the next pass of a/a1's searches: its allocated request preempts
    b/b1's run on h2, past its protection, b/b1 being over-used."""
    from dataclasses import replace

    from scheduler.engine import EngineMemo, Params, schedule
    from scheduler.engine.pending import PendingQueue

    memo = EngineMemo()
    runs = [past(job("a0", "a/a1", gpus=8), "h0", range(8)),
            run(job("b1", "b/b1", gpus=6, min_runtime=8 * HOUR), "h1", range(6), started=NOW),
            past(job("b2", "b/b1", gpus=8), "h2", range(8))]
    big = job("big", "b/b1", gpus=8, submitted=1.0)
    unallocated = [job(f"u{i}", "a/a1", gpus=2, min_runtime=0.0, duration=60.0,
                       submitted=2.0 + i) for i in range(3)]

    queue = PendingQueue([big, *unallocated])
    cluster = state(NOW, THREE_HOSTS, usage=B_OVER, capacity=CAPACITY)

    def one(now):  # hosts, queue and memo kept from pass to pass, as a driver keeps them
        return schedule(replace(cluster, now=now, running=list(runs), pending=queue,
                                memo=memo), TWO, Params())

    first = one(NOW)
    assert set(started(first)) == {"u0"}
    runs.append(run(unallocated[0], "h1", started(first)["u0"].slots[0][1], started=NOW))
    queue.remove(unallocated[0])
    queue.add(job("req", "a/a1", gpus=4, submitted=3.0))
    assert preempted(one(NOW + 60)) == ["b2"]
