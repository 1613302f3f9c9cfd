"""Waiting without fixed sleeps: poll until a condition holds, fail only after a deadline."""

import time


def wait_for(predicate, timeout=90.0, what="condition"):
    """Poll until ``predicate()`` is truthy; fail only after a generous deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)
