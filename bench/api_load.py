"""Benchmark (not a test): 50 concurrent API clients submitting workloads to the portal
running under gunicorn on PostgreSQL, over loopback, while a Celery worker with its beat ticks
the cluster (every submission asks for a tick too, as in production). Every submission must be
accepted exactly once and none lost; prints the throughput and latencies.

    .venv/bin/python bench/api_load.py [--clients 50] [--each 20] [--workers 4] [--threads 8]
        [--max-seconds 300] [--no-ticking] [--no-keys]

The broker is Redis from CELERY_BROKER_URL when it is one (purged first), else the filesystem
broker in a temporary directory; the shared cache is Redis from CACHE_URL, else files there.

The database is PostgreSQL from DATABASE_URL when it is one, else
postgres://postgres@127.0.0.1:5432/postgres; the benchmark builds its state in a throwaway
database (``test_<name>``) and drops it afterwards. The state: one cluster of 16 hosts x 8
GPUs, a budget tree org/prog/proj-<k>, one user per client (a member of a leaf) with an API
token. Each client keeps one HTTP connection and POSTs /api/workloads/ `each` times with
names unique to it, each with its own Idempotency-Key as the CLI sends (``--no-keys``: none),
after one GET that warms a gunicorn worker up; a refused or failed request is counted, never
retried. Then the database is read back:
every accepted workload exists exactly once, every name the clients were told was accepted is
there, nothing else was written, and the worker started runs meanwhile.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
    os.environ["DATABASE_URL"] = DEFAULT_URL
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402

from budgets.models import Allocation, BudgetNode  # noqa: E402
from fleet.models import Cluster, Host  # noqa: E402
from portal.models import ApiToken  # noqa: E402
from scheduler.models import Event, Run, Workload  # noqa: E402

HOSTS, GPUS_PER_HOST, PROJECTS = 16, 8, 5


def build(clients: int) -> list[tuple[str, str, str]]:
    """The cluster, the tree and one user per client: [(username, token, budget path)]."""
    cluster = Cluster.objects.create(name="bench", gpu_type="H100")
    Host.objects.bulk_create(
        Host(cluster=cluster, name=f"gpu-{i:02d}", gpus=GPUS_PER_HOST) for i in range(HOSTS)
    )
    root = BudgetNode.objects.create(slug="org", name="org", kind="organisation")
    program = BudgetNode.objects.create(parent=root, slug="prog", name="prog", kind="program")
    Allocation.objects.create(node=program, cluster=cluster, shares=100)
    leaves = []
    for k in range(PROJECTS):
        leaf = BudgetNode.objects.create(parent=program, slug=f"proj-{k}", name=f"proj-{k}",
                                         kind="project")
        Allocation.objects.create(node=leaf, cluster=cluster, shares=10 + k)
        leaves.append(leaf)
    out = []
    for i in range(clients):
        user = User.objects.create_user(f"client-{i:02d}")
        leaf = leaves[i % PROJECTS]
        leaf.members.add(user)
        out.append((user.username, ApiToken.objects.create_token(user, "bench")[1], leaf.path))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(database_url: str, var_dir: str, ticking: bool) -> dict[str, str]:
    """What the portal and the worker share: the database, the broker, the var/ directory."""
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not ticking:
        broker = "memory://"  # ticks asked for by submit go nowhere
    elif not broker.startswith("redis"):
        broker = "filesystem://"  # portal.settings puts its folders under TIMESHARE_VAR_DIR
    env = {**os.environ, "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker,
           "TIMESHARE_VAR_DIR": var_dir, "SECURE_COOKIES": "0",
           "DJANGO_SETTINGS_MODULE": "portal.settings"}
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    return env


def start_worker(env: dict[str, str], var_dir: str):
    """A Celery worker with its embedded beat, as `make run` starts it: it ticks the cluster
    every TIMESHARE_TICK_SECONDS and whenever a submission asks."""
    celery = str(Path(sys.executable).parent / "celery")
    if env["CELERY_BROKER_URL"].startswith("redis"):
        subprocess.run([celery, "-A", "portal", "purge", "-f"], cwd=ROOT, env=env, check=True,
                       capture_output=True)
    log = open(Path(var_dir) / "worker.log", "w")  # noqa: SIM115 - the process keeps it
    return subprocess.Popen(
        [celery, "-A", "portal", "worker", "--beat", "--loglevel=WARNING", "--concurrency=2",
         "--schedule", str(Path(var_dir) / "beat-schedule")],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


def start_gunicorn(env: dict[str, str], port: int, workers: int, threads: int):
    command = [
        str(Path(sys.executable).parent / "gunicorn"), "portal.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--worker-class", "gthread",
        "--threads", str(threads), "--timeout", "120", "--log-level", "warning",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with {process.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/")
            if conn.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.2)
    stop(process)
    raise SystemExit("gunicorn did not answer within 60 s")


def stop(process) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def cpu_seconds(gunicorn, worker, database: str) -> dict[str, float]:
    """CPU time (user + system) spent so far by the portal's processes, the worker's and the
    PostgreSQL backends serving the benchmark's database: a figure other load on the machine
    does not change, unlike the rate. Linux only (/proc), like the benchmark's server."""
    ticks = os.sysconf("SC_CLK_TCK")

    def of_group(group: int) -> float:
        spent = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:  # the process ended meanwhile
                continue
            if int(fields[2]) == group:  # fields[0] is the state: pgrp is the 5th of stat
                spent += int(fields[11]) + int(fields[12])
        return spent / ticks

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> "
                       "pg_backend_pid()", [database])
        backends = [pid for (pid,) in cursor.fetchall()]
    postgres = 0.0
    for pid in backends:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # PostgreSQL on another machine, or the backend ended
            continue
        postgres += (int(fields[11]) + int(fields[12])) / ticks
    spent = {"portal": of_group(gunicorn.pid), "PostgreSQL": postgres}
    if worker is not None:
        spent["worker"] = of_group(worker.pid)
    return spent


class Client(threading.Thread):
    def __init__(self, port, username, token, budget, each, start, deadline, keys):
        super().__init__(daemon=True)
        self.port, self.username, self.token, self.budget = port, username, token, budget
        self.each, self.start_event, self.deadline, self.keys = each, start, deadline, keys
        self.accepted: list[tuple[str, int]] = []  # (name, id)
        self.refused: list[tuple[str, int, str]] = []
        self.failed: list[tuple[str, str]] = []
        self.latencies: list[float] = []
        self.warm = threading.Event()

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                   "Accept": "application/json"}
        # Warm the gunicorn workers up (each imports the API on its first request): the
        # figures are the steady state's. A fresh connection then, as gunicorn closes idle ones.
        conn.request("GET", "/api/clusters/", headers=headers)
        conn.getresponse().read()
        conn.close()
        self.warm.set()
        self.start_event.wait()
        for i in range(self.each):
            if time.monotonic() > self.deadline:
                break
            name = f"{self.username}-job-{i:03d}"
            body = json.dumps({
                "name": name, "budget": self.budget, "cluster": "bench", "gpus": 1 + i % 4,
                "min_runtime": 600 * (i % 3), "resumable": True, "command": "python train.py",
                "expected_duration": 3600,
            })
            sent = {**headers, "Idempotency-Key": name} if self.keys else headers
            began = time.perf_counter()
            try:
                conn.request("POST", "/api/workloads/", body=body, headers=sent)
                response = conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException) as error:
                self.failed.append((name, repr(error)))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                continue
            self.latencies.append(time.perf_counter() - began)
            if response.status == 201:
                self.accepted.append((name, json.loads(payload)["id"]))
            else:
                self.refused.append((name, response.status, payload[:200].decode()))
        conn.close()


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--each", type=int, default=20, help="submissions per client")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per gunicorn worker")
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--no-ticking", dest="ticking", action="store_false",
                        help="no Celery worker: ticks asked for by submissions go nowhere")
    parser.add_argument("--no-keys", dest="keys", action="store_false",
                        help="send no Idempotency-Key")
    args = parser.parse_args()

    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    settings = connection.settings_dict
    database_url = (f"postgres://{settings['USER']}"
                    f"{':' + settings['PASSWORD'] if settings['PASSWORD'] else ''}"
                    f"@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
                    f"/{settings['NAME']}")
    process = worker = None
    try:
        users = build(args.clients)
        connection.close()
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="timeshare-bench-") as var_dir:
            env = environment(database_url, var_dir, args.ticking)
            if args.ticking:
                worker = start_worker(env, var_dir)
            process = start_gunicorn(env, port, args.workers, args.threads)
            start = threading.Event()
            began = time.monotonic()
            clients = [Client(port, u, t, b, args.each, start, began + args.max_seconds,
                              args.keys) for u, t, b in users]
            for client in clients:
                client.start()
            for client in clients:
                client.warm.wait()
            cpu_before = cpu_seconds(process, worker, settings["NAME"])
            began = time.perf_counter()
            start.set()
            for client in clients:
                client.join()
            elapsed = time.perf_counter() - began
            cpu = {part: spent - cpu_before.get(part, 0.0) for part, spent in
                   cpu_seconds(process, worker, settings["NAME"]).items()}
            stop(process)
            if worker is not None:
                stop(worker)
                worker = None
        accepted = [a for c in clients for a in c.accepted]
        refused = [r for c in clients for r in c.refused]
        failed = [f for c in clients for f in c.failed]
        latencies = [x for c in clients for x in c.latencies]
        # Read back: exactly once, none lost, nothing extra.
        rows = dict(Workload.objects.values_list("name").annotate(n=Count("id")))
        duplicates = {name: n for name, n in rows.items() if n > 1}
        lost = [name for name, _ in accepted if name not in rows]
        extra = set(rows) - {name for name, _ in accepted}
        ids_ok = set(Workload.objects.values_list("pk", flat=True)) == {i for _, i in accepted}
        events = Event.objects.filter(kind=Event.Kind.SUBMITTED).count()
        runs = Run.objects.count()
        attempted = args.clients * args.each
        print(f"api submit: {len(accepted)} of {attempted} submissions accepted from "
              f"{args.clients} concurrent clients in {elapsed:.1f} s: "
              f"{len(accepted) / elapsed:.0f} submissions/s "
              f"(gunicorn {args.workers} workers x {args.threads} threads, PostgreSQL, loopback, "
              f"{'worker ticking' if args.ticking else 'no worker'}, "
              f"{'Idempotency-Key' if args.keys else 'no key'})")
        print(f"latency: p50 {1000 * statistics.median(latencies):.0f} ms, "
              f"p95 {1000 * percentile(latencies, 0.95):.0f} ms, "
              f"max {1000 * max(latencies):.0f} ms")
        print(f"exactly once: {len(rows)} workloads in the database, duplicates "
              f"{len(duplicates)}, lost {len(lost)}, unexpected {len(extra)}, "
              f"submitted events {events}, refused {len(refused)}, failed {len(failed)}")
        if args.ticking:
            print(f"worker: {runs} runs started by its ticks while the clients submitted")
        per_submission = {part: 1000 * spent / max(1, len(accepted)) for part, spent in cpu.items()}
        total = sum(per_submission.values())
        print("CPU per submission: " + ", ".join(
            f"{part} {ms:.1f} ms" for part, ms in per_submission.items()
        ) + f"; {total:.1f} ms in all, so at most {1000 / total:.0f} submissions/s per idle core")
        for name, status, text in refused[:5]:
            print(f"  refused {name}: {status} {text}")
        for name, error in failed[:5]:
            print(f"  failed {name}: {error}")
        good = (len(accepted) == attempted and not duplicates and not lost and not extra
                and ids_ok and events == attempted and (runs > 0 or not args.ticking))
        print("OK: every submission accepted exactly once, none lost" if good
              else "FAILED: see above")
        return 0 if good else 1
    finally:
        for running in (process, worker):
            if running is not None:
                stop(running)
        connection.close()
        connection.creation.destroy_test_db(settings["NAME"], verbosity=0)


if __name__ == "__main__":
    sys.exit(main())
