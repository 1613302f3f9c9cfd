"""Drain, repair, escalation and host failure through the live loop, with a controlled clock."""

import pytest
from fixtures_loop import at, held_gpus, make_workload, refresh

from fleet import services as host_services
from fleet.backends import HealthSignal, HostHealth, SimulatedFleet
from fleet.models import Host, HostEvent
from scheduler import loop
from scheduler.models import Event, Run


def tick(lab, seconds):
    return loop.tick(lab.cluster.pk, at(seconds))


def host_kinds(host):
    return list(HostEvent.objects.filter(host=host).order_by("at", "id")
                .values_list("kind", flat=True))


def test_a_drained_host_empties_as_protection_expires_then_is_repaired(lab):
    lab0 = lab.hosts[0]
    protected = make_workload(lab, lab.a1, gpus=2, min_runtime=3600, submitted=at(-20))
    free = make_workload(lab, lab.b1, gpus=2, min_runtime=0, submitted=at(-10))
    tick(lab, 0)
    assert held_gpus() == [("lab-0", 0), ("lab-0", 1), ("lab-0", 2), ("lab-0", 3)]

    host_services.drain(lab.operator, lab0, "fan noise")
    tick(lab, 100)  # unallocated work leaves at once; protected work stays
    refresh(protected, free)
    assert (protected.state, free.state) == ("RUNNING", "PREEMPTING")
    assert "draining" in Event.objects.get(workload=free, kind="signalled").reason
    tick(lab, 400)  # grace over: requeued and restarted on lab-1
    refresh(free)
    assert free.state == "RUNNING"
    assert Run.objects.get(workload=free, number=1).end_reason == "drained"
    assert {h for h, _ in held_gpus()} == {"lab-0", "lab-1"}
    assert refresh(lab0).state == "DRAINING"

    tick(lab, 3600)  # protection over: leaves now
    assert refresh(protected).state == "PREEMPTING"
    tick(lab, 3900)
    refresh(protected, lab0)
    assert protected.state == "RUNNING" and lab0.state == "DRAINED"
    assert {h for h, _ in held_gpus()} == {"lab-1"}
    tick(lab, 3901)
    assert refresh(lab0).state == "REPAIRING"
    tick(lab, 3920)
    assert refresh(lab0).state == "REPAIRING"  # the repair takes 30 s
    tick(lab, 3931)
    assert refresh(lab0).state == "AVAILABLE"
    assert host_kinds(lab0) == [
        "drain_requested", "drained", "repair_started", "repair_succeeded", "returned"
    ]
    summary = host_services.repair_summary(lab.cluster)
    assert summary == {"repairs": 1, "needed_human": 0, "share": 0, "baseline_human": 1,
                       "fewer_human": 1.0}


def test_repeated_failed_repairs_escalate_to_a_human(lab, settings):
    lab.cluster.backend_config.update(repair_success=0.0, max_repairs=2)
    lab.cluster.save()
    lab1 = lab.hosts[1]
    host_services.drain(lab.operator, lab1, "ECC errors")
    tick(lab, 0)
    assert refresh(lab1).state == "DRAINED"  # nothing ran there
    tick(lab, 1)
    tick(lab, 31)
    assert (refresh(lab1).state, lab1.failed_repairs) == ("REPAIRING", 1)
    tick(lab, 45)
    assert lab1.failed_repairs == 1  # retries wait for the repair time again
    tick(lab, 61)
    refresh(lab1)
    assert (lab1.state, lab1.failed_repairs) == ("ESCALATED", 2)
    escalated = HostEvent.objects.get(host=lab1, kind="escalated")
    assert escalated.needed_human and "needs a human" in escalated.reason
    tick(lab, 5000)
    assert refresh(lab1).state == "ESCALATED"

    host_services.repair(lab.operator, lab1, "replaced the GPU board")
    refresh(lab1)
    assert (lab1.state, lab1.failed_repairs) == ("AVAILABLE", 0)
    summary = host_services.repair_summary(lab.cluster)
    assert summary == {"repairs": 1, "needed_human": 1, "share": 1.0, "baseline_human": 1,
                       "fewer_human": 0.0}
    w = make_workload(lab, lab.a1, gpus=8, submitted=at(5001))
    tick(lab, 5002)
    assert refresh(w).state == "RUNNING"


@pytest.fixture
def dies(monkeypatch):
    """``dies("lab-0", at)``: the fleet reports the host dead at the next poll."""
    pending = []
    original = SimulatedFleet.poll_hosts

    def poll_hosts(self, hosts, since, now):
        health = original(self, hosts, since, now)
        for name, kind in pending:
            health.signals.append(HealthSignal(name, kind, now, f"{kind} on {name}"))
            health.heartbeats.pop(name, None)
        pending.clear()
        return health

    monkeypatch.setattr(SimulatedFleet, "poll_hosts", poll_hosts)
    return lambda name, kind="lost_heartbeat": pending.append((name, kind))


def test_a_dead_host_loses_its_runs_resumable_requeued_others_failed(lab, dies):
    lab0 = lab.hosts[0]
    keeps = make_workload(lab, lab.a1, gpus=2, resumable=True, submitted=at(-20))
    lost = make_workload(lab, lab.a1, gpus=2, resumable=False, submitted=at(-10))
    tick(lab, 0)
    assert {h for h, _ in held_gpus()} == {"lab-0"}
    dies("lab-0")
    report = tick(lab, 500)
    refresh(keeps, lost, lab0)
    assert report.host_failures == 1
    assert lab0.state == "DOWN"
    assert lost.state == "FAILED" and lost.finished == at(500)
    assert "not resumable" in Event.objects.get(workload=lost, kind="failed").reason
    assert Run.objects.get(workload=lost).end_reason == "host_failure"
    # the resumable one is requeued and, lab-1 being free, restarted at once
    assert keeps.state == "RUNNING" and keeps.submitted == at(-20)
    assert Run.objects.get(workload=keeps, number=1).end_reason == "host_failure"
    assert Event.objects.filter(workload=keeps, kind="requeued").exists()
    assert {h for h, _ in held_gpus()} == {"lab-1"}
    assert host_kinds(lab0) == ["failed"]
    tick(lab, 501)
    tick(lab, 531)
    assert refresh(lab0).state == "AVAILABLE"


def test_a_gpu_error_drains_the_host(lab, dies):
    w = make_workload(lab, lab.a1, gpus=2, min_runtime=600)
    tick(lab, 0)
    dies("lab-0", "gpu_error")
    tick(lab, 10)
    assert refresh(lab.hosts[0]).state == "DRAINING"
    assert refresh(w).state == "RUNNING"  # protected work finishes its minimum runtime
    assert host_kinds(lab.hosts[0]) == ["health_signal"]


def test_a_lost_heartbeat_kills_the_host(lab, monkeypatch):
    lab.cluster.backend_config["heartbeat_timeout"] = 60
    lab.cluster.save()
    tick(lab, 0)
    assert refresh(lab.hosts[0]).last_heartbeat == at(0)
    monkeypatch.setattr(SimulatedFleet, "poll_hosts", lambda *a: HostHealth())
    tick(lab, 30)
    assert refresh(lab.hosts[0]).state == "AVAILABLE"
    tick(lab, 61)
    assert refresh(lab.hosts[0]).state == "DOWN"
    assert "lost heartbeat" in lab.hosts[0].state_reason


def test_a_host_back_in_service_takes_work_again(lab):
    for host in lab.hosts:
        host_services.drain(lab.operator, host, "maintenance window")
    w = make_workload(lab, lab.a1, gpus=1)
    tick(lab, 0)
    assert refresh(w).state == "PENDING"
    host_services.return_to_service(lab.operator, Host.objects.get(name="lab-1"))
    tick(lab, 1)
    assert refresh(w).state == "RUNNING"
    assert held_gpus() == [("lab-1", 0)]
