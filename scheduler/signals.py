"""What the scheduler tells the layers and features around it.

``run_idle`` is sent once the collection's transaction commits, for each run the idle rule
has just flagged (``scheduler.utilization``): keyword arguments ``run_id``, ``workload_id``,
``owner_id``, ``idle_since`` and ``reason``. It is the hook for notifying the owner: a
notification system connects a receiver here and nothing else changes."""

from django.dispatch import Signal

run_idle = Signal()
