"""A real Prometheus (Debian's ``prometheus``), started by PID on 127.0.0.1 for one test.

``prometheus_history(samples)``: a server over an exact, backfilled history. ``samples`` are
``(metric, host, gpu, epoch seconds, value)``; they become OpenMetrics with explicit
timestamps, ``promtool tsdb create-blocks-from openmetrics`` turns them into blocks, and the
server starts on them. ``prometheus_scraping(port)``: a server scraping an exporter on
``127.0.0.1:port`` every second. Both return the server's URL and stop it by PID afterwards.
Without the ``prometheus`` binary the tests are skipped (``.ci/run`` installs it).
"""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from polling import wait_for

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
# CI (TIMESHARE_REQUIRE_PROMETHEUS=1) fails instead of skipping when it is missing.
needs_prometheus = pytest.mark.skipif(
    not (PROMETHEUS and PROMTOOL) and os.environ.get("TIMESHARE_REQUIRE_PROMETHEUS") != "1",
    reason="Debian's prometheus is not installed",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def start_prometheus(tmp_path):
    started: list[subprocess.Popen] = []

    def start(config: str, storage) -> str:
        port = free_port()
        config_file = tmp_path / f"prometheus-{port}.yml"
        config_file.write_text(config)
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config_file}", f"--storage.tsdb.path={storage}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / f"prometheus-{port}.log").open("w"),
        )
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: process.poll() is not None or _ready(url), timeout=30,
                 what="Prometheus ready")
        assert process.poll() is None, (tmp_path / f"prometheus-{port}.log").read_text()
        return url

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def prometheus_history(tmp_path, start_prometheus):
    def serve(samples) -> str:
        families: dict[str, list[str]] = {}
        for metric, host, gpu, t, value in sorted(samples, key=lambda s: (s[0], s[1], s[2], s[3])):
            families.setdefault(metric, []).append(
                f'{metric}{{Hostname="{host}",gpu="{gpu}"}} {value} {t:.3f}'
            )
        lines = []
        for metric, rows in families.items():
            lines += [f"# TYPE {metric} gauge", *rows]
        source = tmp_path / "history.om"
        source.write_text("\n".join(lines) + "\n# EOF\n")
        storage = tmp_path / "tsdb"
        subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source),
                        str(storage)], check=True, capture_output=True)
        return start_prometheus("global: {}\n", storage)

    return serve


@pytest.fixture
def prometheus_scraping(tmp_path, start_prometheus):
    def serve(exporter_port: int) -> str:
        config = (
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: dcgm\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{exporter_port}']\n"
        )
        return start_prometheus(config, tmp_path / "live-tsdb")

    return serve


def query(url: str, promql: str):
    params = urllib.parse.urlencode({"query": promql, "time": f"{time.time():.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=5) as response:
        return json.load(response)["data"]["result"]
