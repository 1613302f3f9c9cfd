"""The simulated fleet's telemetry: utilization profiles per workload, squatting included."""

from datetime import timedelta

import pytest
from fixtures_loop import T0, at, make_workload, tick

from fleet.telemetry import Holding, SimulatedTelemetry
from fleet.telemetry.simulated import GPU_MEMORY_MIB, IDLE_SESSION, TRAINING
from scheduler.models import Run, TelemetryCursor, UtilizationRollup
from scheduler.utilization import collect

HOUR = 3600.0


def key_with(source, profile):
    return next(str(k) for k in range(1000) if source.profile(str(k)) is profile)


def test_about_the_idle_share_of_workloads_are_sessions_left_open(lab):
    source = SimulatedTelemetry(lab.cluster)  # idle_share 0.15 by default
    idle = sum(source.profile(str(k)) is IDLE_SESSION for k in range(2000))
    assert 0.12 < idle / 2000 < 0.18


def test_a_session_left_open_goes_idle_within_forty_minutes(lab):
    source = SimulatedTelemetry(lab.cluster)
    key = key_with(source, IDLE_SESSION)
    holding = Holding("lab-0", 0, 0.0, 4 * HOUR, key)

    points = source.read([holding], 2400.0, 4 * HOUR)[("lab-0", 0)]

    assert len(points) == (4 * HOUR - 2400) / 60
    assert max(p.busy for p in points) <= 0.03


def test_a_training_workload_stays_busy(lab):
    source = SimulatedTelemetry(lab.cluster)
    holding = Holding("lab-0", 0, 0.0, HOUR, key_with(source, TRAINING))

    points = source.read([holding], 0.0, HOUR)[("lab-0", 0)]

    assert min(p.busy for p in points) >= 0.80


def test_a_gpu_held_for_half_a_step_is_half_as_busy_as_its_holder(lab):
    source = SimulatedTelemetry(lab.cluster)
    key = key_with(source, TRAINING)
    whole = source.read([Holding("lab-0", 0, 0.0, HOUR, key)], 0.0, 60.0)[("lab-0", 0)][0]
    half = source.read([Holding("lab-0", 0, 0.0, 30.0, key)], 0.0, 60.0)[("lab-0", 0)][0]
    assert half.busy == pytest.approx(whole.busy / 2)


def test_a_session_left_open_keeps_its_memory_while_idle(lab):
    source = SimulatedTelemetry(lab.cluster)  # H100: 81,559 MiB
    holding = Holding("lab-0", 0, 0.0, 4 * HOUR, key_with(source, IDLE_SESSION))

    points = source.read([holding], 2400.0, 4 * HOUR)[("lab-0", 0)]

    # one share per workload, in [40%, 70%) of the GPU, at every step
    assert len({p.memory_mib for p in points}) == 1
    assert 0.40 * 81_559 <= points[0].memory_mib < 0.70 * 81_559


def test_a_gpu_type_the_simulator_does_not_know_reports_no_memory(lab):
    lab.cluster.gpu_type = "MI300X"
    assert "MI300X" not in GPU_MEMORY_MIB
    source = SimulatedTelemetry(lab.cluster)
    holding = Holding("lab-0", 0, 0.0, HOUR, key_with(source, TRAINING))

    points = source.read([holding], 0.0, HOUR)[("lab-0", 0)]

    assert {p.memory_mib for p in points} == {None}
    assert min(p.busy for p in points) >= 0.80  # utilization is still known


def test_the_live_loop_s_runs_are_measured_for_every_second_they_hold_gpus(lab):
    # A 4-GPU run started by the tick at T0 (on the step grid) and collected at T0 + 30 min:
    # the simulated fleet measures every held GPU-second, 4 x 1800 = 7200.
    lab.cluster.telemetry = "simulated"
    lab.cluster.save()
    make_workload(lab, lab.a1, gpus=4)
    tick(lab, 0)
    TelemetryCursor.objects.create(cluster=lab.cluster, until=T0)

    collect(lab.cluster, at(1800))

    run = Run.objects.get()
    assert sum(UtilizationRollup.objects.filter(run=run).values_list("gpu_seconds", flat=True)
               ) == pytest.approx(7200)


def test_the_memory_a_run_holds_reaches_its_rollups(lab):
    lab.cluster.telemetry = "simulated"
    lab.cluster.save()
    make_workload(lab, lab.a1, gpus=1)
    tick(lab, 0)
    TelemetryCursor.objects.create(cluster=lab.cluster, until=T0)

    collect(lab.cluster, at(1800))

    peaks = set(UtilizationRollup.objects.filter(run=Run.objects.get()).values_list(
        "memory_mib_max", flat=True))
    assert len(peaks) == 1  # the workload holds one share of its GPU all along
    assert 0.30 * 81_559 <= peaks.pop() < 0.95 * 81_559  # within any profile's range


def test_a_cluster_without_telemetry_collects_nothing(lab):
    make_workload(lab, lab.a1, gpus=4)
    tick(lab, 0)

    assert collect(lab.cluster, T0 + timedelta(minutes=30)) is None
    assert not UtilizationRollup.objects.exists()


def test_the_beat_task_collects_every_cluster_that_reports_telemetry(lab):
    from fleet.models import Cluster
    from scheduler.tasks import collect_utilization

    lab.cluster.telemetry = "simulated"
    lab.cluster.save()
    Cluster.objects.create(name="dark", gpu_type="H100")  # telemetry "none"

    assert collect_utilization() == 1
    assert TelemetryCursor.objects.get().cluster == lab.cluster
