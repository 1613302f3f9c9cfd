"""GPU telemetry: how busy each GPU was, per host and GPU index over time.
``telemetry_for(cluster)`` picks the cluster's source (``Cluster.telemetry``)."""

from django.conf import settings

from .base import GpuKey, Holding, Point, TelemetrySource, TelemetryUnavailable, grid_floor
from .prometheus import PrometheusTelemetry
from .simulated import SimulatedTelemetry

SOURCES: dict[str, type[TelemetrySource]] = {
    "simulated": SimulatedTelemetry,
    "prometheus": PrometheusTelemetry,
}


def telemetry_for(cluster) -> TelemetrySource | None:
    """The cluster's telemetry source, or None when the fleet reports no utilization."""
    source = SOURCES.get(cluster.telemetry)
    return source(cluster, step=settings.TELEMETRY_STEP_SECONDS) if source else None


__all__ = [
    "SOURCES",
    "GpuKey",
    "Holding",
    "Point",
    "PrometheusTelemetry",
    "SimulatedTelemetry",
    "TelemetrySource",
    "TelemetryUnavailable",
    "grid_floor",
    "telemetry_for",
]
