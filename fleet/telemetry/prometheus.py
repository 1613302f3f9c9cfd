"""Telemetry of a real fleet: NVIDIA DCGM metrics scraped by Prometheus.

dcgm-exporter publishes ``DCGM_FI_DEV_GPU_UTIL`` (percent busy) and ``DCGM_FI_DEV_FB_USED``
(MiB of framebuffer used) with ``Hostname`` and ``gpu`` labels. One PromQL range query per
metric reads every GPU of the cluster's held hosts for a stretch of time: ``avg_over_time``
over one step, evaluated at the end of each step, is the GPU's mean over that step.

The server is ``settings.PROMETHEUS_URL`` (e.g. ``http://prometheus:9090``), or
``backend_config["prometheus_url"]`` for a cluster scraped by another server.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

from django.conf import settings

from .base import GpuKey, Holding, Point, TelemetrySource, TelemetryUnavailable

BUSY_METRIC = "DCGM_FI_DEV_GPU_UTIL"
MEMORY_METRIC = "DCGM_FI_DEV_FB_USED"
TIMEOUT = 10.0


REGEX_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\])")


def selector(metric: str, hosts: list[str]) -> str:
    """``metric{Hostname=~"h1|h2"}``: host names as literal RE2 alternatives, written as a
    PromQL string (whose backslashes are escaped once more)."""
    pattern = "|".join(REGEX_SPECIAL.sub(r"\\\1", host) for host in sorted(set(hosts)))
    literal = pattern.replace("\\", "\\\\").replace('"', '\\"')
    return f'{metric}{{Hostname=~"{literal}"}}'


class PrometheusTelemetry(TelemetrySource):
    name = "prometheus"

    def __init__(self, cluster, step: float = 60.0, url: str | None = None):
        super().__init__(cluster, step)
        config = cluster.backend_config or {}
        self.url = (url or config.get("prometheus_url") or settings.PROMETHEUS_URL or "").rstrip(
            "/"
        )

    def query_range(self, query: str, start: float, end: float) -> list[dict]:
        """The ``result`` of ``/api/v1/query_range`` (a matrix), or TelemetryUnavailable."""
        if not self.url:
            raise TelemetryUnavailable("no Prometheus server: set PROMETHEUS_URL")
        params = urllib.parse.urlencode(
            {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{self.step:g}"}
        )
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query_range?{params}",
                                        timeout=TIMEOUT) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:
            try:
                detail = json.load(error).get("error", error.reason)
            except ValueError:
                detail = error.reason
            raise TelemetryUnavailable(f"Prometheus at {self.url}: {detail}") from error
        except (OSError, ValueError) as error:
            raise TelemetryUnavailable(f"Prometheus at {self.url} unreachable: {error}") from error
        if body.get("status") != "success":
            raise TelemetryUnavailable(f"Prometheus at {self.url}: {body.get('error', body)}")
        return body["data"]["result"]

    def _steps(self, metric: str, hosts: list[str], start: float, end: float
               ) -> dict[GpuKey, dict[float, float]]:
        """{(host, gpu): {step start: mean over the step}} for ``metric``."""
        step = self.step
        query = f"avg_over_time({selector(metric, hosts)}[{step:g}s])"
        # evaluated at the end of each step: the value at t + step is the mean over (t, t + step]
        result = self.query_range(query, start + step, end)
        out: dict[GpuKey, dict[float, float]] = {}
        for series in result:
            labels = series["metric"]
            try:
                key = (labels["Hostname"], int(labels["gpu"]))
            except (KeyError, ValueError):
                continue  # not a DCGM series of a GPU
            values = out.setdefault(key, {})
            for at, value in series["values"]:
                values[float(at) - step] = float(value)
        return out

    def read(self, holdings: list[Holding], start: float, end: float) -> dict[GpuKey, list[Point]]:
        if not holdings or end <= start:
            return {}
        hosts = [h.host for h in holdings]
        wanted = {(h.host, h.index) for h in holdings}
        busy = self._steps(BUSY_METRIC, hosts, start, end)
        memory = self._steps(MEMORY_METRIC, hosts, start, end)
        series: dict[GpuKey, list[Point]] = {}
        for key, values in busy.items():
            if key not in wanted:
                continue
            used = memory.get(key, {})
            series[key] = [
                Point(at, min(1.0, max(0.0, percent / 100.0)), used.get(at))
                for at, percent in sorted(values.items())
            ]
        return series
