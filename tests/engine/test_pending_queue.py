"""The pending queue kept ranked between passes (``pending.PendingQueue``): merging the leaves
in Fair Tree order must give exactly the order of sorting the whole queue."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine import BudgetTree, Workload
from scheduler.engine.fairshare import Standing, order_key
from scheduler.engine.pending import PendingQueue

TREE = BudgetTree.from_shares({"p0": 3, "p0/a": 1, "p0/b": 2, "p1": 1, "p1/c": 1, "p1/d": 0})
# budgets the tree does not know rank after every known one, tied among themselves
BUDGETS = [*TREE.leaves, "gone/x", "gone/y"]
CAPACITY = 1e6

workloads = st.builds(
    Workload,
    id=st.integers(0, 40).map(str),
    budget=st.sampled_from(BUDGETS),
    gpus=st.sampled_from([1, 2, 8]),
    min_runtime=st.sampled_from([0.0, 3600.0]),
    resumable=st.booleans(),
    # few distinct times: ties in submission are broken by id
    submitted=st.sampled_from([0.0, 10.0, 20.0, 30.0]),
)
usages = st.dictionaries(st.sampled_from(BUDGETS), st.sampled_from([0.0, 1e4, 2e5, 9e5]))
# a step: a workload joins (or leaves if it is there), or the queue is ranked at some usage
steps = st.lists(st.one_of(workloads, usages, st.none()), max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_the_merged_order_is_the_sorted_order_through_joins_leaves_and_new_standings(steps):
    """Every ranking along the way, with a standing (usage changing, so the leaf order is
    worked out again or reused) or without one, equals sorting what is pending now."""
    queue, pending = PendingQueue(), {}
    for step in steps:
        if isinstance(step, Workload):
            if step.id in pending:
                queue.remove(pending.pop(step.id))
            else:
                queue.add(step)
                pending[step.id] = step
            continue
        standing = None if step is None else Standing(TREE, step, CAPACITY)
        expected = sorted(pending.values(), key=order_key(standing))
        assert queue.ranked(standing) == expected
    assert sorted(w.id for w in queue) == sorted(pending)


timed = st.builds(replace, workloads, duration=st.sampled_from([None, 60.0, 7200.0]))


def _joins_and_leaves(queue: PendingQueue, ws: list[Workload]):
    """Each of ``ws`` joins ``queue``, or leaves it if it is there; after each step, what is
    pending by id."""
    pending: dict[str, Workload] = {}
    for w in ws:
        if w.id in pending:
            queue.remove(pending.pop(w.id))
        else:
            queue.add(w)
            pending[w.id] = w
        yield pending


@settings(max_examples=200, deadline=None)
@given(st.lists(timed, max_size=40, unique_by=lambda w: w.id), usages)
def test_a_queue_built_at_once_is_the_queue_built_one_workload_at_a_time(ws, usage):
    """The driver hands a whole queue to the constructor (sorted once) or adds workloads one by
    one (kept sorted): the same ranking, submission line, spans and joined work."""
    at_once, one_by_one = PendingQueue(ws), PendingQueue()
    for w in ws:
        one_by_one.add(w)
    standing = Standing(TREE, usage, CAPACITY)
    assert at_once.ranked(standing) == one_by_one.ranked(standing)
    assert list(at_once.by_submission()) == list(one_by_one.by_submission())
    leaves = {w.budget for w in ws if w.min_runtime > 0}
    assert {leaf: at_once.spans(leaf) for leaf in leaves} == {
        leaf: one_by_one.spans(leaf) for leaf in leaves}
    assert at_once.take_joined() == one_by_one.take_joined()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(timed, max_size=40), st.integers(0, 40), st.integers(0, 40))
def test_the_lines_per_size_and_in_submission_order_follow_joins_and_leaves(ws, asked, strict):
    """The per-size lines (with each workload's span) and the submission line, first asked for
    at some point of the queue's life and kept from then on, are what sorting what is pending
    now gives."""
    from scheduler.engine.pending import span
    from scheduler.engine.policies import submission_order

    queue = PendingQueue()
    for at, pending in enumerate(_joins_and_leaves(queue, ws)):
        if at >= asked:
            line = sorted(pending.values(), key=submission_order)
            sizes = {g: [v for v in line if v.gpus == g] for g in {v.gpus for v in line}}
            assert queue.by_size() == sizes
            assert {g: queue.spans_of_size(g) for g in sizes} == {
                g: [span(v) for v in vs] for g, vs in sizes.items()}
        if at >= strict:
            assert list(queue.by_submission()) == sorted(pending.values(), key=submission_order)


def _program(budget: str) -> str | None:
    """A group per program; budgets the tree does not know have none."""
    return None if budget.startswith("gone/") else budget.split("/")[0]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(timed, max_size=40), st.integers(0, 40))
def test_the_queues_per_group_follow_joins_and_leaves_and_keep_their_identity(ws, asked):
    """Each group's queue, first asked for at some point of the queue's life and kept from
    then on, holds what is pending in that group, read in submission order and per size as a
    queue of its own; a group's queue stays the same object once made, even while empty."""
    from scheduler.engine.policies import submission_order

    queue, seen = PendingQueue(), {}
    for at, pending in enumerate(_joins_and_leaves(queue, ws)):
        if at < asked:
            continue
        groups = queue.by_group(_program)
        for group, kept in seen.items():
            assert groups[group] is kept
        seen.update(groups)
        expected = {_program(v.budget) for v in pending.values()}
        assert {g for g, q in groups.items() if len(q)} == expected
        for group, kept in groups.items():
            mine = sorted((v for v in pending.values() if _program(v.budget) == group),
                          key=submission_order)
            assert list(kept.by_submission()) == mine
            assert {v.id for v in kept} == {v.id for v in mine}
            assert kept.by_size() == {g: [v for v in mine if v.gpus == g]
                                      for g in {v.gpus for v in mine}}


def test_groups_asked_for_by_another_rule_are_made_afresh():
    """Groups asked for by another rule are made afresh from what is pending."""
    queue = PendingQueue([Workload("1", "p0/a", 1, 3600.0, True, 0.0),
                          Workload("2", "p1/c", 1, 3600.0, True, 1.0)])
    by_program = queue.by_group(_program)
    by_leaf = queue.by_group(lambda budget: budget)
    assert {g: [w.id for w in q] for g, q in by_program.items()} == {"p0": ["1"], "p1": ["2"]}
    assert {g: [w.id for w in q] for g, q in by_leaf.items()} == {"p0/a": ["1"], "p1/c": ["2"]}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(timed, max_size=40), st.integers(0, 40))
def test_the_spans_of_each_line_follow_joins_and_leaves(ws, asked):
    """Per line (a leaf's allocated work; None: the unallocated work), each size's spans are
    those of what is pending there now, sorted; the unallocated line is the queue's own list.
    The lines are made when first asked for, at some point of the queue's life."""
    from scheduler.engine.pending import span
    from scheduler.engine.policies import submission_order

    queue = PendingQueue()
    for at, pending in enumerate(_joins_and_leaves(queue, ws)):
        if at < asked:
            continue
        lines: dict[str | None, dict[int, list[float]]] = {None: {}}
        for v in pending.values():
            line = v.budget if v.min_runtime > 0 else None
            lines.setdefault(line, {}).setdefault(v.gpus, []).append(span(v))
        assert {line: queue.spans(line) for line in lines} == {
            line: {g: sorted(spans) for g, spans in sizes.items()}
            for line, sizes in lines.items()}
        assert queue.unallocated == sorted(
            (v for v in pending.values() if v.min_runtime <= 0), key=submission_order)
        assert queue.segments(None)[-1][1] is queue.unallocated
