"""What the scheduler tells the layers above it without knowing them.

``workload_events_recorded`` is sent once the transaction that wrote workload events (a
tick, a cancel, a member's departure) has committed, with ``event_ids`` and ``actor`` (the
user who acted, or None for the loop). Notifications listen; being sent after the commit
(and robustly), nothing a receiver does can hold up or undo a tick or a form.

``run_idle`` is sent once the collection's transaction commits, for each run the idle rule
has just flagged (``scheduler.utilization``): keyword arguments ``run_id``, ``workload_id``,
``owner_id``, ``idle_since`` and ``reason``."""

from functools import partial

from django.db import transaction
from django.dispatch import Signal

workload_events_recorded = Signal()
run_idle = Signal()


def announce_events(events, actor=None) -> None:
    """Send ``workload_events_recorded`` for these saved events after the commit."""
    ids = [event.pk for event in events if event.pk is not None]
    if ids:
        transaction.on_commit(
            partial(workload_events_recorded.send_robust, sender=None, event_ids=ids,
                    actor=actor),
            robust=True,
        )
