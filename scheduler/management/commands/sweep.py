"""A simulator sweep on the Celery workers: the simulator's own options (``python -m
scheduler.engine.simulate --help``; ``--sweep`` is implied and ``--workers`` unused), one task
per point of the grid, and a chord that gathers the table (``scheduler.tasks``). As many points
run at once as the running workers have processes: the embedded worker of ``make run`` on the
filesystem broker, or the Redis-backed pool in production (whose workers must read the trace
at the same path). Writes ``sweep.csv`` and ``sweep.json`` into ``--out``, like
``simulate --sweep``, whose local process pool gives the same table.

    manage.py sweep --cluster 4x8 --sweep-window 1d,7d --sweep-hysteresis 0,0.1 --out var/sweep
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from scheduler import tasks
from scheduler.engine import simulate
from scheduler.engine.sweep import grid, write_table
from scheduler.engine.traces import TraceError

POLL_SECONDS = 0.5


class Command(BaseCommand):
    help = ("Run a simulator sweep (the simulator's options) on the Celery workers, one task "
            "per point, and write its table.")

    def add_arguments(self, parser):
        simulate.add_arguments(parser)

    def handle(self, *args, **options):
        a = simulate.build_parser().parse_args([])
        for name in vars(a):
            setattr(a, name, options[name])
        points = grid(a)
        try:  # bad input stops here, in one line, before anything is queued
            for point in points:
                simulate.config_from_args(point)
            simulate.load_inputs(a, simulate.config_from_args(a)[1])
        except (TraceError, OSError) as error:
            raise CommandError(str(error)) from None
        result = tasks.start_sweep(a)
        self.stdout.write(f"queued {len(points)} points for the Celery workers")
        told = -1
        while not result.ready():
            done = result.parent.completed_count()
            if done != told:
                self.stdout.write(f"{done}/{len(points)} points done")
                told = done
            time.sleep(POLL_SECONDS)
        try:
            table = result.get()
        except Exception as error:  # a point failed on a worker: its error, in one line
            raise CommandError(f"sweep failed: {type(error).__name__}: {error}") from None
        result.forget()  # the table's and the points' (its parent): they were for us only
        self.stdout.write(write_table(table, a.out))
