"""A tick that dies half-way (an exception after it wrote rows) leaves no trace: everything a
tick writes is one transaction, and the fleet is told only after the commit."""

import pytest
from fixtures_loop import at, held_gpus, make_workload, refresh, state_snapshot

from fleet.backends import SimulatedFleet
from scheduler import loop


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("step", ["save", "record_sample", "queue"])
def test_a_tick_killed_mid_way_leaves_a_consistent_state(
    lab, monkeypatch, step, django_capture_on_commit_callbacks
):
    running = make_workload(lab, lab.a1, gpus=2, expected_duration=100, submitted=at(-30))
    loop.tick(lab.cluster.pk, at(0))
    waiting = make_workload(lab, lab.a2, gpus=4, submitted=at(10))
    before = state_snapshot()
    told = []
    monkeypatch.setattr(SimulatedFleet, "launch", lambda self, run, p: told.append(run))
    original = getattr(loop._Tick, step)

    def dies_after(self, *args):
        original(self, *args)
        raise Boom(f"worker killed after {step}")

    monkeypatch.setattr(loop._Tick, step, dies_after)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(Boom):
        loop.tick(lab.cluster.pk, at(200))  # would finish one run and start another
    assert state_snapshot() == before
    assert told == []  # nothing reached the fleet

    monkeypatch.setattr(loop._Tick, step, original)
    with django_capture_on_commit_callbacks(execute=True):
        loop.tick(lab.cluster.pk, at(200))  # the next tick does the work, once
    refresh(running, waiting)
    assert (running.state, waiting.state) == ("COMPLETED", "RUNNING")
    assert len(told) == 1 and held_gpus() == [("lab-0", 0), ("lab-0", 1), ("lab-0", 2),
                                              ("lab-0", 3)]
