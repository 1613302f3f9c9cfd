"""The live loop and the simulator decide the same: the proof behind "same engine".

The live loop (real models, a real database, the simulated fleet) is driven with a controlled
clock at the cluster's pass interval for three hours: 220 seeded submissions over three budgets
(allocated, debug and unallocated work, resumable or not), a host failure at 40 min (its runs
are lost, the resumable ones requeued) and an operator's drain at 70 min. The window is two
hours, so it slides during the run. The same submissions and host events are then replayed
through the simulator with ``cadence="ticks"``. Every time the scenario uses is a multiple of
the pass interval (the live loop acts only at ticks), and repairs take longer than the run.

Compared, at identical times: every start with its placement (hosts and GPU indices), every
preemption signal, every run's end and its reason (completed, preempted, requeued by a host
failure, drained), and every host the engine declared drained.
"""


import numpy as np
import pytest
from fixtures_loop import at, tick

from fleet import services as host_services
from fleet.models import Host, HostEvent
from scheduler.engine import Params
from scheduler.engine.simulate import HOST_DRAIN, HOST_FAIL, SimConfig, Simulator
from scheduler.engine.traces import ClusterSpec, HostSpec, TraceJob
from scheduler.engine_views import budget_tree
from scheduler.models import Event, Run, RunGPU, Workload

PASS = 30  # seconds: the cluster's pass interval, the live loop's tick
HORIZON = 3 * 3600
SUBMISSIONS = 220
FAILURE = (40 * 60, "lab-2")  # a lost heartbeat
DRAIN = (70 * 60, "lab-4")
NEVER = 30 * 86400  # repairs take longer than the run: hosts that leave stay out


def submissions(lab, seed: int = 10):
    """Seeded submissions: (seconds, budget, gpus, min runtime, resumable, duration)."""
    rng = np.random.default_rng(seed)
    budgets = [lab.a1, lab.a2, lab.b1]
    out = []
    for _ in range(SUBMISSIONS):
        t = int(rng.integers(0, 2 * 3600 // PASS)) * PASS
        kind = rng.random()
        if kind < 0.25:
            gpus, min_runtime = int(rng.choice([1, 2])), 0  # unallocated
        elif kind < 0.5:
            gpus, min_runtime = int(rng.choice([1, 2])), 600  # debug
        else:
            gpus, min_runtime = int(rng.choice([1, 2, 4, 8])), int(rng.choice([900, 1800]))
        duration = int(rng.integers(5, 90)) * PASS
        out.append((t, budgets[int(rng.integers(0, 3))], gpus, min_runtime,
                    bool(rng.random() < 0.7), duration))
    return sorted(out, key=lambda s: s[0])


@pytest.fixture(name="fleet")
def fleet_fixture(lab, settings):
    """The lab cluster grown to six hosts of 4 GPUs, created at T0, with a scheduled failure."""
    settings.TIMESHARE_TICK_SECONDS = PASS
    cluster = lab.cluster
    for i in range(2, 6):
        Host.objects.create(cluster=cluster, name=f"lab-{i}", gpus=4, group="rail-1")
    Host.objects.filter(cluster=cluster).update(state_changed=at(0))
    cluster.created = at(0)
    cluster.window = 2 * 3600
    cluster.grace = 300
    cluster.unallocated_grace = 30
    cluster.pass_interval = PASS
    cluster.backend_config = {
        "failure_rate_per_host_day": 0, "repair_success": 1.0, "repair_seconds": NEVER,
        "heartbeat_timeout": NEVER,
        "host_failures": [{"host": FAILURE[1], "at": at(FAILURE[0]).timestamp(),
                           "kind": "lost_heartbeat"}],
    }
    cluster.full_clean()
    cluster.save()
    return lab


def drive_live(lab, plan):
    """Submit each workload at its time and tick every ``PASS`` seconds; the operator drains
    ``DRAIN`` at its time. Returns {workload pk: its submission}."""
    submitted = {}
    queue = list(plan)
    for now in range(0, HORIZON + 1, PASS):
        while queue and queue[0][0] <= now:
            t, budget, gpus, min_runtime, resumable, duration = queue.pop(0)
            w = Workload.objects.create(
                name=f"w{len(submitted)}", owner=lab.bob if budget == lab.b1 else lab.alice,
                budget=budget, cluster=lab.cluster, gpus=gpus, min_runtime=min_runtime,
                resumable=resumable, command="python train.py", expected_duration=duration,
                submitted=at(t),
            )
            Event.objects.create(workload=w, at=w.submitted, kind=Event.Kind.SUBMITTED)
            submitted[w.pk] = (t, budget.path, gpus, min_runtime, resumable, duration)
        if now == DRAIN[0]:
            host_services.drain(lab.operator, Host.objects.get(name=DRAIN[1]), "fan noise")
        tick(lab, now)
    return submitted


def replay(lab, submitted):
    jobs = [
        TraceJob(str(pk), t, duration, gpus, budget, "", min_runtime, resumable)
        for pk, (t, budget, gpus, min_runtime, resumable, duration) in submitted.items()
    ]
    c = lab.cluster
    params = Params(window=float(c.window), max_min_runtime=float(c.max_min_runtime),
                    hysteresis=c.hysteresis, grace=float(c.grace),
                    unallocated_grace=float(c.unallocated_grace),
                    pass_interval=float(c.pass_interval))
    assert params == c.engine_params()  # the cluster's parameters, both drivers
    spec = ClusterSpec([HostSpec(h.name, h.gpus, h.group)
                        for h in Host.objects.filter(cluster=c).order_by("name")])
    config = SimConfig(
        params=params, failure_rate=0.0, repair_time=NEVER, repair_fail=0.0,
        checkpoint_interval=0.0, until=HORIZON, cadence="ticks",
        host_events=((FAILURE[0], FAILURE[1], HOST_FAIL), (DRAIN[0], DRAIN[1], HOST_DRAIN)),
    )
    sim = Simulator(jobs, dict(budget_tree(c).shares), spec, config)
    sim.run()
    return sim


def seconds(t) -> float | None:
    return None if t is None else round((t - at(0)).total_seconds(), 3)


def live_decisions():
    slots = {}
    for run_id, host, index in RunGPU.objects.values_list("run_id", "host__name", "index"):
        slots.setdefault(run_id, {}).setdefault(host, []).append(index)
    starts, signals, ends = set(), set(), set()
    for run in Run.objects.all():
        wid = str(run.workload_id)
        placement = tuple(sorted((h, tuple(sorted(i))) for h, i in slots[run.pk].items()))
        starts.add((seconds(run.started), wid, run.number, placement))
        if run.signalled_at is not None:
            signals.add((seconds(run.signalled_at), wid, run.number))
        if run.ended is not None and seconds(run.ended) <= HORIZON:
            ends.add((seconds(run.ended), wid, run.number, run.end_reason))
    drained = {(seconds(e.at), e.host.name)
               for e in HostEvent.objects.filter(kind=HostEvent.Kind.DRAINED)}
    return starts, signals, ends, drained


def simulated_decisions(sim):
    starts, signals, ends = set(), set(), set()
    for r in sim.run_records:
        starts.add((r.start, r.job_id, r.run, tuple(r.slots)))
        if r.signalled_at is not None:
            signals.add((r.signalled_at, r.job_id, r.run))
        if r.end is not None and r.end <= HORIZON and r.end_reason != "still_running":
            ends.add((r.end, r.job_id, r.run, r.end_reason))
    return starts, signals, ends, set(sim.drained)


def test_the_live_loop_and_the_simulator_decide_the_same(fleet):
    submitted = drive_live(fleet, submissions(fleet))
    live = live_decisions()
    simulated = simulated_decisions(replay(fleet, submitted))
    starts, signals, ends, drained = live
    # the scenario has what it must have, so the comparison below means something
    assert len(submitted) >= 200
    assert any(reason == "preempted" for *_, reason in ends)
    assert any(reason == "host_failure" for *_, reason in ends)
    assert any(number > 1 for _, _, number, _ in starts)  # requeued work started again
    assert any(name == DRAIN[1] for _, name in drained)
    for name, mine, theirs in zip(("starts", "preemptions", "ends", "drains"), live, simulated,
                                  strict=True):
        assert sorted(mine - theirs)[:5] == sorted(theirs - mine)[:5] == [], name
