"""The named policies: strict FIFO, FIFO with backfill, SJF, quota and static partitions."""

from __future__ import annotations

import pytest
from engine_builders import HOUR, hosts, job, one_pass, run, started, state, tree

from scheduler.engine.model import BudgetTree, Host, Params
from scheduler.engine.policies import POLICIES, PolicyError, policy_of
from scheduler.engine.simulate import SimConfig, main, simulate
from scheduler.engine.traces import TraceJob, parse_cluster

NOW = 10 * HOUR
TWO = tree(a=1, b=1, a__a1=1, b__b1=1)
PARTS = BudgetTree.from_shares({"p": 1, "p/vc-a": 1, "p/vc-b": 1})


def blocked_head_and_small_follower():
    """One 8-GPU host with 4 GPUs busy for an hour: a 8-GPU workload is first in line, a
    1-GPU workload of 10 minutes arrives after it."""
    busy = run(job("busy", gpus=4, duration=HOUR), "h0", range(4), started=NOW - 60)
    head = job("head", gpus=8, submitted=1, duration=HOUR)
    small = job("small", gpus=1, submitted=2, duration=600)
    return state(NOW, hosts(1), [busy], [head, small])


def test_strict_fifo_starts_nothing_behind_a_workload_that_does_not_fit():
    result = one_pass(blocked_head_and_small_follower(), TWO, policy="fifo")
    assert started(result) == {}
    assert result.waits["small"].blocker == "behind"
    assert result.waiting["small"] == "behind workload #head, first in line (fifo: strict order)"


def test_fifo_backfill_starts_work_that_is_out_of_the_way_before_the_reservation():
    result = one_pass(blocked_head_and_small_follower(), TWO, policy="fifo-backfill")
    assert list(started(result)) == ["small"]
    assert result.waits["head"].blocker == "held"


def test_sjf_starts_the_shortest_workload_first():
    pending = [job("long", gpus=8, submitted=1, duration=5 * HOUR),
               job("short", gpus=8, submitted=2, duration=HOUR)]
    result = one_pass(state(NOW, hosts(1), [], pending), TWO, policy="sjf")
    assert list(started(result)) == ["short"]
    assert result.waits["long"].blocker == "no preemption"


def test_equal_submission_times_go_in_job_id_order():
    pending = [job("j2", gpus=8, submitted=5), job("j10", gpus=8, submitted=5),
               job("j1", gpus=8, submitted=5)]
    result = one_pass(state(NOW, hosts(1), [], pending), TWO, policy="fifo")
    assert list(started(result)) == ["j1"]  # "j1" < "j10" < "j2": ids compare as text
    assert result.order == ["j1", "j10", "j2"]


def test_an_unknown_policy_is_named_with_the_known_ones():
    with pytest.raises(PolicyError, match="unknown policy 'lifo': use one of fairshare, fifo"):
        policy_of("lifo")


def test_only_policies_without_preemption_run_inside_partitions():
    st = state(NOW, two_partitions(), [], [job("w", "p/vc-a")])
    with pytest.raises(PolicyError, match="'partitions' cannot run inside partitions"):
        one_pass(st, PARTS, policy="partitions", partition_policy="partitions")


def test_every_policy_is_in_the_cli_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in POLICIES:
        assert f"{name}:" in text
    assert "--partition-policy" in text
    assert "submission time, then job id" in text


# -- partitions ---------------------------------------------------------------------------------


def two_partitions():
    """Two hosts of 8 GPUs: h0 is group vc-a's, h1 is vc-b's."""
    return [Host("h0", 8, group="vc-a"), Host("h1", 8, group="vc-b")]


def test_a_partition_keeps_its_work_on_its_own_hosts():
    # vc-a's host is full; vc-b's is free, yet vc-a's next workload waits for its own
    full = run(job("full", "p/vc-a", gpus=8), "h0", range(8), started=NOW - 60)
    pending = [job("a-next", "p/vc-a", gpus=1, submitted=1)]
    result = one_pass(state(NOW, two_partitions(), [full], pending), PARTS,
                      policy="partitions")
    assert started(result) == {}
    assert result.waits["a-next"].blocker == "no preemption"


def test_each_partition_has_its_own_line():
    # vc-a's first in line does not fit; vc-b's work starts all the same
    full = run(job("full", "p/vc-a", gpus=4), "h0", range(4), started=NOW - 60)
    pending = [job("a-big", "p/vc-a", gpus=8, submitted=1),
               job("a-small", "p/vc-a", gpus=1, submitted=2),
               job("b-one", "p/vc-b", gpus=2, submitted=3)]
    result = one_pass(state(NOW, two_partitions(), [full], pending), PARTS,
                      policy="partitions")
    assert {w: p.hosts for w, p in started(result).items()} == {"b-one": ("h1",)}
    assert result.waits["a-small"].blocker == "behind"


def test_partitions_run_the_named_policy_inside():
    full = run(job("full", "p/vc-a", gpus=4, duration=HOUR), "h0", range(4), started=NOW - 60)
    pending = [job("a-big", "p/vc-a", gpus=8, submitted=1, duration=HOUR),
               job("a-small", "p/vc-a", gpus=1, submitted=2, duration=600)]
    result = one_pass(state(NOW, two_partitions(), [full], pending), PARTS,
                      policy="partitions", partition_policy="fifo-backfill")
    assert list(started(result)) == ["a-small"]


def test_work_of_a_budget_without_hosts_is_refused_at_submission():
    jobs = [TraceJob("lost", 0, 60, 1, "p/vc-z", "u", 60, True),
            TraceJob("home", 0, 60, 1, "p/vc-a", "u", 60, True)]
    cluster = parse_cluster("2x8/2")  # groups g0 and g1
    for h, group in zip(cluster.hosts, ("vc-a", "vc-b"), strict=True):
        h.group = group
    res = simulate(jobs, {"p": 1, "p/vc-a": 1, "p/vc-z": 1}, cluster,
                   SimConfig(params=Params(policy="partitions")))
    states = {r.job.job_id: (r.state, r.reason) for r in res.jobs}
    assert states["home"][0] == "completed"
    assert states["lost"] == ("refused", "no hosts for budget p/vc-z: no group of hosts is "
                                         "named after it (groups: vc-a, vc-b)")


def test_a_workload_larger_than_its_partition_is_refused():
    jobs = [TraceJob("wide", 0, 60, 16, "p/vc-a", "u", 60, True)]
    cluster = parse_cluster("2x8/2")
    for h, group in zip(cluster.hosts, ("vc-a", "vc-b"), strict=True):
        h.group = group
    res = simulate(jobs, {"p": 1, "p/vc-a": 1}, cluster,
                   SimConfig(params=Params(policy="partitions")))
    assert res.jobs[0].state == "refused"
    assert "can never be placed" in res.jobs[0].reason


def one_fifo_host(jobs):
    """``jobs`` of one budget on one 8-GPU host under strict FIFO."""
    return simulate(jobs, {"p": 1, "p/vc-a": 1}, parse_cluster("1x8"),
                    SimConfig(params=Params(policy="fifo")))


def test_a_strict_line_moves_when_its_head_fits_and_not_before():
    # one 8-GPU host: a (4 GPUs) until 1000 s, b (3 GPUs) until 100 s; the head (8 GPUs)
    # arrives at 1 s, a 1-GPU follower at 2 s. b's end frees 4 GPUs: too few for the head (the
    # simulator skips that pass), and the follower stays behind the head, which starts when a
    # ends.
    res = one_fifo_host([TraceJob("a", 0, 1000, 4, "p/vc-a", "u", 60, True),
                         TraceJob("b", 0, 100, 3, "p/vc-a", "u", 60, True),
                         TraceJob("head", 1, 50, 8, "p/vc-a", "u", 50, True),
                         TraceJob("follower", 2, 50, 1, "p/vc-a", "u", 50, True)])
    first = {r.job.job_id: r.first_start for r in res.jobs}
    assert first == {"a": 0, "b": 0, "head": 1000, "follower": 1050}


def test_a_workload_that_starts_from_the_line_keeps_the_last_head_it_waited_behind():
    # one 8-GPU host held by a until 100 s. b (8 GPUs, the head) and c and d (4 GPUs each)
    # queue behind it. At 100 s b starts and c becomes the head: d, still in line, now waits
    # behind c (without a wait of its own: the line's wait changed). At 200 s c and d start.
    res = one_fifo_host([TraceJob("a", 0, 100, 8, "p/vc-a", "u", 60, True),
                         TraceJob("b", 1, 100, 8, "p/vc-a", "u", 60, True),
                         TraceJob("c", 2, 100, 4, "p/vc-a", "u", 60, True),
                         TraceJob("d", 3, 100, 4, "p/vc-a", "u", 60, True)])
    record = {r.job.job_id: r for r in res.jobs}
    assert {k: r.first_start for k, r in record.items()} == {"a": 0, "b": 100, "c": 200,
                                                             "d": 200}
    assert record["d"].reason.startswith("behind workload #c")
    assert record["c"].reason.startswith("needs 4 GPUs")
