"""Review cycles: per organisation, at a set moment (quarterly, say), the managers of every
node confirm or change the allocation of each of its children, by a deadline. Allocations
still unconfirmed then are flagged to the managers one level up. A Celery beat task
(``budgets.run_review_cycles``) opens cycles, reminds the deciders before the deadline, and
closes cycles at it; views and the API call the rest."""

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from budgets import services
from budgets.models import Allocation, BudgetNode, ReviewCycle, ReviewItem
from budgets.paths import PATH_SEPARATOR
from budgets.permissions import can_edit_shares, can_schedule_reviews
from budgets.signals import review_due, review_overdue
from common.errors import ConflictError

REMINDER_BEFORE = timedelta(days=3)  # the deciders with items pending are reminded then


class AlreadyReviewed(services.BudgetError, ConflictError):
    """The item was confirmed or changed by someone else first."""


def add_months(moment: datetime, months: int) -> datetime:
    """The same day and time ``months`` later (the month's last day if it is shorter)."""
    month = moment.month - 1 + months
    year, month = moment.year + month // 12, month % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def schedule_cycle(user, organisation, *, name, opens_at, due_at, repeat_months=None,
                   now=None) -> ReviewCycle:
    """The organisation's managers schedule a cycle; one whose opening has come opens now."""
    if not can_schedule_reviews(user, organisation):
        raise PermissionDenied(
            f"Only the managers of {organisation.path} schedule its budget reviews."
        )
    now = now or timezone.now()
    name = name.strip()
    if not name:
        raise services.BudgetError("Give the cycle a name, such as 2027 Q1.", field="name")
    if due_at <= now:
        raise services.BudgetError("The deadline is in the past: give a future moment.",
                                   field="due_at")
    if due_at <= opens_at:
        raise services.BudgetError(
            f"The deadline must come after the opening ({opens_at:%Y-%m-%d %H:%M} UTC).",
            field="due_at",
        )
    if repeat_months is not None and not 1 <= repeat_months <= 24:
        raise services.BudgetError("Repeat every 1 to 24 months, or leave it empty.",
                                   field="repeat_months")
    try:
        with transaction.atomic():
            cycle = ReviewCycle.objects.create(
                organisation=organisation, name=name, opens_at=opens_at, due_at=due_at,
                repeat_months=repeat_months, created_by=user,
            )
    except IntegrityError:
        raise services.BudgetError(
            f"{organisation.path} already has a review cycle named {name!r}.", field="name"
        ) from None
    if opens_at <= now:
        open_cycle(cycle)
    return cycle


def open_cycle(cycle: ReviewCycle) -> int:
    """The cycle opens (once): one item per allocation below the root, at its shares now,
    and the deciders are told a review is due. Returns the number of items."""
    with transaction.atomic():
        if not ReviewCycle.objects.filter(
            pk=cycle.pk, state=ReviewCycle.State.SCHEDULED
        ).update(state=ReviewCycle.State.OPEN):
            return 0
        cycle.state = ReviewCycle.State.OPEN
        allocations = Allocation.objects.filter(
            node__path__startswith=cycle.organisation.path + PATH_SEPARATOR
        ).order_by("node__path", "cluster__name")
        items = ReviewItem.objects.bulk_create(
            ReviewItem(cycle=cycle, node_id=a.node_id, cluster_id=a.cluster_id, shares=a.shares)
            for a in allocations
        )
        item_ids = list(cycle.items.values_list("pk", flat=True))
        if item_ids:
            review_due.send(sender=ReviewCycle, cycle=cycle, item_ids=item_ids)
        return len(items)


def remind(cycle: ReviewCycle, now) -> int:
    """Before the deadline, once: the deciders with items still pending are reminded."""
    with transaction.atomic():
        if not ReviewCycle.objects.filter(pk=cycle.pk, reminded_at=None).update(
            reminded_at=now
        ):
            return 0
        item_ids = list(cycle.items.filter(
            decision=ReviewItem.Decision.PENDING
        ).values_list("pk", flat=True))
        if item_ids:
            review_due.send(sender=ReviewCycle, cycle=cycle, item_ids=item_ids)
        return len(item_ids)


def close_cycle(cycle: ReviewCycle, now) -> int:
    """At the deadline, once: the items still pending are flagged (the managers one level
    above their deciders are told), and a repeating cycle schedules its next round.
    Returns the number flagged."""
    with transaction.atomic():
        if not ReviewCycle.objects.filter(
            pk=cycle.pk, state=ReviewCycle.State.OPEN
        ).update(state=ReviewCycle.State.CLOSED):
            return 0
        cycle.state = ReviewCycle.State.CLOSED
        pending = cycle.items.filter(decision=ReviewItem.Decision.PENDING)
        item_ids = list(pending.values_list("pk", flat=True))
        pending.update(flagged_at=now)
        if item_ids:
            review_overdue.send(sender=ReviewCycle, cycle=cycle, item_ids=item_ids)
        if cycle.repeat_months:
            _schedule_next(cycle)
        return len(item_ids)


def _schedule_next(cycle: ReviewCycle) -> None:
    opens_at = add_months(cycle.opens_at, cycle.repeat_months)
    ReviewCycle.objects.get_or_create(
        organisation=cycle.organisation, name=f"{opens_at:%Y-%m-%d}",
        defaults={
            "opens_at": opens_at, "due_at": opens_at + (cycle.due_at - cycle.opens_at),
            "repeat_months": cycle.repeat_months, "created_by": cycle.created_by,
        },
    )


def run_due_cycles(now=None) -> int:
    """The beat's work: open what is due, remind before deadlines, close what is past them."""
    now = now or timezone.now()
    done = 0
    for cycle in ReviewCycle.objects.filter(
        state=ReviewCycle.State.SCHEDULED, opens_at__lte=now
    ).select_related("organisation"):
        done += bool(open_cycle(cycle))
    for cycle in ReviewCycle.objects.filter(
        state=ReviewCycle.State.OPEN, reminded_at=None, due_at__gt=now,
        due_at__lte=now + REMINDER_BEFORE,
    ):
        done += bool(remind(cycle, now))
    for cycle in ReviewCycle.objects.filter(
        state=ReviewCycle.State.OPEN, due_at__lte=now
    ).select_related("organisation"):
        close_cycle(cycle, now)
        done += 1
    return done


def _decidable(user, item: ReviewItem) -> None:
    if item.cycle.state == ReviewCycle.State.SCHEDULED:
        raise services.BudgetError(f"The review {item.cycle.name} has not opened yet.")
    if not can_edit_shares(user, item.node):
        raise PermissionDenied(
            f"Only the managers above {item.node.path} confirm or change its allocation."
        )


def _claim(user, item: ReviewItem, decision, *, new_shares=None, comment="") -> None:
    """The first decision counts: a conditional update, so a second decider gets a conflict."""
    now = timezone.now()
    if not ReviewItem.objects.filter(
        pk=item.pk, decision=ReviewItem.Decision.PENDING
    ).update(decision=decision, new_shares=new_shares, comment=comment, decided_by=user,
             decided_by_name=user.get_username(), decided_at=now):
        item.refresh_from_db()
        raise AlreadyReviewed(already_reviewed(item))
    item.refresh_from_db()


def already_reviewed(item: ReviewItem) -> str:
    return (f"{item.node.path} on {item.cluster.name} was already {item.decision} by "
            f"{item.decided_by_name} at {item.decided_at:%Y-%m-%d %H:%M} UTC: their decision "
            "stands.")


def confirm(user, item: ReviewItem, *, comment="") -> ReviewItem:
    """The allocation stays as it is for another cycle."""
    _decidable(user, item)
    with transaction.atomic():
        _claim(user, item, ReviewItem.Decision.CONFIRMED, comment=comment.strip())
    return item


def change(user, item: ReviewItem, shares, *, comment="") -> ReviewItem:
    """The allocation gets other shares, at once and through the audit log."""
    _decidable(user, item)
    shares = services.validate_shares(shares)
    comment = comment.strip()
    with transaction.atomic():
        _claim(user, item, ReviewItem.Decision.CHANGED, new_shares=shares, comment=comment)
        services.set_shares(
            user, item.node, item.cluster, shares,
            reason=f"review {item.cycle.name}" + (f": {comment}" if comment else ""),
        )
    return item


@dataclass
class Progress:
    """How far a set of review items has come."""

    total: int = 0
    confirmed: int = 0
    changed: int = 0
    flagged: int = 0

    @property
    def decided(self) -> int:
        return self.confirmed + self.changed

    @property
    def pending(self) -> int:
        return self.total - self.decided

    @property
    def percent(self) -> float:
        return 100.0 * self.decided / self.total if self.total else 100.0

    def add(self, item: ReviewItem) -> None:
        self.total += 1
        self.confirmed += item.decision == ReviewItem.Decision.CONFIRMED
        self.changed += item.decision == ReviewItem.Decision.CHANGED
        self.flagged += item.flagged_at is not None and (
            item.decision == ReviewItem.Decision.PENDING
        )


@dataclass
class DecidingGroup:
    """The items one node's managers decide: the allocations of its children."""

    parent: object  # BudgetNode
    items: list
    progress: Progress


def progress_by_decider(items) -> tuple[Progress, list[DecidingGroup]]:
    """The cycle's progress overall and per deciding node (the items' parents), tree order."""
    overall = Progress()
    groups: dict[int, DecidingGroup] = {}
    for item in items:
        overall.add(item)
        group = groups.get(item.node.parent_id)
        if group is None:
            group = groups[item.node.parent_id] = DecidingGroup(item.node.parent, [], Progress())
        group.items.append(item)
        group.progress.add(item)
    return overall, sorted(groups.values(), key=lambda g: g.parent.path)


def name_deciders(groups: list[DecidingGroup], organisation) -> None:
    """Set ``group.deciders``: the managers of each group's node, or of its nearest ancestor
    that has some, from one read of the organisation's managers."""
    managers = {
        node.path: list(node.managers.all())
        for node in BudgetNode.objects.subtree(organisation.path).prefetch_related("managers")
    }
    for group in groups:
        path = group.parent.path
        while not managers.get(path) and PATH_SEPARATOR in path:
            path = path.rpartition(PATH_SEPARATOR)[0]
        group.deciders = managers.get(path, [])
