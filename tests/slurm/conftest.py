"""Tests against a live local Slurm cluster (``scripts/slurm-cluster start``).

They are marked ``slurm`` and skipped unless ``TIMESHARE_SLURM_CONF`` points at the
``slurm.conf`` of a running cluster (``eval "$(scripts/slurm-cluster env)"``); with
``TIMESHARE_REQUIRE_SLURM=1`` (CI) a skipped Slurm test is a failure. The cluster is shared:
every test starts and ends with no job in the partition and every node resumed.
"""

import os
import subprocess
from pathlib import Path

import pytest
from slurm_helpers import PARTITION, reset_slurm, slurm

HERE = Path(__file__).resolve().parent
REQUIRE = "TIMESHARE_REQUIRE_SLURM"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With TIMESHARE_REQUIRE_SLURM=1 (CI) a skipped Slurm test is a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("slurm") and os.environ.get(REQUIRE) == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"Slurm test skipped but {REQUIRE}=1: {reason}"


@pytest.fixture(scope="session")
def slurm_conf():
    conf = os.environ.get("TIMESHARE_SLURM_CONF")
    if not conf:
        pytest.skip("no live Slurm: set TIMESHARE_SLURM_CONF (scripts/slurm-cluster start; "
                    'eval "$(scripts/slurm-cluster env)")')
    if not Path(conf).is_file():
        pytest.skip(f"TIMESHARE_SLURM_CONF={conf} does not exist")
    try:
        slurm("sinfo", "-h")
    except (AssertionError, OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"Slurm at {conf} does not answer: {error}")
    return conf


@pytest.fixture
def clean_slurm(slurm_conf):
    reset_slurm()
    yield slurm_conf
    reset_slurm()


@pytest.fixture
def slurm_lab(lab, clean_slurm, tmp_path):
    """The lab (tests/fixtures_loop.py) on the live Slurm: its hosts are Slurm's nodes
    n1..n4 (8 GPUs each), synced with ``manage.py slurm_sync``; grace 3 s, repairs after 1 s.
    ``use_hosts(slurm_lab, "n1", ...)`` keeps only some of them in Timeshare."""
    from django.core.management import call_command

    from fleet.models import Host

    cluster = lab.cluster
    Host.objects.filter(cluster=cluster).delete()
    cluster.backend = "slurm"
    cluster.grace = 3
    cluster.backend_config = {
        "slurm_conf": clean_slurm, "partition": PARTITION, "repair_seconds": 1,
        "output_dir": str(tmp_path / "slurm-out"),
        "job_prefix": f"ts-test-{os.getpid()}",
    }
    cluster.save()
    call_command("slurm_sync", cluster.name, stdout=open(os.devnull, "w"))  # noqa: SIM115
    cluster.refresh_from_db()
    lab.cluster = cluster
    lab.hosts = list(Host.objects.filter(cluster=cluster).order_by("name"))
    return lab

