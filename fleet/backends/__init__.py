"""The fleet: how the loop talks to GPU hosts. ``backend_for(cluster)`` picks the backend."""

from .base import (
    BackendUnavailable,
    Finished,
    FleetBackend,
    HealthSignal,
    HostHealth,
    LaunchRefused,
    Lost,
    Reconciliation,
    earlier_work,
    register_earlier_work,
)
from .simulated import SimulatedFleet
from .slurm import SlurmFleet

BACKENDS: dict[str, type[FleetBackend]] = {"simulated": SimulatedFleet, "slurm": SlurmFleet}


def backend_for(cluster) -> FleetBackend:
    try:
        return BACKENDS[cluster.backend](cluster)
    except KeyError:
        raise ValueError(
            f"cluster {cluster.name}: unknown fleet backend {cluster.backend!r}"
        ) from None


__all__ = [
    "BACKENDS",
    "BackendUnavailable",
    "Finished",
    "FleetBackend",
    "HealthSignal",
    "HostHealth",
    "LaunchRefused",
    "Lost",
    "Reconciliation",
    "SimulatedFleet",
    "SlurmFleet",
    "backend_for",
    "earlier_work",
    "register_earlier_work",
]
