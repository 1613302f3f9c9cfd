"""`manage.py demo_load` replays the Philly trace onto the demo budgets, deterministically,
and the loop schedules what it submits."""

import itertools
import time
from io import StringIO

import pytest
from django.core.management import call_command

from fleet.models import Cluster
from portal import demo
from scheduler import loop
from scheduler.models import Run, Workload


def replay(**options):
    out = StringIO()
    options.setdefault("start_day", 30.0)  # a quiet night: a small, quick slice
    call_command("demo_load", "--once", "--window", "300", stdout=out, stderr=StringIO(),
                 **options)
    return out.getvalue()


def test_the_demo_load_submits_a_seeded_slice_and_the_loop_runs_it(db):
    demo.seed()
    text = replay()
    assert "VCs -> leaves" in text
    first = list(Workload.objects.order_by("pk").values_list(
        "name", "budget__path", "cluster__name", "gpus", "min_runtime", "resumable",
        "expected_duration"))
    assert len(first) > 5
    assert {b for _, b, *_ in first} <= set(
        Workload.objects.values_list("budget__path", flat=True))
    for cluster in Cluster.objects.all():
        loop.tick(cluster.pk)
    assert Run.objects.exists()
    Workload.objects.all().delete()
    replay()
    again = list(Workload.objects.order_by("pk").values_list(
        "name", "budget__path", "cluster__name", "gpus", "min_runtime", "resumable",
        "expected_duration"))
    assert again == first  # same seed, same load


# The rule (scheduler/replay.py): each job draws a leaf that has members, weighted by the leaf's
# fraction of the job's cluster (2% without an allocation there) x a seeded activity factor.
# Fractions of the demo tree (portal/demo.py), by hand: h100: prog-a 70/100 x proj-a1 50/100
# = 35%, proj-a2 70% x 30/100 = 21%, proj-a3 70% x 20/100 = 14%, dana and erik 20% x 60/100 x
# 50/100 = 6% each, proj-b2 20% x 40/100 = 8%, proj-c1 and proj-c2 10% x 50/100 = 5% each.
# b200: proj-a1 50% x 60/100 = 30%, proj-a2 50% x 40/100 = 20%, proj-c1 20% x 1/1 = 20%;
# proj-a3, dana, erik, proj-b2 and proj-c2 have no b200 shares: 2%.
HAND = {
    "h100": {"prog-a/proj-a1": 0.35, "prog-a/proj-a2": 0.21, "prog-a/proj-a3": 0.14,
             "prog-b/proj-b1/dana": 0.06, "prog-b/proj-b1/erik": 0.06, "prog-b/proj-b2": 0.08,
             "prog-c/proj-c1": 0.05, "prog-c/proj-c2": 0.05},
    "b200": {"prog-a/proj-a1": 0.30, "prog-a/proj-a2": 0.20, "prog-a/proj-a3": 0.02,
             "prog-b/proj-b1/dana": 0.02, "prog-b/proj-b1/erik": 0.02, "prog-b/proj-b2": 0.02,
             "prog-c/proj-c1": 0.20, "prog-c/proj-c2": 0.02},
}


def test_the_rule_weighs_leaves_by_fraction_and_activity(db):
    from scheduler.replay import Rule, activity

    demo.seed()
    rule = Rule({c.name: c for c in Cluster.objects.all()}, seed=0)
    paths = [node.path.removeprefix("institute/") for node, _ in rule.leaves]
    assert paths == sorted(HAND["h100"])
    for name, by_path in HAND.items():
        for path, weight in zip(paths, rule.weights[name], strict=True):
            factor = activity(0, f"institute/{path}")
            assert 0.5 <= factor < 2
            assert weight == pytest.approx(by_path[path] * factor)
    # members: the leaf's members only, alphabetical draw
    members = {node.path: [u.username for u in users] for node, users in rule.leaves}
    assert members["institute/prog-a/proj-a1"] == ["lead", "mei", "researcher", "tom"]


def test_the_load_spreads_over_leaves_and_members_as_weighed(db):
    """A week of the trace through the rule: every leaf with members gets work, each about its
    weight's share (within 4 points over ~2,000 jobs), every member submits."""
    from collections import Counter

    from budgets.models import Allocation
    from scheduler.replay import START_DAY, Rule, read_jobs

    demo.seed()
    rule = Rule({c.name: c for c in Cluster.objects.all()}, seed=0)
    allocated = set(Allocation.objects.values_list("node_id", "cluster__name"))
    jobs = read_jobs((START_DAY - 7) * 86400, START_DAY * 86400, 0, 0.5)
    subs = [rule.submission(job, allocated) for job in jobs]
    h100 = [s for s in subs if s.cluster == "h100"]
    assert len(h100) > 1500
    counts = Counter(s.node.path for s in h100)
    total = sum(rule.weights["h100"])
    for (node, _), weight in zip(rule.leaves, rule.weights["h100"], strict=True):
        assert abs(counts[node.path] / len(h100) - weight / total) < 0.04, node.path
    assert max(counts.values()) / len(h100) < 0.5  # no single budget takes the trace
    users = Counter(s.user.username for s in subs)
    assert set(users) == {u.username for _, members in rule.leaves for u in members}
    assert 0.15 < sum(s.cluster == "b200" for s in subs) / len(subs) < 0.25
    # without shares on b200, a leaf submits only unallocated work there
    a3 = [s for s in subs if s.cluster == "b200" and s.node.path.endswith("proj-a3")]
    assert a3 and all(s.min_runtime == 0 for s in a3)


def test_the_load_is_submitted_by_many_researchers_not_one(db):
    """"Mine" means mine: a week of the trace comes from a dozen people, none with more than a
    fifth of it, and the persona `researcher` submits only to the two budgets she is a member
    of."""
    from collections import Counter

    from budgets.models import Allocation
    from scheduler.replay import START_DAY, Rule, read_jobs

    demo.seed()
    rule = Rule({c.name: c for c in Cluster.objects.all()}, seed=0)
    allocated = set(Allocation.objects.values_list("node_id", "cluster__name"))
    jobs = read_jobs((START_DAY - 7) * 86400, START_DAY * 86400, 0, 0.5)
    subs = [rule.submission(job, allocated) for job in jobs]
    by_user = Counter(s.user.username for s in subs)
    assert len(by_user) >= 15
    assert max(by_user.values()) / len(subs) < 0.2
    assert {s.node.path for s in subs if s.user.username == "researcher"} == {
        "institute/prog-a/proj-a1", "institute/prog-a/proj-a3"}


class SlowMachine:
    """A clock that moves on 0.6 s every time it is read, as on a loaded machine where the
    process is descheduled between two readings."""

    def __init__(self, start: float):
        self.now = start

    def __call__(self) -> float:
        self.now += 0.6
        return self.now - 0.6


def test_waiting_never_sleeps_a_negative_length_when_time_runs_out_between_readings():
    from scheduler.management.commands.demo_load import wait_until

    clock = SlowMachine(start=9.5)  # 0.5 s before the deadline at the first reading
    naps = []

    def sleep(seconds):
        naps.append(seconds)
        time.sleep(seconds)  # the real sleep: it raises ValueError on a negative length

    wait_until(10.0, [], clock=clock, sleep=sleep)
    assert naps == [pytest.approx(0.5)]


def test_waiting_lasts_until_the_deadline_on_the_real_clock():
    from scheduler.management.commands.demo_load import wait_until

    began = time.monotonic()
    wait_until(began + 0.3, [])
    assert time.monotonic() - began >= 0.3


def test_waiting_ends_at_once_when_the_load_is_stopping():
    from scheduler.management.commands.demo_load import wait_until

    began = time.monotonic()
    wait_until(began + 60, [True])
    assert time.monotonic() - began < 1


def test_the_timetable_starts_the_trace_over_when_it_runs_out():
    from scheduler.management.commands.demo_load import timetable
    from scheduler.replay import Job

    jobs = [Job("j1", 1000, 60, 1, "vc"), Job("j2", 1600, 60, 1, "vc")]
    # at 10x from trace second 1000: j1 at 0 s, j2 at 60 s; a lap lasts 60 + 60 s
    laps = itertools.islice(timetable(jobs, 1000, 10, repeat=True), 5)
    assert [(due, job.job_id) for due, job in laps] == [
        (0, "j1"), (60, "j2"), (120, "j1"), (180, "j2"), (240, "j1")]


def test_the_timetable_of_a_single_pass_ends_with_the_trace():
    from scheduler.management.commands.demo_load import timetable
    from scheduler.replay import Job

    jobs = [Job("j1", 1000, 60, 1, "vc"), Job("j2", 1600, 60, 1, "vc")]
    assert [due for due, _ in timetable(jobs, 1000, 10, repeat=False)] == [0, 60]


def test_the_timetable_of_a_resumed_load_begins_with_the_next_job_at_once():
    from scheduler.management.commands.demo_load import timetable
    from scheduler.replay import Job

    jobs = [Job("j1", 1000, 60, 1, "vc"), Job("j2", 1600, 60, 1, "vc"), Job("j3", 2200, 60, 1,
                                                                            "vc")]
    # at 10x: j2 at once, j3 60 s later; a whole lap lasts 120 + 60 s and begins with j1 at
    # 180 - 60 = 120 s
    laps = itertools.islice(timetable(jobs, 1000, 10, repeat=True, resume_at=1), 4)
    assert [(due, job.job_id) for due, job in laps] == [
        (0, "j2"), (60, "j3"), (120, "j1"), (180, "j2")]


def names():
    return list(Workload.objects.order_by("pk").values_list("name", flat=True))


def test_a_restarted_load_carries_on_after_the_last_job_it_submitted(db):
    demo.seed()
    replay(limit=8)
    in_one_go = names()
    Workload.objects.all().delete()
    replay(limit=5)
    text = replay(limit=3)
    assert "carrying on from job 6" in text
    assert names() == in_one_go


def test_a_load_from_the_start_submits_the_same_jobs_again(db):
    demo.seed()
    replay(limit=3)
    first = names()
    replay(limit=3, from_start=True)
    assert names() == first + first
