#!/usr/bin/env python3
"""Run a few long-lived processes together, as `make run` does, and keep them alive.

    scripts/supervise.py "web=python manage.py runserver" "worker=celery -A portal worker"

Each NAME=COMMAND runs in a process group of its own, its output prefixed with its name. A
process that exits is logged and started again after a pause that doubles with every quick
failure (1 s, 2 s, 4 s... at most --max-backoff) and starts over once it has run for a minute.
SIGINT (Ctrl-C) or SIGTERM stops everything: SIGTERM to each process, then SIGKILL to its whole
group (what it forked included) once it has exited or --grace seconds have passed (a Celery
worker busy with a task can take a minute to heed SIGTERM). Standard library only: it must run
before anything is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

STABLE_AFTER = 60.0  # seconds of running after which a crash is not a quick failure


def log(message: str) -> None:
    print(f"supervise | {message}", flush=True)


@dataclass
class Child:
    name: str
    argv: list[str]
    backoff: float
    process: subprocess.Popen | None = None
    started: float = 0.0
    restart_at: float | None = None  # when to start it again after it exited

    def start(self) -> bool:
        """Start it; False (and logged) when it cannot even be started."""
        self.started, self.restart_at = time.monotonic(), None
        try:
            self.process = subprocess.Popen(
                self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: signals reach its children
            )
        except OSError as error:
            self.process = None
            log(f"{self.name} cannot start: {error}")
            return False
        threading.Thread(target=self._relay, args=(self.process,), daemon=True).start()
        log(f"{self.name} started (pid {self.process.pid}): {shlex.join(self.argv)}")
        return True

    def _relay(self, process: subprocess.Popen) -> None:
        """Copy the child's output to ours, each line prefixed with its name."""
        for line in iter(process.stdout.readline, b""):
            sys.stdout.write(f"{self.name:<9}| {line.decode(errors='replace')}")
            sys.stdout.flush()

    def signal_group(self, signum: int) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
                os.killpg(self.process.pid, signum)


class Supervisor:
    def __init__(self, children: list[Child], min_backoff: float, max_backoff: float,
                 grace: float):
        self.children, self.grace = children, grace
        self.min_backoff, self.max_backoff = min_backoff, max_backoff
        self.stopping = threading.Event()

    def request_stop(self, signum, _frame) -> None:
        if not self.stopping.is_set():
            log(f"{signal.Signals(signum).name}: stopping everything")
        self.stopping.set()

    def watch(self) -> None:
        """Restart what exits until asked to stop."""
        for child in self.children:
            if not child.start():
                self.restart_later(child, "could not start")
        while not self.stopping.wait(0.1):
            for child in self.children:
                if child.restart_at is not None:
                    if time.monotonic() >= child.restart_at and not child.start():
                        self.restart_later(child, "could not start")
                    continue
                code = child.process.poll()
                if code is not None:
                    self.restart_later(child, f"exited with code {code}")

    def restart_later(self, child: Child, what: str) -> None:
        now = time.monotonic()
        ran = now - child.started
        if ran >= STABLE_AFTER:
            child.backoff = self.min_backoff
        pause = child.backoff
        child.backoff = min(child.backoff * 2, self.max_backoff)
        child.restart_at = now + pause
        log(f"{child.name} {what} after {ran:.1f} s; restarting in {pause:g} s")

    def stop(self) -> None:
        """SIGTERM to every process, then SIGKILL to every group: leftovers, and processes
        still alive after the grace."""
        running = [c for c in self.children if c.process is not None and c.restart_at is None]
        for child in running:
            # the leader only: a Celery worker stops its own pool (SIGTERM to its pool processes
            # too makes it replace them instead of shutting down)
            child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        for child in running:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{child.name} ignored SIGTERM for {self.grace:g} s: SIGKILL")
        for child in self.children:
            # also the group's leftovers (a worker's pool processes) once its leader is gone
            child.signal_group(signal.SIGKILL)
            if child.process is not None:
                child.process.wait()
        log("everything stopped")


def parse_child(spec: str, backoff: float) -> Child:
    name, sep, command = spec.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=COMMAND, got {spec!r}")
    return Child(name.strip(), shlex.split(command), backoff)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("processes", nargs="+", metavar="NAME=COMMAND")
    parser.add_argument("--grace", type=float, default=5.0,
                        help="seconds between SIGTERM and SIGKILL when stopping (default 5)")
    parser.add_argument("--min-backoff", type=float, default=1.0,
                        help="first pause before a restart, in seconds (default 1)")
    parser.add_argument("--max-backoff", type=float, default=30.0,
                        help="longest pause before a restart, in seconds (default 30)")
    args = parser.parse_args(argv)
    try:
        children = [parse_child(spec, args.min_backoff) for spec in args.processes]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    supervisor = Supervisor(children, args.min_backoff, args.max_backoff, args.grace)
    signal.signal(signal.SIGINT, supervisor.request_stop)
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    try:
        supervisor.watch()
    finally:
        supervisor.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
