import time
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from portal import demo
from scheduler.replay import TRACE


class Command(BaseCommand):
    help = ("Create the demo institute (users, clusters, budget tree) and give its clusters "
            "--history-days of past (runs, events, rollups, samples, host repairs, change "
            "requests) replayed from the Philly trace; safe to run again: what exists is kept, "
            "and a cluster that has a past already gets none.")

    def add_arguments(self, parser):
        parser.add_argument("--history-days", type=float, default=7.0,
                            help="days of past for fresh demo clusters (0: none; default 7)")
        parser.add_argument("--seed", type=int, default=0,
                            help="seed of the history's replay rule (as demo_load's --seed)")

    def handle(self, *args, history_days, seed, **options):
        now = timezone.now()
        since = now - timedelta(days=history_days) if history_days > 0 else None
        if since is not None and not TRACE.exists():
            self.stderr.write(f"{TRACE} not found: no history for the demo clusters")
            since = None
        people = demo.seed(since=since, now=now)
        if since is not None:
            began = time.monotonic()
            written = demo.seed_history(since, now, seed=seed)
            for cluster, counts in written.items():
                self.stdout.write(f"{cluster}: {history_days:g} days of history, " + ", ".join(
                    f"{n} {what}" for what, n in counts.items()))
            if written:
                self.stdout.write(f"history written in {time.monotonic() - began:.1f} s")
        self.stdout.write(self.style.SUCCESS("Demo organisation ready. Logins (password "
                                             f"'{demo.DEMO_PASSWORD}'):"))
        for username, description in people.items():
            self.stdout.write(f"  {username:<15} {description}")
