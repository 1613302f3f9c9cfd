"""The live loop calls the same engine as the simulator: the state it loads is the state a
person writes down by hand from the database, and the decisions it applies are exactly those
``schedule()`` returns for that state."""

from fixtures_loop import T0, at, make_workload

from scheduler import loop
from scheduler.engine import (
    BudgetTree,
    ClusterState,
    Host,
    Params,
    Placement,
    Preempt,
    Start,
    schedule,
)
from scheduler.engine import Run as EngineRun
from scheduler.engine import Workload as EngineWorkload
from scheduler.models import Event, Run, UsageRollup


def shape(decision):
    kind = type(decision).__name__
    if isinstance(decision, Start):
        return (kind, decision.workload.id, decision.placement, decision.reason)
    if isinstance(decision, Preempt):
        return (kind, decision.run.workload.id, decision.for_workload_id, decision.reason)
    return (kind, getattr(decision, "reason", ""))


def test_the_loop_applies_exactly_the_engines_decisions_for_the_same_state(lab):
    # bob's unallocated run holds lab-1; proj-b1 used 2x its share in the last hours
    hour = loop.floor_hour(at(0))
    UsageRollup.objects.create(cluster=lab.cluster, budget=lab.b1, hour=hour, gpu_seconds=1e5)
    free = make_workload(lab, lab.b1, gpus=4, min_runtime=0, submitted=at(-300))
    loop.tick(lab.cluster.pk, at(-200))
    big = make_workload(lab, lab.a1, gpus=6, min_runtime=1800, submitted=at(-100))
    small = make_workload(lab, lab.a2, gpus=1, min_runtime=600, submitted=at(-90))
    later = make_workload(lab, lab.b1, gpus=2, min_runtime=600, submitted=at(-80))

    report = loop.tick(lab.cluster.pk, at(0))

    # The same state written down by hand from what the database holds.
    now = at(0).timestamp()
    tree = BudgetTree.from_shares({
        "org": 1, "org/prog-a": 70, "org/prog-a/proj-a1": 50, "org/prog-a/proj-a2": 50,
        "org/prog-b": 30, "org/prog-b/proj-b1": 100,
    })
    params = Params(window=7 * 86400, max_min_runtime=8 * 3600, hysteresis=0.1, grace=300,
                    unallocated_grace=30, pass_interval=5)

    def workload(w, budget):
        return EngineWorkload(str(w.pk), budget, w.gpus, float(w.min_runtime), w.resumable,
                              w.submitted.timestamp(), name=w.name)

    run = Run.objects.get(workload=free)
    by_hand = ClusterState(
        now=now,
        hosts=[Host("lab-0", 4, "rail-1"), Host("lab-1", 4, "rail-1")],
        running=[EngineRun(workload(free, "org/prog-b/proj-b1"), at(-200).timestamp(),
                           Placement((("lab-0", (0, 1, 2, 3)),)), at(-200).timestamp())],
        pending=[workload(big, "org/prog-a/proj-a1"), workload(small, "org/prog-a/proj-a2"),
                 workload(later, "org/prog-b/proj-b1")],
        usage={"org/prog-b/proj-b1": 1e5},
        # healthy GPUs from the cluster's creation (T0 - 1 day) to now
        capacity=8 * (now - (T0.timestamp() - 86400)),
    )
    assert run.started == at(-200)
    seen = report.states[0]
    assert seen.now == by_hand.now and seen.capacity == by_hand.capacity
    assert seen.usage == by_hand.usage
    assert sorted(seen.pending, key=lambda w: w.id) == sorted(by_hand.pending, key=lambda w: w.id)
    assert [(r.workload, r.placement, r.started, r.protected_until) for r in seen.running] == [
        (r.workload, r.placement, r.started, r.protected_until) for r in by_hand.running
    ]

    expected = schedule(by_hand, tree, params)
    assert [shape(d) for d in report.passes[0].decisions] == [shape(d) for d in expected.decisions]
    assert report.passes[0].order == expected.order
    assert any(isinstance(d, Preempt) for d in expected.decisions)  # the scenario is not trivial
    # ... and what was applied is what the engine said, reasons included
    applied = set(Event.objects.filter(kind__in=["started", "signalled"], at=at(0))
                  .values_list("reason", flat=True))
    assert applied == {d.reason for d in report.passes[0].decisions
                       if isinstance(d, (Start, Preempt))} | {
        d.reason for p in report.passes[1:] for d in p.decisions if isinstance(d, (Start, Preempt))
    }
