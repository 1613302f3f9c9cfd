"""scripts/supervise.py, what `make run` runs under, with real processes: a crashed process is
logged and started again with a growing pause; SIGINT or SIGTERM stops everything within 10 s,
a process that ignores SIGTERM and the children a process forked included."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from polling import wait_for

SUPERVISE = Path(__file__).resolve().parents[1] / "scripts" / "supervise.py"
PYTHON = sys.executable


def python(code: str) -> str:
    """A NAME=COMMAND value running ``code`` in a fresh interpreter."""
    return f'{PYTHON} -c "{code}"'


class Supervised:
    """The supervisor as a real process, its output collected line by line."""

    def __init__(self, *processes: str, grace: float = 2.0):
        self.process = subprocess.Popen(
            [PYTHON, str(SUPERVISE), "--grace", str(grace), "--min-backoff", "0.2",
             "--max-backoff", "0.8", *processes],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def said(self, pattern: str) -> list[str]:
        return [line for line in self.lines if re.search(pattern, line)]

    def stop(self, signum=signal.SIGTERM) -> float:
        """Send ``signum``; how long the supervisor took to exit."""
        began = time.monotonic()
        self.process.send_signal(signum)
        self.process.wait(timeout=30)
        return time.monotonic() - began


@pytest.fixture
def supervised():
    started = []

    def start(*processes, **options):
        started.append(Supervised(*processes, **options))
        return started[-1]

    yield start
    for each in started:
        if each.process.poll() is None:
            each.process.kill()
            each.process.wait()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is not alive
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[-1][0] != "Z"


def test_a_crashed_process_is_logged_and_started_again_with_a_growing_pause(supervised):
    run = supervised("crashy=" + python("print('up', flush=True); raise SystemExit(3)"))
    wait_for(lambda: len(run.said(r"^crashy\s*\| up$")) >= 4, timeout=30,
             what="four starts of the crashing process")
    exits = run.said(r"crashy exited with code 3 after [\d.]+ s; restarting in")
    pauses = [float(re.search(r"restarting in ([\d.]+) s", line)[1]) for line in exits]
    assert pauses[:3] == [0.2, 0.4, 0.8]  # doubles, up to the maximum
    run.stop()


def test_a_process_that_keeps_running_is_left_alone(supervised):
    run = supervised("steady=" + python("import time; print('up', flush=True); time.sleep(60)"))
    wait_for(lambda: run.said(r"^steady\s*\| up$"), timeout=30, what="the process")
    time.sleep(1.0)
    assert len(run.said(r"^steady\s*\| up$")) == 1
    assert not run.said("restarting")
    run.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_every_process_and_what_they_forked(supervised, signum):
    forks = ("import subprocess, sys, time; "
             "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
             "print('child', child.pid, flush=True); time.sleep(60)")
    run = supervised("web=" + python("import time; print('up', flush=True); time.sleep(60)"),
                     "worker=" + python(forks))
    line = wait_for(lambda: run.said(r"^worker\s*\| child \d+$"), timeout=30,
                    what="the worker's child")[0]
    grandchild = int(line.split()[-1])
    pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", "\n".join(run.lines))]
    assert len(pids) == 2 and all(alive(pid) for pid in [*pids, grandchild])
    assert run.stop(signum) < 10
    assert run.process.returncode == 0
    assert not any(alive(pid) for pid in [*pids, grandchild])
    assert run.said("everything stopped")


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(supervised):
    stubborn = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('up', flush=True); time.sleep(120)")
    run = supervised("celery=" + python(stubborn), grace=2.0)
    wait_for(lambda: run.said(r"^celery\s*\| up$"), timeout=30, what="the process")
    pid = int(re.search(r"\(pid (\d+)\)", run.said("celery started")[0])[1])
    took = run.stop()
    assert 2.0 <= took < 10
    assert run.said("celery ignored SIGTERM for 2 s: SIGKILL")
    assert not alive(pid)


def test_a_command_that_cannot_start_is_retried_not_fatal(supervised):
    run = supervised("missing=/nonexistent/timeshare-command",
                     "steady=" + python("import time; print('up', flush=True); time.sleep(60)"))
    wait_for(lambda: len(run.said("missing cannot start")) >= 2, timeout=30,
             what="two attempts")
    assert run.said("missing could not start after [\\d.]+ s; restarting in 0.2 s")
    assert run.process.poll() is None and len(run.said(r"^steady\s*\| up$")) == 1
    run.stop()


def test_a_malformed_process_is_refused_with_a_clear_error():
    done = subprocess.run([PYTHON, str(SUPERVISE), "no-equals-sign"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2
    assert "expected NAME=COMMAND, got 'no-equals-sign'" in done.stderr
