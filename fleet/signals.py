"""What the fleet tells the layers above it without knowing them.

``host_changed`` is sent, inside the action's transaction, when an operator drained,
returned or repaired a host of ``cluster_id``. The scheduler listens and asks for a
scheduling pass once the transaction commits, so work leaves a draining host (or lands on a
returned one) without waiting for the next periodic tick.

``host_escalated`` is sent after the commit when repeated failed repairs hand a host to a
human (keyword arguments: ``host``, ``reason``); the operators are notified."""

from django.dispatch import Signal

host_changed = Signal()  # keyword argument: cluster_id
host_escalated = Signal()  # keyword arguments: host, reason
