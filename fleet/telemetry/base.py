"""The telemetry interface: how busy each GPU of a cluster was, per host and GPU index, over
time. A source knows hosts and GPU indices only; the scheduler maps what it reads to the runs
that held those GPUs (``scheduler.utilization``).

Time is cut into steps of ``step`` seconds on a fixed grid (multiples of ``step`` since 1970).
A ``Point`` at ``t`` is the GPU's mean busy fraction over ``[t, t + step)``; a step with no
point is a step the source knows nothing about (the host was down, the exporter silent), and
counts neither as busy nor as idle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


class TelemetryUnavailable(RuntimeError):
    """The source cannot be read (Prometheus unreachable or answering an error): the
    collection of that cluster is skipped and retried from the same moment next time."""


@dataclass(frozen=True, slots=True)
class Holding:
    """GPU ``index`` of ``host`` held over ``[start, end)`` (seconds since 1970) by something
    the source may know as ``key``: the simulated fleet draws a workload's utilization profile
    from it; a real source measures the GPU and ignores it."""

    host: str
    index: int
    start: float
    end: float
    key: str


@dataclass(frozen=True, slots=True)
class Point:
    at: float  # start of the step
    busy: float  # mean busy fraction over the step, 0 to 1
    memory_mib: float | None = None  # framebuffer memory used, where the source knows it


GpuKey = tuple[str, int]  # (host name, GPU index)


def grid_floor(t: float, step: float) -> float:
    return t // step * step


class TelemetrySource(ABC):
    """One cluster's GPU telemetry. Constructed per collection (cheap, no I/O)."""

    name = "abstract"

    def __init__(self, cluster, step: float = 60.0):
        self.cluster = cluster
        self.step = float(step)

    @abstractmethod
    def read(self, holdings: list[Holding], start: float, end: float) -> dict[GpuKey, list[Point]]:
        """Points of the held GPUs for the steps in ``[start, end)`` (both on the grid), in
        time order, per (host, index)."""
