"""The fleet: how the loop talks to GPU hosts. ``backend_for(cluster)`` picks the backend."""

from .base import Finished, FleetBackend, HealthSignal, HostHealth
from .simulated import SimulatedFleet

BACKENDS: dict[str, type[FleetBackend]] = {"simulated": SimulatedFleet}


def backend_for(cluster) -> FleetBackend:
    try:
        return BACKENDS[cluster.backend](cluster)
    except KeyError:
        raise ValueError(
            f"cluster {cluster.name}: unknown fleet backend {cluster.backend!r}"
        ) from None


__all__ = [
    "BACKENDS",
    "Finished",
    "FleetBackend",
    "HealthSignal",
    "HostHealth",
    "SimulatedFleet",
    "backend_for",
]
