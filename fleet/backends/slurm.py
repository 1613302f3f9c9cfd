"""The Slurm backend: Timeshare decides (fair share, contract, drain), Slurm executes.

Slurm is driven through its command line (``sbatch``, ``scancel``, ``scontrol``,
``squeue --json``, ``sinfo --json``; slurmrestd cannot pin a job to nodes in 22.05). Every
Timeshare run is one Slurm job named ``<job_prefix>-<run id>`` in the partition Timeshare owns,
pinned to the hosts the engine chose (``-w``), submitted with ``--no-requeue`` (a requeue is
Timeshare's decision: a new run, a new job) in a partition whose own preemption is off.

``cluster.backend_config`` keys (all optional):

``slurm_conf``
    path of the cluster's ``slurm.conf``, passed to every command as ``SLURM_CONF`` (default:
    the worker's own ``SLURM_CONF``, else Slurm's default).
``partition`` ("timeshare")
    the partition Timeshare owns: hosts are synced from it, jobs go to it, and every job in it
    that Timeshare did not start is dealt with by ``unknown_jobs``.
``unknown_jobs`` ("cancel")
    what to do with an active job in the partition that no live run owns. A job Timeshare
    started for a run that has ended (its ``scancel`` was lost) is always cancelled. Any other
    job is cancelled ("cancel": it holds GPUs the engine believes free, and Timeshare owns the
    partition) or only reported ("report") on the cluster page and in the log.
``job_prefix`` ("ts-<cluster name>")
    job names are ``<job_prefix>-<run id>``: one Slurm cluster can serve several Timeshare
    clusters (or installations) as long as partitions or prefixes differ.
``output_dir`` (``<TIMESHARE_VAR_DIR>/slurm/<cluster>``)
    per-workload output files ``workload-<id>.out`` (appended across runs) and checkpoint
    directories ``checkpoints/workload-<id>``; must be visible from the Slurm nodes.
``sbatch_args`` ([])
    extra ``sbatch`` arguments, e.g. ``["--cpus-per-gpu=8", "--mem-per-gpu=64G"]``.
``env`` ({})
    extra environment variables for every job.
``preempt_signal`` ("TERM")
    the signal sent to every process of a job when its grace period starts
    (``scancel --signal=TERM --full``: a signal, not a cancel; the cancel comes when the grace
    ends). Slurm logs a delivered TERM as "CANCELLED AT" in the job's output, so Timeshare
    writes there too when the grace started and when the cancel came.
``repair_command`` ("")
    a site command run by the automatic repair, formatted with ``{host}``, ``{cluster}``,
    ``{partition}`` (e.g. ``"scontrol reboot {host}"``, or a GPU reset and health script);
    exit status 0 means it did its part. It is not run again while Slurm reports the node
    rebooting. Then the health check: the node must be known to Slurm, responding, not DOWN
    and not drained by someone else (their maintenance: it comes back when they resume it).
    A node still DOWN is taken out of DOWN but kept drained, and checked at the next attempt.
    On success the loop resumes it in Slurm.
``repair_timeout`` (120), ``command_timeout`` (20)
    seconds allowed to the repair command and to each Slurm command.
``bin_dir`` ("")
    directory of the Slurm commands when they are not on ``PATH``.

GPU indices. Slurm cannot be told which GPU indices of a node to give a job: ``-w`` pins the
hosts, ``--gres=gpu:N`` the count, and Slurm picks the indices (like the engine, lowest free
first, so they usually agree). What Slurm assigned (``gres_detail`` of ``squeue --json``) is
the truth: the job's ``CUDA_VISIBLE_DEVICES`` and ``SLURM_JOB_GPUS`` carry it, and every tick
``reconcile`` reports it so that the loop rewrites the run's GPUs to match. The engine's own
choice is in the job's ``TIMESHARE_PLANNED_GPUS``.

Launches (two-phase, see ``fleet/backends/base.py``). The run is committed before ``sbatch``;
its job is named ``<job_prefix>-<run id>`` (and commented with the cluster, workload and run),
and the job id is recorded as soon as ``sbatch`` answers. Slurm unreachable at ``sbatch``
(``BackendUnavailable``) or refusing the job (``LaunchRefused``): the run never started. After a
worker crash, a run without a job id is looked up by its name in ``squeue`` and in accounting;
found nowhere, it is reported in ``not_launched`` and the loop puts it back in the queue.

Accounting. With slurmdbd (``AccountingStorageType=accounting_storage/slurmdbd``), a job that
left ``squeue`` is looked up with ``sacct``: the run ends with Slurm's final state, exit code and
end time, however long no tick ran. A record that still says ``End=Unknown`` (slurmdbd catching
up) is not final: the run waits for the next tick. Without accounting, finished jobs stay in
``squeue`` only for ``MinJobAge`` (300 s by default): a run whose job ended while no tick ran for
longer than that is reported lost (a resumable workload runs again, a non-resumable one ends
FAILED, both charged until the tick that noticed). ``reconcile`` reports which case applies in
``facts`` (``accounting``, ``min_job_age``) for the cluster page.

Reconciliation (every tick, ``reconcile``): runs whose job Slurm no longer has (neither in
``squeue`` nor in accounting) are lost: the loop requeues resumable ones and fails the others;
jobs no live run owns are cancelled or reported (``unknown_jobs``); node drain states are put
back in agreement with Timeshare's host states (a host that is not AVAILABLE is drained in
Slurm with the reason ``timeshare: ...``; an AVAILABLE host drained by Timeshare is resumed).
A node drained in Slurm by someone else is a health signal: Timeshare drains the host too.
A node DOWN, or a job of a live run ended by NODE_FAIL, is a lost host: its runs are
requeued or failed and the repair workflow starts. A node not responding gets no heartbeat
(the loop's ``heartbeat_timeout`` ends a long silence; Slurm sets it DOWN after its own
``SlurmdTimeout``).

Times. A run's start is moved to when Slurm started its job (a preempting run waits a few
seconds for its victims' jobs to end); its end is Slurm's end time (from accounting when the
job left ``squeue``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scheduler.engine import Workload as EngineWorkload

from .base import (
    BackendUnavailable,
    Finished,
    FleetBackend,
    HealthSignal,
    HostHealth,
    LaunchRefused,
    Lost,
    Reconciliation,
)

log = logging.getLogger(__name__)

OURS = "timeshare:"  # prefix of the drain reasons Timeshare sets in Slurm
ACTIVE = {"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT"}
FAILED = {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "CANCELLED"}
LOST = {"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"}
UNREACHABLE = re.compile(
    r"unable to contact|connection refused|socket timed out|zero bytes were transmitted|"
    r"unable to process configuration|communication connection failure|"
    r"slurm_persist_conn|could not establish|authentication", re.I,
)
# sacct columns read back (text: ``sacct --json`` reports a non-zero exit as 0 in 22.05)
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "Start", "End", "NodeList")
GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?:(?P<count>\d+)")
IDX = re.compile(r"IDX:(?P<idx>[^)]*)\)")


class SlurmError(RuntimeError):
    """A Slurm command refused what it was asked (bad node name, invalid request...)."""


@dataclass
class SyncResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in Timeshare, not in the partition
    gpu_type: str = ""

    def summary(self) -> str:
        parts = [f"{len(self.created)} created", f"{len(self.updated)} updated",
                 f"{len(self.unchanged)} unchanged"]
        if self.missing:
            parts.append("not in Slurm: " + " ".join(self.missing))
        return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
# Parsing


def expand_hostlist(text: str) -> list[str]:
    """``"n[1-3,5],gpu-a07"`` -> ``["n1", "n2", "n3", "n5", "gpu-a07"]`` (keeps zero padding)."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text or ""):
        m = re.fullmatch(r"(?P<pre>[^\[]*)\[(?P<ranges>[^\]]*)\](?P<post>.*)", part)
        if not m:
            names.append(part)
            continue
        for piece in m["ranges"].split(","):
            lo, _, hi = piece.partition("-")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                names.append(f"{m['pre']}{i:0{width}d}{m['post']}")
    return names


def expand_indices(text: str) -> list[int]:
    """``"0-1,4"`` -> ``[0, 1, 4]``; ``"N/A"`` -> ``[]``."""
    out: list[int] = []
    for piece in (text or "").split(","):
        lo, _, hi = piece.strip().partition("-")
        if lo.isdigit():
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def parse_gres(text: str) -> tuple[int, str]:
    """GPU count and type of a node's ``gres`` (``"gpu:h100:8(S:0-1)"``, ``"gpu:4,gpu:a:2"``)."""
    count, kind = 0, ""
    for item in re.split(r",(?=[a-z])", text or ""):
        m = GRES.match(item.strip())
        if m:
            count += int(m["count"])
            kind = kind or (m["type"] or "")
    return count, kind


def job_gpus(job: dict) -> dict[str, list[int]]:
    """{node: [GPU index, ...]} Slurm assigned to a running job (``gres_detail`` lists one
    entry per allocated node, in node-list order)."""
    nodes = expand_hostlist(job.get("nodes") or "")
    out: dict[str, list[int]] = {}
    for node, detail in zip(nodes, job.get("gres_detail") or [], strict=False):
        indices: list[int] = []
        for m in IDX.finditer(detail):
            indices.extend(expand_indices(m["idx"]))
        out[node] = sorted(indices)
    return out


def exit_status(raw) -> int:
    """A job's ``exit_code`` (a wait status in data parser v0.0.38) as a shell exit code."""
    if isinstance(raw, dict):  # newer data parsers: {"return_code": n, "signal": {...}}
        signal = (raw.get("signal") or {}).get("signal_id") or 0
        if signal:
            return 128 + int(signal)
        code = raw.get("return_code")
        return int(code.get("number", 0) if isinstance(code, dict) else code or 0)
    raw = int(raw or 0)
    if raw & 0x7F:
        return 128 + (raw & 0x7F)
    return (raw >> 8) & 0xFF


def _state(job: dict) -> str:
    state = job.get("job_state") or ""
    if isinstance(state, list):  # newer data parsers
        state = state[0] if state else ""
    return str(state).upper()


def _number(value) -> int:
    if isinstance(value, dict):  # newer data parsers: {"set": true, "number": n}
        value = value.get("number")
    return int(value or 0)


def _flags(node: dict) -> set[str]:
    state = node.get("state")
    flags = {str(f).upper() for f in node.get("state_flags") or []}
    if isinstance(state, list):
        flags.update(str(s).upper() for s in state)
    else:
        flags.add(str(state or "").upper())
    return flags


def node_drained(node: dict) -> bool:
    return bool(_flags(node) & {"DRAIN", "DRAINED", "DRAINING"})


def node_down(node: dict) -> str:
    """Why Slurm considers the node lost ("" when it is up)."""
    flags = _flags(node)
    if "NOT_RESPONDING" in flags:
        return "not responding"
    if flags & {"DOWN", "FAIL", "FAILING"}:
        return "DOWN"
    return ""


def _when(epoch, fallback: datetime) -> datetime:
    try:
        value = _number(epoch)
    except (TypeError, ValueError):
        return fallback
    if value <= 0:
        return fallback
    return datetime.fromtimestamp(value, tz=UTC)


def _sacct_time(text: str) -> int:
    """An ``sacct`` time (run with ``TZ=UTC``) as epoch seconds; 0 for Unknown/None."""
    try:
        return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def parse_sacct(text: str) -> list[dict]:
    """``sacct -X -P -n -o JobID,JobName,State,ExitCode,Start,End,NodeList`` lines as job
    records shaped like ``squeue --json`` jobs (so both are read alike). ``final``: False
    while the record says ``End=Unknown`` (slurmdbd catching up, or the job still runs).
    ``ExitCode`` is ``code:signal``; a signal gives 128 + signal like a shell."""
    records = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS):
            continue
        job_id, name, state, exit_code, start, end, nodes = parts
        code, _, signal = exit_code.partition(":")
        end_time = _sacct_time(end)
        records.append({
            "job_id": job_id, "name": name,
            "job_state": (state.split() or [""])[0],  # "CANCELLED by 0" -> CANCELLED
            "exit_code": {"return_code": int(code or 0),
                          "signal": {"signal_id": int(signal or 0)}},
            "start_time": _sacct_time(start), "end_time": end_time,
            "nodes": "" if nodes == "None assigned" else nodes,
            "final": end_time > 0, "accounting": True,
        })
    return records


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` as {key: value}."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


# ---------------------------------------------------------------------------------------------
# The backend


class SlurmFleet(FleetBackend):
    name = "slurm"

    def __init__(self, cluster):
        super().__init__(cluster)
        c = self.config
        self.slurm_conf = c.get("slurm_conf") or ""
        self.partition = c.get("partition") or "timeshare"
        self.unknown_jobs = c.get("unknown_jobs") or "cancel"
        self.prefix = c.get("job_prefix") or f"ts-{cluster.name}"
        self.timeout = float(c.get("command_timeout", 20))
        self.bin_dir = c.get("bin_dir") or ""
        self._jobs: list[dict] | None = None
        self._nodes: dict[str, dict] | None = None
        self._config: dict[str, str] | None = None
        self._run_jobs: dict[int, dict] | None = None
        self._node_failures: dict[str, str] = {}
        self.name_pattern = re.compile(re.escape(self.prefix) + r"-(\d+)$")

    # -- commands ------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        env["TZ"] = "UTC"  # sacct prints local times: make them UTC
        return env

    def where(self) -> str:
        return f"Slurm ({self.slurm_conf or os.environ.get('SLURM_CONF') or 'default slurm.conf'})"

    def command(self, *args: str, input: str | None = None, read: bool = False) -> str:
        """Run a Slurm command; its stdout. ``read`` commands (``squeue``, ``sinfo``) failing
        in any way mean Slurm is unreachable; others raise ``SlurmError`` for a refusal."""
        if self.slurm_conf and not Path(self.slurm_conf).is_file():
            # Slurm itself retries a missing configuration file for 60 s.
            raise BackendUnavailable(
                f"Slurm unreachable: SLURM_CONF {self.slurm_conf} does not exist"
            )
        exe = os.path.join(self.bin_dir, args[0]) if self.bin_dir else args[0]
        try:
            done = subprocess.run(
                [exe, *args[1:]], input=input, capture_output=True, text=True,
                timeout=self.timeout, env=self.env(),
            )
        except FileNotFoundError:
            raise BackendUnavailable(
                f"Slurm unreachable: {args[0]} not found (install slurm-wlm or set bin_dir)"
            ) from None
        except subprocess.TimeoutExpired:
            raise BackendUnavailable(
                f"Slurm unreachable: {args[0]} did not answer within {self.timeout:g} s "
                f"({self.where()})"
            ) from None
        if done.returncode != 0:
            error = " ".join((done.stderr or done.stdout or "").split())[:300]
            message = f"{shlex.join(args)} failed: {error or f'exit status {done.returncode}'}"
            if read or UNREACHABLE.search(error):
                raise BackendUnavailable(f"Slurm unreachable: {message} ({self.where()})")
            raise SlurmError(message)
        return done.stdout

    def jobs(self) -> list[dict]:
        """Every job of Timeshare's partition (``squeue --json`` ignores filters), once a tick."""
        if self._jobs is None:
            data = self._json("squeue")
            self._jobs = [j for j in data.get("jobs", []) if self._in_partition(j)]
        return self._jobs

    def nodes(self) -> dict[str, dict]:
        """Every node of Timeshare's partition by name, once a tick."""
        if self._nodes is None:
            data = self._json("sinfo")
            self._nodes = {
                n["name"]: n for n in data.get("nodes", [])
                if self.partition in (n.get("partitions") or [])
            }
        return self._nodes

    def _json(self, what: str) -> dict:
        text = self.command(what, "--json", read=True)
        try:
            return json.loads(text)
        except ValueError:
            raise BackendUnavailable(
                f"Slurm unreachable: {what} --json answered no JSON ({self.where()})"
            ) from None

    def slurm_config(self) -> dict[str, str]:
        """The controller's running configuration (``scontrol show config``), once a tick."""
        if self._config is None:
            self._config = parse_config(self.command("scontrol", "show", "config", read=True))
        return self._config

    def accounting(self) -> bool:
        """True when Slurm keeps job records in slurmdbd (``sacct`` answers for old jobs)."""
        return "slurmdbd" in self.slurm_config().get("AccountingStorageType", "")

    def min_job_age(self) -> int:
        """Seconds a finished job stays in ``squeue`` (``MinJobAge``)."""
        found = re.match(r"\d+", self.slurm_config().get("MinJobAge", ""))
        return int(found[0]) if found else 300

    def accounted(self, *, job_ids=(), names=(), since: datetime | None = None) -> list[dict]:
        """Accounting records of jobs by id, or by name since ``since`` (``sacct`` needs a start
        time to find jobs by name; it answers for every job started after it)."""
        args = ["sacct", "-X", "-P", "-n", "-o", ",".join(SACCT_FIELDS)]
        if job_ids:
            args.append("--jobs=" + ",".join(job_ids))
        else:
            args += ["--name=" + ",".join(names),
                     f"--starttime={since:%Y-%m-%dT%H:%M:%S}" if since else "--starttime=now-7days"]
        return parse_sacct(self.command(*args, read=True))

    def run_jobs(self, runs) -> dict[int, dict]:
        """The Slurm job of each live run, once a tick: from ``squeue`` by the recorded job id
        (or by name when the id is not recorded yet: the newest job of that name), else, with
        accounting, the record of a job that left ``squeue``. A run missing from the answer
        has no job Slurm knows of."""
        if self._run_jobs is not None:
            return self._run_jobs
        jobs = self.jobs()
        by_id = {str(j.get("job_id")): j for j in jobs}
        by_name: dict[int, dict] = {}
        for job in jobs:
            run_id = self.run_of(job)
            if run_id is not None and (run_id not in by_name or _number(job.get("job_id"))
                                       > _number(by_name[run_id].get("job_id"))):
                by_name[run_id] = job
        found: dict[int, dict] = {}
        for run in runs:
            job = by_id.get(run.backend_id) if run.backend_id else by_name.get(run.pk)
            if job is not None:
                found[run.pk] = job
        missing = [run for run in runs if run.pk not in found]
        if missing and self.accounting():
            ids = [run.backend_id for run in missing if run.backend_id]
            if ids:
                by_id = {str(r["job_id"]): r for r in self.accounted(job_ids=ids)}
                for run in missing:
                    if run.backend_id in by_id:
                        found[run.pk] = by_id[run.backend_id]
            unnamed = [run for run in missing if not run.backend_id]
            if unnamed:
                since = min(run.started for run in unnamed) - timedelta(minutes=5)
                for record in self.accounted(names=[self.job_name(r) for r in unnamed],
                                             since=since):
                    run_id = self.run_of(record)
                    if run_id is not None and (run_id not in found or _number(record["job_id"])
                                               > _number(found[run_id].get("job_id"))):
                        found[run_id] = record
        self._run_jobs = found
        return found

    def _in_partition(self, job: dict) -> bool:
        return self.partition in str(job.get("partition") or "").split(",")

    def known_hosts(self) -> set[str]:
        """The GPU nodes of Timeshare's partition."""
        return {name for name, node in self.nodes().items()
                if parse_gres(node.get("gres") or "")[0] > 0}

    def check(self) -> None:
        """Raise ``BackendUnavailable`` unless Slurm answers (for the admin and commands)."""
        self.nodes()

    # -- naming ----------------------------------------------------------------------------

    def job_name(self, run) -> str:
        return f"{self.prefix}-{run.pk}"

    def run_of(self, job: dict) -> int | None:
        m = self.name_pattern.match(job.get("name") or "")
        return int(m[1]) if m else None

    def output_dir(self) -> Path:
        configured = self.config.get("output_dir")
        if configured:
            return Path(configured)
        from django.conf import settings

        return Path(settings.VAR_DIR) / "slurm" / self.cluster.name

    def output_path(self, workload) -> Path:
        return self.output_dir() / f"workload-{workload.pk}.out"

    def checkpoint_dir(self, workload) -> Path:
        return self.output_dir() / "checkpoints" / f"workload-{workload.pk}"

    # -- runs ------------------------------------------------------------------------------

    def grace_for(self, workload) -> float:
        """The grace period the engine gives a preempted run of ``workload`` (shorter for
        unallocated work): the time the job script announces between the signal and the
        cancel. The rule looks only at the workload's kind, so its budget is left out."""
        params = self.cluster.engine_params()
        return params.grace_for(EngineWorkload(
            id=str(workload.pk), budget="", gpus=workload.gpus,
            min_runtime=float(workload.min_runtime), resumable=workload.resumable,
            submitted=workload.submitted.timestamp(), name=workload.name,
        ))

    def script(self, run, placement) -> str:
        w = run.workload
        planned = " ".join(f"{h}:{','.join(map(str, i))}" for h, i in placement.slots)
        env = {
            "TIMESHARE_CLUSTER": self.cluster.name,
            "TIMESHARE_WORKLOAD_ID": str(w.pk),
            "TIMESHARE_RUN_ID": str(run.pk),
            "TIMESHARE_RUN_NUMBER": str(run.number),
            "TIMESHARE_RESUMABLE": "1" if w.resumable else "0",
            "TIMESHARE_CHECKPOINT_DIR": str(self.checkpoint_dir(w)),
            "TIMESHARE_PREEMPT_SIGNAL": self.config.get("preempt_signal") or "TERM",
            "TIMESHARE_GRACE_SECONDS": str(round(self.grace_for(w))),
            "TIMESHARE_MIN_RUNTIME": str(w.min_runtime),
            "TIMESHARE_PLANNED_GPUS": planned,
        }
        env.update({str(k): str(v) for k, v in (self.config.get("env") or {}).items()})
        lines = [
            "#!/bin/bash",
            f"# Timeshare cluster {self.cluster.name}: workload {w.pk} ({w.name}), "
            f"run {run.number}",
            *(f"export {k}={shlex.quote(v)}" for k, v in env.items()),
            'mkdir -p "$TIMESHARE_CHECKPOINT_DIR"',
            'echo "== timeshare: run $TIMESHARE_RUN_NUMBER of workload $TIMESHARE_WORKLOAD_ID,'
            ' job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, GPUs $CUDA_VISIBLE_DEVICES, $(date -Is)"',
            w.command,
            "",
        ]
        return "\n".join(lines)

    def launch(self, run, placement) -> str:
        counts = [len(indices) for _, indices in placement.slots]
        hosts = ",".join(placement.hosts)
        out = self.output_path(run.workload)
        out.parent.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir(run.workload).mkdir(parents=True, exist_ok=True)
        args = [
            "sbatch", "--parsable", f"--job-name={self.job_name(run)}",
            f"--partition={self.partition}", f"--nodelist={hosts}", f"--nodes={len(counts)}",
            "--ntasks-per-node=1", "--no-requeue", "--export=NONE", "--open-mode=append",
            f"--output={out}", f"--chdir={out.parent}",
            f"--comment=timeshare cluster={self.cluster.name} workload={run.workload_id} "
            f"run={run.pk}",
        ]
        if len(set(counts)) == 1:
            args.append(f"--gres=gpu:{counts[0]}")
        else:  # uneven spread over hosts: the total, Slurm spreads it
            args.append(f"--gpus={sum(counts)}")
        args.extend(str(a) for a in self.config.get("sbatch_args") or [])
        try:
            text = self.command(*args, input=self.script(run, placement)).strip()
        except SlurmError as error:
            raise LaunchRefused(f"Slurm refused the job: {error}") from None
        job_id = text.split(";")[0].strip()
        if not job_id.isdigit():
            raise LaunchRefused(f"sbatch answered {text!r} instead of a job id")
        log.info("run %s launched as Slurm job %s on %s", run.pk, job_id, hosts)
        return job_id

    def _job_ref(self, run) -> list[str]:
        if run.backend_id:
            return [run.backend_id]
        # Not recorded yet (the launch is in flight): by name, in our partition.
        return [f"--name={self.job_name(run)}", f"--partition={self.partition}"]

    def _tell_output(self, run, line: str) -> None:
        """Add a line to the workload's output file, beside what the job writes."""
        try:
            with self.output_path(run.workload).open("a") as out:
                out.write(f"== timeshare: {line}\n")
        except OSError as error:
            log.warning("could not write to the output of run %s: %s", run.pk, error)

    def signal(self, run) -> None:
        sig = self.config.get("preempt_signal") or "TERM"
        # Slurm logs a TERM it delivers as "CANCELLED AT": say in the user's file that the job
        # runs on through its grace period, and when the cancel really comes.
        self._tell_output(run, f"preemption at {datetime.now(UTC):%Y-%m-%dT%H:%M:%S}: {sig} "
                          f"sent to every process; the job keeps its GPUs for its grace of "
                          f"{self.cluster.grace} s (a CANCELLED line from Slurm now is this "
                          "signal, not the cancel)")
        self.command("scancel", f"--signal={sig}", "--full", *self._job_ref(run))

    def stop(self, run) -> None:
        if run.signalled_at is not None:
            self._tell_output(run, f"grace over at {datetime.now(UTC):%Y-%m-%dT%H:%M:%S}: "
                              "the job is cancelled")
        # A failure here is not fatal: reconcile() cancels a job whose run has ended.
        try:
            self.command("scancel", *self._job_ref(run))
        except (SlurmError, BackendUnavailable) as error:
            log.warning("could not cancel the Slurm job of run %s: %s", run.pk, error)

    def poll_runs(self, runs, now: datetime) -> list[Finished]:
        """Runs whose job ended on its own: from ``squeue`` while the job is there, from
        accounting (final state, exit code, end time) once it left."""
        jobs = self.run_jobs(runs)
        finished = []
        for run in runs:
            if run.signalled_at is not None:
                continue  # in its grace period: the engine stops it when the grace ends
            job = jobs.get(run.pk)
            if job is None or not job.get("final", True):
                continue  # reconcile() deals with jobs that are missing
            state = _state(job)
            if state == "COMPLETED" or state in FAILED:
                code = exit_status(job.get("exit_code"))
                if state == "COMPLETED":
                    message = "completed" if code == 0 else f"command exited with code {code}"
                elif state == "CANCELLED":
                    code = code or 1
                    message = f"Slurm job {job.get('job_id')} cancelled outside Timeshare"
                else:
                    code = code or 1
                    reason = job.get("state_reason") or ""
                    message = f"command exited with code {code} (Slurm: {state}" + (
                        f", {reason})" if reason and reason != "None" else ")"
                    )
                if job.get("accounting"):
                    message += " (from Slurm accounting)"
                finished.append(Finished(run.pk, self._ended(run, job, now), code, message,
                                         str(job.get("job_id"))))
        return finished

    @staticmethod
    def _ended(run, job: dict, now: datetime) -> datetime:
        return max(run.started, min(now, _when(job.get("end_time"), now)))

    # -- reconciliation --------------------------------------------------------------------

    def reconcile(self, runs, hosts, now: datetime) -> Reconciliation:
        result = Reconciliation()
        jobs = self.jobs()
        run_jobs = self.run_jobs(runs)
        accounting = self.accounting()
        result.facts = {"accounting": accounting, "min_job_age": self.min_job_age()}
        owned: set[str] = set()
        for run in runs:
            job = run_jobs.get(run.pk)
            if job is not None:
                owned.add(str(job.get("job_id")))
                if not run.backend_id:
                    result.backend_ids[run.pk] = str(job.get("job_id"))
                self._reconcile_run(run, job, now, result)
                continue
            if not run.backend_id:
                where = "squeue or Slurm accounting" if accounting else (
                    f"squeue (no accounting: a job that ended over {self.min_job_age()} s ago "
                    "would be gone too)")
                result.not_launched[run.pk] = (
                    f"never reached Slurm: no job named {self.job_name(run)} in {where}")
            elif run.signalled_at is None:  # a signalled one leaves anyway: the grace ends it
                where = "neither in squeue nor in accounting" if accounting else (
                    f"not in squeue any more; without accounting a job that ended over "
                    f"{self.min_job_age()} s before this tick is gone")
                result.lost.append(Lost(run.pk, now,
                                        f"Slurm lost job {run.backend_id} ({where})"))
        for job in jobs:
            job_id = str(job.get("job_id"))
            if job_id in owned or _state(job) not in ACTIVE:
                continue
            run_id = self.run_of(job)
            what = f"Slurm job {job_id} ({job.get('name')}, user {job.get('user_name') or '?'})"
            if run_id is not None:
                self._cancel(job_id, f"{what}: its run has ended in Timeshare", result)
            elif self.unknown_jobs == "report":
                result.problems.append(
                    f"{what} in partition {self.partition} was not started by Timeshare "
                    "(left running: unknown_jobs=report)"
                )
            else:
                self._cancel(job_id, f"{what} in partition {self.partition} was not started "
                             "by Timeshare", result)
        self._reconcile_nodes(hosts, result)
        return result

    def _reconcile_run(self, run, job: dict, now: datetime, result: Reconciliation) -> None:
        """What a live run's job says: where its GPUs are, when it really started, whether it
        died with its node."""
        state = _state(job)
        if state == "RUNNING" or job.get("final"):
            started = _number(job.get("start_time"))
            if started > 0:
                result.started[run.pk] = min(now, datetime.fromtimestamp(started, tz=UTC))
        if state == "RUNNING" and not job.get("accounting"):
            gpus = job_gpus(job)
            if gpus and all(gpus.values()):
                result.placements[run.pk] = gpus
        if state in LOST and run.signalled_at is None and job.get("final", True):
            reason = job.get("state_reason") or state
            if state != "PREEMPTED":  # its node died: a health signal (poll_hosts)
                for node in expand_hostlist(job.get("nodes") or ""):
                    self._node_failures.setdefault(
                        node, f"Slurm: node failure ended job {job.get('job_id')} ({reason})")
            result.lost.append(Lost(
                run.pk, self._ended(run, job, now),
                f"Slurm job {job.get('job_id')} ended {state} ({reason}) on "
                f"{job.get('nodes') or '?'}",
                "failed" if state == "PREEMPTED" else "host_failure",
            ))

    def _cancel(self, job_id: str, why: str, result: Reconciliation) -> None:
        try:
            self.command("scancel", job_id)
            result.notes.append(f"{why}: cancelled")
        except SlurmError as error:
            result.notes.append(f"{why}: could not cancel it ({error})")

    def _reconcile_nodes(self, hosts, result: Reconciliation) -> None:
        nodes = self.nodes()
        for host in hosts:
            node = nodes.get(host.name)
            if node is None:
                continue
            drained = node_drained(node)
            ours = (node.get("reason") or "").startswith(OURS)
            if host.state != "AVAILABLE" and not drained:
                self._update(host.name, "DRAIN", f"{host.state}: {host.state_reason}")
                result.notes.append(f"node {host.name} drained in Slurm: {host.state} in Timeshare")
            elif host.state == "AVAILABLE" and drained and ours:
                self._update(host.name, "RESUME")
                result.notes.append(f"node {host.name} resumed in Slurm: AVAILABLE in Timeshare")

    # -- hosts -----------------------------------------------------------------------------

    def poll_hosts(self, hosts, since: datetime, now: datetime) -> HostHealth:
        health = HostHealth()
        nodes = self.nodes()
        # Nodes whose failure ended a live run's job (found by reconcile(), earlier in the
        # tick): Slurm may have returned the node to service already (ReturnToService=2).
        failed = dict(self._node_failures)
        for host in hosts:
            node = nodes.get(host.name)
            if node is None:
                health.signals.append(HealthSignal(
                    host.name, "lost_heartbeat", now,
                    f"lost: node {host.name} is not in Slurm partition {self.partition}",
                ))
                continue
            down = node_down(node)
            reason = node.get("reason") or ""
            if down == "not responding":
                # No heartbeat (the loop's heartbeat_timeout ends a long silence); Slurm itself
                # sets the node DOWN after its SlurmdTimeout. A resumed node answers late.
                continue
            if down:
                health.signals.append(HealthSignal(
                    host.name, "lost_heartbeat", now,
                    f"Slurm reports {host.name} {down}" + (f": {reason}" if reason else ""),
                ))
                continue
            if host.name in failed:
                health.signals.append(HealthSignal(host.name, "lost_heartbeat", now,
                                                   failed[host.name]))
                continue
            health.heartbeats[host.name] = now
            if node_drained(node) and not reason.startswith(OURS):
                by = node.get("reason_set_by_user") or "someone"
                health.signals.append(HealthSignal(
                    host.name, "slurm_drain", now,
                    f"drained in Slurm by {by}: {reason or 'no reason given'}",
                ))
        return health

    def _update(self, host: str, state: str, reason: str = "") -> None:
        args = ["scontrol", "update", f"NodeName={host}", f"State={state}"]
        if reason:
            args.append(f"Reason={OURS} {' '.join(reason.split())}"[:250])
        self.command(*args)

    def drain(self, host, reason: str) -> None:
        # Leaves a drain by somebody else alone (their reason stays visible in Slurm); a
        # failure is fixed by the next tick's reconcile().
        try:
            node = self.nodes().get(host.name)
            if node is not None and node_drained(node):
                return
            self._update(host.name, "DRAIN", reason)
        except (SlurmError, BackendUnavailable) as error:
            log.warning("could not drain %s in Slurm: %s", host.name, error)

    def resume(self, host) -> None:
        try:
            node = self.nodes().get(host.name)
            if node is not None and not node_drained(node) and not node_down(node):
                return
            self._update(host.name, "RESUME")
        except (SlurmError, BackendUnavailable) as error:
            log.warning("could not resume %s in Slurm: %s", host.name, error)

    def repair(self, host, now: datetime) -> bool:
        node = self.nodes().get(host.name)
        rebooting = node is not None and bool(
            _flags(node) & {"REBOOT_REQUESTED", "REBOOT_ISSUED", "REBOOT"}
        )
        command = self.config.get("repair_command") or ""
        if command and not rebooting:
            line = command.format(host=host.name, cluster=self.cluster.name,
                                  partition=self.partition)
            try:
                done = subprocess.run(
                    line, shell=True, capture_output=True, text=True, env=self.env(),
                    timeout=float(self.config.get("repair_timeout", 120)),
                )
            except subprocess.TimeoutExpired:
                log.warning("repair of %s: %r timed out", host.name, line)
                return False
            if done.returncode != 0:
                log.warning("repair of %s: %r exited %s: %s", host.name, line, done.returncode,
                            (done.stderr or done.stdout).strip()[:300])
                return False
            self._nodes = None  # look again after the command
        node = self.nodes().get(host.name)
        if node is None or rebooting:
            return False
        down = node_down(node)
        if down == "not responding":
            return False
        if down:
            # Bring it out of DOWN, but keep it drained until Timeshare takes it back: the next
            # attempt sees whether it answers.
            self._update(host.name, "RESUME")
            self._update(host.name, "DRAIN", f"{host.state}: {host.state_reason}")
            self._nodes = None
            return False
        flags = _flags(node)
        if flags & {"FAIL", "FAILING", "INVALID", "INVAL"}:
            return False
        reason = node.get("reason") or ""
        # Drained by someone else (maintenance): not ours to bring back.
        return not (node_drained(node) and reason and not reason.startswith(OURS))

    # -- discovery -------------------------------------------------------------------------

    def sync_hosts(self) -> SyncResult:
        """Create or update the cluster's hosts (name, GPU count, group from the node's first
        feature) from the partition's nodes; never deletes (hosts keep their history). A
        retired host the partition has again comes back into service."""
        from fleet.models import Host

        result = SyncResult()
        nodes = self.nodes()
        existing = {h.name: h for h in Host.with_retired.filter(cluster=self.cluster)}
        for name in sorted(nodes):
            node = nodes[name]
            gpus, kind = parse_gres(node.get("gres") or "")
            if gpus < 1:
                continue
            result.gpu_type = result.gpu_type or kind
            features = [f for f in str(node.get("active_features") or node.get("features") or "")
                        .split(",") if f]
            group = features[0][:50] if features else ""
            host = existing.get(name)
            if host is None:
                Host.objects.create(cluster=self.cluster, name=name, gpus=gpus, group=group)
                result.created.append(name)
            elif host.gpus != gpus or (group and host.group != group) or host.retired:
                host.gpus = gpus
                host.group = group or host.group
                host.retired = None
                host.save(update_fields=["gpus", "group", "retired"])
                result.updated.append(name)
            else:
                result.unchanged.append(name)
        result.missing = sorted({n for n, h in existing.items() if not h.retired} - set(nodes))
        return result
