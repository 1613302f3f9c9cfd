"""What the budget tree tells the layers above it without knowing them.

``member_leaving`` is sent, inside the removal's transaction, when a member leaves a budget
(keyword arguments: ``node``, ``person``, ``by``, ``move_to``: a leaf chosen by the manager or
None, ``reason``). The scheduler cancels or moves the person's pending workloads charged to
the node and returns what it did in words, written to the membership log. A receiver that
refuses (a ``ServiceError``) rolls the removal back.

``allocation_expired`` is sent, inside the expiry's transaction, when an allocation expired
(keyword arguments: ``node``, ``cluster``, ``at``); the scheduler tells the pending allocated
work charged below the node why it can no longer run allocated.

``review_due`` is sent, inside the transaction, when a review cycle opens and again when its
deadline nears (keyword arguments: ``cycle``, ``item_ids``: the items still pending);
``review_overdue`` when the deadline passed (``cycle``, ``item_ids``: the items flagged).
Notifications tell the deciders, and for overdue items the managers one level above them."""

from django.dispatch import Signal

member_leaving = Signal()
allocation_expired = Signal()
review_due = Signal()
review_overdue = Signal()
