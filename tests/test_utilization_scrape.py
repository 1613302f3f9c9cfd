"""The whole path on a real Prometheus: a DCGM-format exporter served with prometheus_client,
scraped every second, read by a collection into the run's utilization."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from fixtures_loop import make_workload
from fixtures_prometheus import free_port, needs_prometheus, query
from polling import wait_for
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from fleet.telemetry import grid_floor
from scheduler.models import Run, RunGPU, TelemetryCursor, UtilizationRollup
from scheduler.utilization import collect

pytestmark = needs_prometheus
STEP = 2  # seconds: a short step keeps the test to a few seconds of real scraping


def test_a_scraped_dcgm_exporter_becomes_the_run_s_utilization(lab, prometheus_scraping,
                                                               settings):
    settings.TELEMETRY_STEP_SECONDS = STEP
    registry = CollectorRegistry()  # only the DCGM gauge, none of the process collectors
    busy = Gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", ["Hostname", "gpu"],
                 registry=registry)
    for host in lab.hosts:
        for index in range(host.gpus):
            busy.labels(host.name, str(index)).set(70 if host.name == "lab-0" else 0)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        url = prometheus_scraping(port)
        wait_for(lambda: query(url, "count(DCGM_FI_DEV_GPU_UTIL)")
                 and int(query(url, "count(DCGM_FI_DEV_GPU_UTIL)")[0]["value"][1]) == 8,
                 timeout=60, what="the 8 GPUs scraped")
        start = datetime.fromtimestamp(grid_floor(time.time(), STEP), UTC)
        lab.cluster.telemetry = "prometheus"
        lab.cluster.backend_config = {**lab.cluster.backend_config, "prometheus_url": url}
        lab.cluster.save()
        TelemetryCursor.objects.create(cluster=lab.cluster, until=start)
        workload = make_workload(lab, lab.a1, gpus=2, submitted=start)
        run = Run.objects.create(workload=workload, number=1, allocated=True, gpus=2,
                                 started=start, protected_until=start + timedelta(hours=1),
                                 accounted_until=start)
        RunGPU.objects.bulk_create([RunGPU(run=run, host=lab.hosts[0], index=i) for i in (0, 1)])
        time.sleep(3 * STEP + 1)  # three whole steps of samples, and a scrape after them

        collect(lab.cluster, datetime.now(UTC))
    finally:
        server.shutdown()
        thread.join()

    rows = UtilizationRollup.objects.filter(run=run)
    measured = sum(r.gpu_seconds for r in rows)
    assert measured >= 2 * 3 * STEP
    assert sum(r.busy_gpu_seconds for r in rows) / measured == pytest.approx(0.7)
