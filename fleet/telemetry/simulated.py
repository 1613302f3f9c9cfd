"""Telemetry of the embedded simulated fleet: every workload gets a utilization profile, drawn
from the cluster's seed and the workload, so the demo shows what real fleets show, squatting
included. ``cluster.backend_config`` keys (optional): ``seed`` (0), and ``idle_share`` (0.15),
the share of workloads that are interactive sessions left open.

Profiles (``PROFILES``), as a share of the workloads that are not idle sessions:

* training: 85-97% busy, a little noise from step to step;
* input-bound: 35-60% busy (data loading starves the GPU);
* an interactive session left open: 40-70% busy for its first 10 to 40 minutes, then 0-3%
  for the rest of the run, like a notebook nobody closed.

Each workload also holds a share of its GPUs' memory, drawn per workload, for as long as it
runs (training 60-95%, input-bound 30-60%, a session left open 40-70%, idle or not: the
model stays loaded), on the GPU types whose memory the simulator knows (``GPU_MEMORY_MIB``);
on others, memory is unknown, as with a real source that does not export it.

A GPU nobody holds is 0% busy; the simulated fleet measures every GPU it holds (a dead host
holds nothing: its runs ended with it).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.engine.traces import seeded_unit

from .base import GpuKey, Holding, Point, TelemetrySource, grid_floor


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    low: float  # busy fraction while working, drawn per workload in [low, high)
    high: float
    memory: tuple[float, float]  # share of the GPU's memory held, drawn per workload
    idle_after: tuple[float, float] | None = None  # seconds of work before it goes idle


TRAINING = Profile("training", 0.85, 0.97, memory=(0.60, 0.95))
INPUT_BOUND = Profile("input-bound", 0.35, 0.60, memory=(0.30, 0.60))
IDLE_SESSION = Profile("interactive session left open", 0.40, 0.70, memory=(0.40, 0.70),
                       idle_after=(600, 2400))
# The memory a GPU reports (MiB, as nvidia-smi shows it) per GPU type, for the types simulated.
GPU_MEMORY_MIB = {"H100": 81_559, "B200": 183_359}
# of the workloads that are not idle sessions
BUSY_PROFILES = ((TRAINING, 0.8), (INPUT_BOUND, 0.2))
IDLE_BUSY = (0.0, 0.03)
NOISE = 0.05


class SimulatedTelemetry(TelemetrySource):
    name = "simulated"

    def __init__(self, cluster, step: float = 60.0):
        super().__init__(cluster, step)
        config = cluster.backend_config or {}
        self.seed = int(config.get("seed", 0))
        self.idle_share = float(config.get("idle_share", 0.15))
        self.gpu_memory_mib = GPU_MEMORY_MIB.get(cluster.gpu_type.strip().upper())

    def profile(self, key: str) -> Profile:
        draw = seeded_unit(self.seed, "utilization-profile", key)
        if draw < self.idle_share:
            return IDLE_SESSION
        draw = (draw - self.idle_share) / (1.0 - self.idle_share)
        for profile, share in BUSY_PROFILES:
            if draw < share:
                return profile
            draw -= share
        return BUSY_PROFILES[-1][0]

    def busy(self, holding: Holding, t: float) -> float:
        """Busy fraction of the held GPU over the step starting at ``t``."""
        profile = self.profile(holding.key)
        level = profile.low + (profile.high - profile.low) * seeded_unit(
            self.seed, "utilization-level", holding.key
        )
        if profile.idle_after is not None:
            a, b = profile.idle_after
            active = a + (b - a) * seeded_unit(self.seed, "utilization-active", holding.key)
            if t - holding.start >= active:
                low, high = IDLE_BUSY
                return low + (high - low) * seeded_unit(
                    self.seed, "utilization-idle", f"{holding.key}:{holding.index}:{t:.0f}"
                )
        noise = NOISE * (2 * seeded_unit(
            self.seed, "utilization-noise", f"{holding.key}:{holding.index}:{t:.0f}"
        ) - 1)
        return min(1.0, max(0.0, level + noise))

    def memory_mib(self, holding: Holding) -> float | None:
        """Memory the holder keeps on the GPU while it runs; None for an unknown GPU type."""
        if self.gpu_memory_mib is None:
            return None
        low, high = self.profile(holding.key).memory
        share = low + (high - low) * seeded_unit(self.seed, "utilization-memory", holding.key)
        return share * self.gpu_memory_mib

    def read(self, holdings: list[Holding], start: float, end: float) -> dict[GpuKey, list[Point]]:
        steps: dict[GpuKey, dict[float, float]] = {}
        memory: dict[GpuKey, dict[float, float]] = {}
        for holding in holdings:
            gpu = (holding.host, holding.index)
            busy_at = steps.setdefault(gpu, {})
            memory_at = memory.setdefault(gpu, {})
            used = self.memory_mib(holding)
            t = max(start, grid_floor(holding.start, self.step))
            while t < min(end, holding.end):
                # the GPU's mean over the step: the holder's part of it (the rest is 0% busy)
                held = min(t + self.step, holding.end) - max(t, holding.start)
                busy_at[t] = busy_at.get(t, 0.0) + self.busy(holding, t) * held / self.step
                if used is not None:  # two holders in one step: the larger is the step's peak
                    memory_at[t] = max(memory_at.get(t, 0.0), used)
                t += self.step
        return {
            gpu: [Point(t, min(1.0, busy), memory[gpu].get(t))
                  for t, busy in sorted(busy_at.items())]
            for gpu, busy_at in steps.items()
        }
