"""What the Slurm backend reads from Slurm's JSON, and what it does when Slurm is unreachable.
No live Slurm needed."""

from datetime import UTC, datetime

import pytest

from fleet.backends import backend_for
from fleet.backends.base import BackendUnavailable
from fleet.backends.slurm import (
    SlurmFleet,
    exit_status,
    expand_hostlist,
    expand_indices,
    job_gpus,
    node_down,
    node_drained,
    parse_config,
    parse_gres,
    parse_sacct,
)
from fleet.models import Cluster, Host
from scheduler import loop


def test_hostlists_expand_with_ranges_lists_and_padding():
    assert expand_hostlist("n2") == ["n2"]
    assert expand_hostlist("n[1-3,5]") == ["n1", "n2", "n3", "n5"]
    assert expand_hostlist("gpu-a[07-09],n4") == ["gpu-a07", "gpu-a08", "gpu-a09", "n4"]
    assert expand_hostlist("") == []


def test_gpu_indices_and_gres_are_read():
    assert expand_indices("0-1,4") == [0, 1, 4]
    assert expand_indices("N/A") == []
    assert parse_gres("gpu:h100:8(S:0-1)") == (8, "h100")
    assert parse_gres("gpu:8") == (8, "")
    assert parse_gres("gpu:a:2,gpu:a:2") == (4, "a")
    assert parse_gres("(null)") == (0, "")


def test_a_jobs_gpus_come_from_gres_detail_in_node_order():
    job = {"nodes": "n[1-2]", "gres_detail": ["gpu:h100:3(IDX:0-2)", "gpu:h100:3(IDX:1,3,5)"]}
    assert job_gpus(job) == {"n1": [0, 1, 2], "n2": [1, 3, 5]}
    assert job_gpus({"nodes": "n2", "gres_detail": []}) == {}


def test_exit_codes_are_decoded_from_wait_statuses():
    assert exit_status(0) == 0
    assert exit_status(3 << 8) == 3
    assert exit_status(143 << 8) == 143  # bash trapped TERM and exited 143
    assert exit_status(15) == 128 + 15  # killed by TERM
    assert exit_status({"return_code": 2, "signal": {}}) == 2


def test_node_states():
    assert node_drained({"state": "idle", "state_flags": ["DRAIN"]})
    assert not node_drained({"state": "mixed", "state_flags": []})
    assert node_down({"state": "down", "state_flags": []}) == "DOWN"
    assert node_down({"state": "idle", "state_flags": ["NOT_RESPONDING"]}) == "not responding"
    assert node_down({"state": "idle", "state_flags": ["DRAIN"]}) == ""


@pytest.mark.django_db
def test_backend_for_picks_slurm_from_the_cluster():
    cluster = Cluster.objects.create(name="s", gpu_type="H100", backend="slurm")
    fleet = backend_for(cluster)
    assert isinstance(fleet, SlurmFleet)
    assert fleet.partition == "timeshare" and fleet.unknown_jobs == "cancel"


@pytest.mark.django_db
def test_a_missing_slurm_conf_is_a_clear_error_at_once(tmp_path):
    cluster = Cluster.objects.create(
        name="s", gpu_type="H100", backend="slurm",
        backend_config={"slurm_conf": str(tmp_path / "nowhere.conf")},
    )
    with pytest.raises(BackendUnavailable, match="nowhere.conf does not exist"):
        SlurmFleet(cluster).check()


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_slurm_is_recorded_on_its_cluster_and_the_others_keep_scheduling(
    tmp_path,
):
    broken = Cluster.objects.create(
        name="broken", gpu_type="H100", backend="slurm",
        backend_config={"slurm_conf": str(tmp_path / "gone" / "slurm.conf")},
    )
    Host.objects.create(cluster=broken, name="n1", gpus=8)
    fine = Cluster.objects.create(name="fine", gpu_type="H100",
                                  backend_config={"failure_rate_per_host_day": 0})
    Host.objects.create(cluster=fine, name="f1", gpus=8)

    report = loop.tick(broken.pk)
    assert report.error.startswith("Slurm unreachable")
    broken.refresh_from_db()
    assert "does not exist" in broken.backend_error and broken.backend_error_at is not None

    assert not loop.tick(fine.pk).error  # another cluster ticks as usual
    assert fine.samples.count() == 1
    assert broken.samples.count() == 0  # nothing was decided without Slurm


def test_sacct_lines_read_as_final_jobs_with_shell_exit_codes_and_utc_times():
    failed, = parse_sacct("41|ts-lab-7|FAILED|7:0|2026-11-30T06:12:21|2026-11-30T06:12:25|n2")
    assert (failed["job_id"], failed["name"], failed["job_state"]) == ("41", "ts-lab-7", "FAILED")
    assert exit_status(failed["exit_code"]) == 7
    assert failed["final"] and failed["nodes"] == "n2"
    assert failed["end_time"] == datetime(2026, 11, 30, 6, 12, 25, tzinfo=UTC).timestamp()


def test_a_job_killed_by_a_signal_exits_128_plus_the_signal():
    killed, = parse_sacct("9|x|CANCELLED by 0|0:15|2026-11-30T06:00:00|2026-11-30T06:01:00|n1")
    assert killed["job_state"] == "CANCELLED"
    assert exit_status(killed["exit_code"]) == 143


def test_an_accounting_record_without_an_end_is_not_final():
    running, = parse_sacct("9|x|COMPLETED|0:0|2026-11-30T06:00:00|Unknown|n1")
    assert not running["final"]


def test_the_running_configuration_gives_accounting_and_min_job_age():
    config = parse_config("Configuration data as of 2026-11-30T06:00:00\n"
                          "MinJobAge               = 2 sec\n"
                          "AccountingStorageType   = accounting_storage/slurmdbd\n")
    assert config["MinJobAge"] == "2 sec"
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"
