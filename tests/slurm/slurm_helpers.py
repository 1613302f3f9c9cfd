"""Talking to the test Slurm cluster directly (TIMESHARE_SLURM_CONF), for the Slurm tests."""

import json
import os
import subprocess
import time

PARTITION = os.environ.get("TIMESHARE_SLURM_PARTITION", "timeshare")


def slurm(*args, check=True, input=None, tz=None) -> str:
    """Run a Slurm command against the test cluster; its stdout."""
    env = dict(os.environ, SLURM_CONF=os.environ["TIMESHARE_SLURM_CONF"])
    if tz:
        env["TZ"] = tz
    done = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=30,
                          input=input)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def jobs() -> list[dict]:
    data = json.loads(slurm("squeue", "--json"))
    return [j for j in data["jobs"] if j.get("partition") == PARTITION]


def job(job_id) -> dict | None:
    return next((j for j in jobs() if str(j["job_id"]) == str(job_id)), None)


def job_state(job_id) -> str | None:
    """The job's state from squeue, or from accounting once squeue has forgotten it (MinJobAge)."""
    found = job(job_id)
    if found:
        return found["job_state"]
    record = accounting_record(job_id)
    return record["state"] if record else None


def nodes() -> dict[str, dict]:
    data = json.loads(slurm("sinfo", "--json"))
    return {n["name"]: n for n in data["nodes"]}


ACTIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")


def reset_slurm():
    """No active job in the partition, every node up and undrained."""
    live = [str(j["job_id"]) for j in jobs() if j["job_state"] in ACTIVE]
    if live:
        slurm("scancel", *live, check=False)
    deadline = time.monotonic() + 60
    while any(j["job_state"] in ACTIVE for j in jobs()):
        if time.monotonic() > deadline:
            raise AssertionError("Slurm jobs did not go away within 60 s")
        time.sleep(0.2)
    for name, node in nodes().items():
        flags = set(node.get("state_flags") or []) | {str(node.get("state", "")).upper()}
        if flags & {"DRAIN", "DOWN", "DRAINED"}:
            slurm("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)
    deadline = time.monotonic() + 60
    while True:
        bad = [n for n, node in nodes().items()
               if node.get("state_flags") or str(node.get("state")) != "idle"]
        if not bad:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"Slurm nodes not idle within 60 s: {bad}")
        time.sleep(0.2)


def use_hosts(lab, *names):
    from fleet.models import Host

    Host.objects.filter(cluster=lab.cluster).exclude(name__in=names).delete()
    lab.hosts = list(Host.objects.filter(cluster=lab.cluster).order_by("name"))
    return lab


def accounting_record(job_id) -> dict | None:
    """What Slurm accounting says of a job: state, exit code, start and end (UTC), or None."""
    from datetime import UTC, datetime

    line = slurm("sacct", "-X", "-P", "-n", "-o", "State,ExitCode,Start,End",
                     f"--jobs={job_id}", tz="UTC").strip()
    if not line:
        return None
    state, exit_code, start, end = line.splitlines()[0].split("|")

    def when(text):
        return None if text == "Unknown" else datetime.fromisoformat(text).replace(tzinfo=UTC)

    return {"state": state.split()[0], "exit_code": int(exit_code.split(":")[0]),
            "start": when(start), "end": when(end)}
