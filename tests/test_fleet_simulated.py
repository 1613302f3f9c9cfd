"""The simulated fleet is deterministic: same seed, same history, in any process."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from fleet.backends import BACKENDS, FleetBackend, SimulatedFleet, backend_for

T = datetime(2026, 1, 5, tzinfo=UTC)


def cluster(**config):
    return SimpleNamespace(name="sim", backend="simulated", backend_config=config)


def host(name, state="AVAILABLE", changed=T):
    return SimpleNamespace(name=name, state=state, state_changed=changed)


def run(pk, command="python x.py", duration=100, number=1, resumable=False):
    workload = SimpleNamespace(command=command, expected_duration=duration, resumable=resumable)
    return SimpleNamespace(pk=pk, workload=workload, workload_id=pk, number=number, started=T)


def test_backend_for_picks_the_simulated_fleet_and_it_implements_the_interface():
    assert isinstance(backend_for(cluster()), SimulatedFleet)
    assert issubclass(BACKENDS["simulated"], FleetBackend)
    with pytest.raises(ValueError, match="unknown fleet backend"):
        backend_for(SimpleNamespace(name="x", backend="kubernetes", backend_config={}))


def test_runs_finish_after_their_expected_duration_with_their_exit_code():
    fleet = SimulatedFleet(cluster(default_duration=50))
    runs = [run(1), run(2, command="train; exit 7"), run(3, duration=None)]
    assert fleet.poll_runs(runs, T + timedelta(seconds=49)) == []
    done = {f.run_id: f for f in fleet.poll_runs(runs, T + timedelta(seconds=100))}
    assert set(done) == {1, 2, 3}
    assert (done[1].exit_code, done[2].exit_code, done[3].at) == (0, 7, T + timedelta(seconds=50))
    assert done[1].at == T + timedelta(seconds=100)


def test_a_seeded_fraction_of_commands_fails_deterministically():
    fleet = SimulatedFleet(cluster(command_failure_rate=0.3, seed=4))
    codes = [fleet.exit_code(run(i)) for i in range(1, 2001)]
    assert codes == [SimulatedFleet(cluster(command_failure_rate=0.3, seed=4)).exit_code(run(i))
                     for i in range(1, 2001)]
    assert 0.25 < codes.count(1) / len(codes) < 0.35


def test_hosts_fail_at_the_configured_rate_reproducibly():
    fleet = SimulatedFleet(cluster(failure_rate_per_host_day=2.4, seed=1))
    hosts = [host(f"h{i}") for i in range(100)]
    signals = []
    for hour in range(24):
        start = T + timedelta(hours=hour)
        health = fleet.poll_hosts(hosts, start, start + timedelta(hours=1))
        signals += health.signals
    # 2.4 per host-day = 0.1 per host-hour, at most one per poll: ~ 100 x 24 x 0.1
    assert 180 < len(signals) < 300
    assert {s.kind for s in signals} == {"lost_heartbeat", "gpu_error"}
    again = SimulatedFleet(cluster(failure_rate_per_host_day=2.4, seed=1))
    health = again.poll_hosts(hosts, T, T + timedelta(hours=1))
    first = fleet.poll_hosts(hosts, T, T + timedelta(hours=1))
    assert health.signals == first.signals
    assert set(first.heartbeats) == {h.name for h in hosts} - {s.host for s in first.signals}


def test_no_failures_by_default_on_a_short_look_and_none_for_dead_hosts():
    fleet = SimulatedFleet(cluster(failure_rate_per_host_day=1000))
    health = fleet.poll_hosts([host("a", "DOWN"), host("b", "ESCALATED")], T, T + timedelta(1))
    assert health.signals == [] and health.heartbeats == {}


def test_repairs_succeed_with_the_configured_probability():
    fleet = SimulatedFleet(cluster(repair_success=0.7))
    hosts = [host(f"h{i}", changed=T + timedelta(seconds=i)) for i in range(1000)]
    results = [fleet.repair(h, T) for h in hosts]
    assert 0.65 < sum(results) / 1000 < 0.75
    assert all(SimulatedFleet(cluster(repair_success=1.0)).repair(host("x"), T) for _ in range(3))
    assert not SimulatedFleet(cluster(repair_success=0.0)).repair(host("x"), T)
