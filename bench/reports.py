"""Benchmark (not a test): p50/p95 of the dashboard and report pages on a seeded year of a
1,024-GPU cluster (`manage.py seed_history`: 128 hosts x 8 GPUs, 10-minute occupancy samples,
hourly usage and capacity rollups, 100 workloads a day). Target: p95 < 200 ms.

    .venv/bin/python bench/reports.py [--db postgresql sqlite] [--n 20] [--keep]
                                     [--pages "review trends week" ...]

Each database gets a scratch copy that the script migrates, seeds and drops afterwards:
PostgreSQL (the production database) on the server of DATABASE_URL when it is a postgres://
URL, else postgres://postgres@127.0.0.1:5432, as database ``bench_reports_<pid>``; SQLite as a
file under /tmp. ``--keep`` keeps them (named ``bench_reports_keep``) and reuses them on the
next run, seeding only once. Every page (or only those named by ``--pages``) is requested
``--n`` + 1 times as the CEO (who sees every row) through Django's test client; one line per
page: the first request apart, then p50 and p95 of the ``--n`` after it. The shared cache is
emptied after one request has warmed the process up, so each page's first request is cold:
the trends pages compute every period and keep the final ones (``reports.final_periods``;
the seeded occupancy samples run up to now, as the live loop's do, so periods that ended a
week before are final), which the following requests read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432"
CHILD = "TIMESHARE_BENCH_REPORTS_CHILD"


def server_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        return url.rsplit("/", 1)[0]
    return DEFAULT_SERVER


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{server_url()}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def parent(args) -> int:
    name = "bench_reports_keep" if args.keep else f"bench_reports_{os.getpid()}"
    failed = False
    for db in args.db:
        if db == "postgresql":
            url = f"{server_url()}/{name}"
            try:
                if not args.keep:
                    admin(f'DROP DATABASE IF EXISTS "{name}"')
                admin(f'CREATE DATABASE "{name}"')
            except Exception as error:  # already there with --keep, or no server
                if "already exists" not in str(error):
                    print(f"postgresql: cannot create a scratch database: {error}")
                    failed = True
                    continue
        else:
            url = f"sqlite:///{Path(tempfile.gettempdir()) / (name + '.sqlite3')}"
        env = {**os.environ, "DATABASE_URL": url, CHILD: "1"}
        command = [sys.executable, __file__, "--n", str(args.n)]
        if args.pages:
            command += ["--pages", *args.pages]
        try:
            result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
            sys.stdout.write(result.stdout)
            if result.returncode:
                sys.stdout.write(result.stderr[-3000:])
                failed = True
        finally:
            if not args.keep:
                if db == "postgresql":
                    admin(f'DROP DATABASE IF EXISTS "{name}"')
                else:
                    Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    return 1 if failed else 0


def child(args) -> int:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from fleet.models import Cluster

    vendor = connection.vendor
    call_command("migrate", verbosity=0)
    cluster = "big"
    if not Cluster.objects.filter(name=cluster).exists():
        started = time.perf_counter()
        call_command("seed_history", cluster=cluster, stdout=open(os.devnull, "w"))  # noqa: SIM115
        with connection.cursor() as cursor:  # fresh statistics, as autovacuum would gather
            cursor.execute("ANALYZE")
        print(f"{vendor}: seeded a year for a 1,024-GPU cluster in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    ceo = User.objects.get(username="bench-ceo")
    cycle = _review_cycle(ceo)
    client = Client()
    client.force_login(ceo)
    pages = {
        "dashboards": "/reports/dashboards/",
        "cluster day": f"/reports/dashboards/{cluster}/?range=day",
        "cluster week": f"/reports/dashboards/{cluster}/?range=week",
        "cluster month": f"/reports/dashboards/{cluster}/?range=month",
        "cluster week (htmx)": f"/reports/dashboards/{cluster}/?range=week",
        "review week": f"/reports/review/{cluster}/?period=week",
        "review month": f"/reports/review/{cluster}/?period=month",
        "review quarter": f"/reports/review/{cluster}/?period=quarter",
        "review csv month": f"/reports/review/{cluster}/report.csv?period=month",
        "review trends week": f"/reports/review/{cluster}/trends/?period=week",
        "review trends month": f"/reports/review/{cluster}/trends/?period=month",
        "review trends quarter": f"/reports/review/{cluster}/trends/?period=quarter",
        "idle allocations": "/reports/idle/",
        "review cycles": "/budgets/reviews/",
        "review cycle": f"/budgets/reviews/{cycle.pk}/",
    }
    unknown = set(args.pages or ()) - set(pages)
    if unknown:
        print(f"no such page: {', '.join(sorted(unknown))}; pages: {', '.join(pages)}")
        return 1
    timed = {name: url for name, url in pages.items() if not args.pages or name in args.pages}
    # One request warms the process up (imports, templates, the connection); then the cache
    # is emptied, so that each page's first request below is cold: nothing kept by this
    # request nor by an earlier run (--keep reuses the database, and so its stamps).
    client.get(next(iter(timed.values())), HTTP_HOST="localhost")
    cache.clear()
    worst = 0.0
    for name, url in timed.items():
        headers = {"HTTP_HX_REQUEST": "true"} if "htmx" in name else {}
        begin = time.perf_counter()
        client.get(url, HTTP_HOST="localhost", **headers)
        first = 1000 * (time.perf_counter() - begin)
        times = []
        for _ in range(args.n):
            with CaptureQueriesContext(connection) as queries:
                begin = time.perf_counter()
                response = client.get(url, HTTP_HOST="localhost", **headers)
                times.append(1000 * (time.perf_counter() - begin))
            assert response.status_code == 200, (url, response.status_code)
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        worst = max(worst, p95)
        print(f"{vendor:<10} {name:<21} first {first:6.0f} ms, then p50 "
              f"{statistics.median(times):6.0f} ms  p95 {p95:6.0f} ms  {len(queries):3d} queries",
              flush=True)
    verdict = "met" if worst < 200 else "NOT met"
    which = "the pages timed" if args.pages else "every page"
    print(f"{vendor:<10} target p95 < 200 ms on {which}: {verdict} (worst {worst:.0f} ms, "
          f"{args.n} requests per page after the first)")
    return 0


def _review_cycle(ceo):
    """The organisation's budget review under way: every allocation under review, half of
    them decided."""
    from datetime import timedelta

    from django.utils import timezone

    from budgets import reviews
    from budgets.models import BudgetNode, ReviewCycle

    root = BudgetNode.objects.get(parent=None)
    cycle = ReviewCycle.objects.filter(organisation=root).first()
    if cycle is None:
        now = timezone.now()
        cycle = reviews.schedule_cycle(ceo, root, name="bench", opens_at=now,
                                       due_at=now + timedelta(days=14))
        for item in list(cycle.items.select_related("node", "cluster", "cycle"))[::2]:
            reviews.confirm(ceo, item)
    return cycle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", nargs="+", choices=["postgresql", "sqlite"],
                        default=["postgresql", "sqlite"])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--pages", nargs="+", metavar="PAGE",
                        help='only these pages, named as printed (e.g. "review trends week")')
    parser.add_argument("--keep", action="store_true",
                        help="keep the seeded scratch databases and reuse them next time")
    args = parser.parse_args()
    return child(args) if os.environ.get(CHILD) else parent(args)


if __name__ == "__main__":
    sys.exit(main())
