"""The embedded simulated fleet: keeps the portal alive on a laptop, deterministically.

Nothing runs anywhere; what happens is derived from the run records and seeded draws
(``traces.seeded_unit``: same seed, same history, in any process), so ticks are idempotent
and tests are reproducible. ``cluster.backend_config`` keys (all optional):

``seed`` (0)
    seed of every draw below.
``default_duration`` (3600)
    seconds of work of a workload without ``expected_duration``.
``command_failure_rate`` (0.0)
    seeded fraction of runs whose command fails (exit code 1). Independently, a command
    containing ``exit N`` (N != 0) always fails with exit code N. A failing run ends when its
    work would have ended.
``failure_rate_per_host_day`` (0.02)
    expected host failures per host per day. Each host draws once per clock hour; a failure
    is a lost heartbeat (the host dies and loses its runs) or a GPU error (the host drains),
    half and half, at a seeded moment within the hour.
``host_failures`` ([])
    failures at given moments, for scenarios that must happen when they are written:
    ``[{"host": "h3", "at": <epoch seconds>, "kind": "lost_heartbeat" | "gpu_error"}]``.
``repair_seconds`` (30)
    a repair attempt happens this long after the host entered REPAIRING.
``repair_success`` (0.8)
    probability that a repair attempt brings the host back (seeded per host and attempt).

A resumable workload checkpoints: a new run needs only the work its earlier runs had not
done (time until they were signalled, or ended). A non-resumable one starts again.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from scheduler.engine.traces import seeded_unit

from .base import Finished, FleetBackend, HealthSignal, HostHealth, earlier_work

EXIT = re.compile(r"\bexit\s+(\d+)\b")
HOUR = 3600.0
ALIVE = ("AVAILABLE", "DRAINING", "DRAINED")


class SimulatedFleet(FleetBackend):
    name = "simulated"

    def __init__(self, cluster):
        super().__init__(cluster)
        c = self.config
        self.seed = int(c.get("seed", 0))
        self.default_duration = float(c.get("default_duration", 3600))
        self.command_failure_rate = float(c.get("command_failure_rate", 0.0))
        self.failure_rate = float(c.get("failure_rate_per_host_day", 0.02))
        self.repair_seconds = float(c.get("repair_seconds", 30))
        self.repair_success = float(c.get("repair_success", 0.8))
        self.scheduled = [(str(f["host"]), float(f["at"]), str(f.get("kind", "lost_heartbeat")))
                          for f in c.get("host_failures") or ()]

    # -- runs ------------------------------------------------------------------------------

    def launch(self, run, placement) -> str:
        return f"sim-{run.pk}"

    def signal(self, run) -> None:
        pass

    def stop(self, run) -> None:
        pass

    def work(self, workload) -> float:
        return float(workload.expected_duration or self.default_duration)

    def exit_code(self, run) -> int:
        found = EXIT.findall(run.workload.command or "")
        if found and int(found[-1]) != 0:
            return int(found[-1])
        if self.command_failure_rate > 0:
            key = f"{run.workload_id}:{run.number}"
            if seeded_unit(self.seed, "command", key) < self.command_failure_rate:
                return 1
        return 0

    def poll_runs(self, runs, now: datetime) -> list[Finished]:
        runs = list(runs)
        again = [r.workload_id for r in runs if r.number > 1 and r.workload.resumable]
        done_before = earlier_work(again) if again else {}
        finished = []
        for run in runs:
            left = max(0.0, self.work(run.workload) - done_before.get(run.workload_id, 0.0))
            end = run.started + timedelta(seconds=left)
            if end <= now:
                code = self.exit_code(run)
                message = "completed" if code == 0 else f"command exited with code {code}"
                finished.append(Finished(run.pk, end, code, message))
        return finished

    # -- hosts -----------------------------------------------------------------------------

    def poll_hosts(self, hosts, since: datetime, now: datetime) -> HostHealth:
        health = HostHealth()
        alive = [h for h in hosts if h.state in ALIVE]
        # Never look back more than a day: a portal switched off for a week does not come
        # back to a fleet in ruins.
        lo = max(since.timestamp(), now.timestamp() - 86400.0)
        hi = now.timestamp()
        p = self.failure_rate / 24.0
        failed = set()
        if p > 0 and hi > lo:
            for host in alive:
                if host.state == "DRAINED":
                    continue
                for k in range(int(lo // HOUR), int(hi // HOUR) + 1):
                    key = f"{host.name}:{k}"
                    if seeded_unit(self.seed, "host-failure", key) >= p:
                        continue
                    t = k * HOUR + seeded_unit(self.seed, "host-failure-at", key) * HOUR
                    if not lo < t <= hi:
                        continue
                    at = datetime.fromtimestamp(t, tz=now.tzinfo)
                    if seeded_unit(self.seed, "host-failure-kind", key) < 0.5:
                        signal = HealthSignal(host.name, "lost_heartbeat", at,
                                              "lost heartbeat: host stopped answering")
                    else:
                        signal = HealthSignal(host.name, "gpu_error", at,
                                              "GPU error (XID 79: GPU fell off the bus)")
                    health.signals.append(signal)
                    failed.add(host.name)
                    break
        for name, t, kind in self.scheduled:
            if lo < t <= hi and name not in failed and any(h.name == name for h in alive):
                at = datetime.fromtimestamp(t, tz=now.tzinfo)
                why = ("lost heartbeat: host stopped answering" if kind == "lost_heartbeat"
                       else "GPU error (XID 79: GPU fell off the bus)")
                health.signals.append(HealthSignal(name, kind, at, why))
                failed.add(name)
        for host in alive:
            if host.name not in failed:
                health.heartbeats[host.name] = now
        return health

    def repair(self, host, now: datetime) -> bool:
        key = f"{host.name}:{host.state_changed.timestamp():.3f}"
        return seeded_unit(self.seed, "repair", key) < self.repair_success
