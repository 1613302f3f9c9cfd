"""What the layers below announce, turned into notifications: workload events (owners),
request threads (deciders, requesters, participants), escalated hosts (operators), expired
allocations (their managers and the owners of the pending work they covered), review cycles
(the deciders; for overdue items also the managers above them), idle runs (their owners).
Each runs after the commit of what it is about, and a failure here is logged, never
raised."""

from collections import defaultdict

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.urls import reverse

from budgets.models import BudgetNode, RequestEntry, ReviewItem
from budgets.paths import PATH_SEPARATOR
from budgets.signals import allocation_expired, review_due, review_overdue
from fleet.models import Cluster
from fleet.signals import host_escalated
from notifications.kinds import Kind
from notifications.services import after_commit, notify
from scheduler.models import Event, Workload
from scheduler.signals import run_idle, workload_events_recorded

WORKLOAD_KIND = {
    Event.Kind.STARTED: Kind.WORKLOAD_STARTED,
    Event.Kind.REQUEUED: Kind.WORKLOAD_PREEMPTED,
    Event.Kind.PREEMPTED: Kind.WORKLOAD_PREEMPTED,
    Event.Kind.COMPLETED: Kind.WORKLOAD_FINISHED,
    Event.Kind.FAILED: Kind.WORKLOAD_FAILED,
    Event.Kind.CANCELLED: Kind.WORKLOAD_CANCELLED,
}

WORKLOAD_TITLE = {
    Event.Kind.STARTED: "{w} started on {c}",
    Event.Kind.REQUEUED: "{w} was stopped and requeued: it keeps its place in the queue",
    Event.Kind.PREEMPTED: "{w} was preempted and not requeued (not resumable)",
    Event.Kind.COMPLETED: "{w} finished",
    Event.Kind.FAILED: "{w} failed",
    Event.Kind.CANCELLED: "{w} was cancelled by {actor}",
}


@receiver(workload_events_recorded, dispatch_uid="notifications.workload_events")
def workload_events(sender, event_ids, actor=None, **kwargs):
    after_commit(tell_owners, event_ids, actor)


def tell_owners(event_ids, actor):
    events = Event.objects.filter(pk__in=event_ids, kind__in=WORKLOAD_KIND).select_related(
        "workload", "workload__owner", "workload__cluster"
    ).order_by("at", "id")
    for event in events:
        workload = event.workload
        if event.kind == Event.Kind.CANCELLED and (actor is None or actor.pk == workload.owner_id):
            continue  # the owner cancelled it themselves: nothing to tell
        title = WORKLOAD_TITLE[event.kind].format(
            w=f"{workload.name} (#{workload.pk})", c=workload.cluster.name,
            actor=actor.get_username() if actor else "",
        )
        notify(WORKLOAD_KIND[event.kind], [workload.owner], title=title, body=_why(event),
               link=reverse("scheduler:workload", kwargs={"pk": workload.pk}))


def _why(event) -> str:
    """The event's reason; for a preemption, first the reason it was decided (the signal)."""
    if event.kind not in (Event.Kind.REQUEUED, Event.Kind.PREEMPTED) or event.run_id is None:
        return event.reason
    signalled = Event.objects.filter(run_id=event.run_id, kind=Event.Kind.SIGNALLED).first()
    if signalled is None:  # a host failure or a drain, not a preemption by the scheduler
        return event.reason
    return f"{signalled.reason}\n{event.reason}"


@receiver(post_save, sender=RequestEntry, dispatch_uid="notifications.request_entries")
def request_entry(sender, instance, created, **kwargs):
    if created:
        after_commit(tell_about_request, instance.pk)


def tell_about_request(entry_id):
    entry = RequestEntry.objects.select_related(
        "request", "request__node", "request__requested_by", "request__deciding_node", "author"
    ).get(pk=entry_id)
    change_request = entry.request
    link = reverse("budgets:request", kwargs={"pk": change_request.pk})
    about = (f"request #{change_request.pk} ({change_request.get_kind_display().lower()} for "
             f"{change_request.node.path})")
    deciders = change_request.deciding_node.managers.exclude(pk=change_request.requested_by_id)
    if entry.kind in (RequestEntry.Kind.FILED, RequestEntry.Kind.PASSED_UP):
        notify(Kind.REQUEST_FILED, deciders,
               title=f"{entry.author_name} asks: {about} waits for your decision",
               body=change_request.reason, link=link)
    elif entry.kind in (RequestEntry.Kind.APPROVED, RequestEntry.Kind.REJECTED):
        notify(Kind.REQUEST_DECIDED, [change_request.requested_by],
               title=f"{about} was {entry.kind} by {entry.author_name}", body=entry.text,
               link=link)
    elif entry.kind == RequestEntry.Kind.COMMENT:
        commenters = get_user_model().objects.filter(
            pk__in=change_request.entries.values("author")
        )
        everyone = [change_request.requested_by, *deciders, *commenters]
        notify(Kind.REQUEST_COMMENTED, [u for u in everyone if u.pk != entry.author_id],
               title=f"{entry.author_name} commented on {about}", body=entry.text, link=link)


@receiver(host_escalated, dispatch_uid="notifications.host_escalated")
def escalated(sender, host, reason, **kwargs):
    after_commit(tell_operators, host.pk, host.name, reason)


def tell_operators(host_id, host_name, reason):
    operators = get_user_model().objects.filter(
        Q(is_superuser=True)
        | Q(groups__permissions__codename="operate_fleet")
        | Q(user_permissions__codename="operate_fleet"),
        is_active=True,
    ).distinct().order_by("username")
    notify(Kind.HOST_ESCALATED, operators, title=f"Host {host_name} needs a human",
           body=reason, link=reverse("scheduler:host", kwargs={"pk": host_id}))


@receiver(allocation_expired, dispatch_uid="notifications.allocation_expired")
def expired(sender, node, cluster, at, **kwargs):
    after_commit(tell_of_expiry, node.pk, cluster.pk, at)


def tell_of_expiry(node_id, cluster_id, at):
    """The managers of the budget learn that its share went back to its siblings; the owners
    of its pending allocated work, that it can no longer run allocated there."""
    node = BudgetNode.objects.get(pk=node_id)
    cluster = Cluster.objects.get(pk=cluster_id)
    what = f"The allocation of {node.path} on {cluster.name} expired on {at:%Y-%m-%d %H:%M} UTC"
    notify(Kind.ALLOCATION_EXPIRED, node.nearest_managers(), title=what,
           body="Its share returned to its siblings. Ask for shares again to run allocated.",
           link=reverse("budgets:node", kwargs={"pk": node.pk}))
    stranded = Workload.objects.filter(
        cluster=cluster, state=Workload.State.PENDING, min_runtime__gt=0,
    ).filter(Q(budget=node) | Q(budget__path__startswith=node.path + PATH_SEPARATOR)
             ).select_related("owner").order_by("pk")
    for workload in stranded:
        notify(Kind.ALLOCATION_EXPIRED, [workload.owner],
               title=f"{what}: {workload.name} (#{workload.pk}) can no longer run allocated",
               body=workload.queue_reason,
               link=reverse("scheduler:workload", kwargs={"pk": workload.pk}))


@receiver(run_idle, dispatch_uid="notifications.run_idle")
def idle(sender, run_id, workload_id, owner_id, idle_since, reason, **kwargs):
    after_commit(tell_idle_owner, workload_id, owner_id, reason)


def tell_idle_owner(workload_id, owner_id, reason):
    workload = Workload.objects.select_related("cluster").get(pk=workload_id)
    owner = get_user_model().objects.get(pk=owner_id)
    notify(Kind.RUN_IDLE, [owner],
           title=f"The GPUs of {workload.name} (#{workload.pk}) on {workload.cluster.name} "
           "sit idle",
           body=f"{reason}\nEnd it if you are done: others are waiting for these GPUs.",
           link=reverse("scheduler:workload", kwargs={"pk": workload.pk}))


def _review_items(item_ids):
    return ReviewItem.objects.filter(pk__in=item_ids).select_related(
        "cycle", "node__parent"
    ).order_by("node__path")


def _answering(items):
    """item -> the node whose managers decide it (its parent, or the nearest ancestor with
    managers), looked up once per parent."""
    by_parent = {}
    for item in items:
        if item.node.parent_id not in by_parent:
            by_parent[item.node.parent_id] = item.node.parent.answering_node()
        yield item, by_parent[item.node.parent_id]


def _allocations(count: int) -> str:
    return f"{count} allocation{'s' if count != 1 else ''}"


@receiver(review_due, dispatch_uid="notifications.review_due")
def review_is_due(sender, cycle, item_ids, **kwargs):
    after_commit(tell_deciders, cycle.pk, item_ids)


def tell_deciders(cycle_id, item_ids):
    """Each decider, once: how many allocations wait for them, and by when."""
    waiting = defaultdict(int)
    people = {}
    items = list(_review_items(item_ids))
    for _item, answering in _answering(items):
        for manager in answering.managers.all() if answering else []:
            people[manager.pk] = manager
            waiting[manager.pk] += 1
    if not items:
        return
    cycle = items[0].cycle
    link = reverse("budgets:review", kwargs={"pk": cycle_id}) + "?mine=1"
    for pk, count in waiting.items():
        notify(Kind.REVIEW_DUE, [people[pk]],
               title=f"Budget review {cycle.name}: {_allocations(count)} to confirm or change "
               f"by {cycle.due_at:%Y-%m-%d %H:%M} UTC",
               body="Confirm each allocation as it is, or give it other shares.", link=link)


@receiver(review_overdue, dispatch_uid="notifications.review_overdue")
def review_is_overdue(sender, cycle, item_ids, **kwargs):
    after_commit(tell_of_overdue_reviews, cycle.pk, item_ids)


def tell_of_overdue_reviews(cycle_id, item_ids):
    """The deciders who missed the deadline, and the managers one level above them (the
    top's own managers, for the top)."""
    late = defaultdict(int)
    above = defaultdict(lambda: defaultdict(int))  # manager above -> late node path -> count
    people = {}
    items = list(_review_items(item_ids))
    for _item, answering in _answering(items):
        if answering is None:
            continue
        for manager in answering.managers.all():
            people[manager.pk] = manager
            late[manager.pk] += 1
        if answering.parent_id is not None:
            for manager in answering.parent.nearest_managers():
                people[manager.pk] = manager
                above[manager.pk][answering.path] += 1
    if not items:
        return
    cycle = items[0].cycle
    link = reverse("budgets:review", kwargs={"pk": cycle_id})
    for pk, count in late.items():
        notify(Kind.REVIEW_OVERDUE, [people[pk]],
               title=f"Budget review {cycle.name} is overdue: {_allocations(count)} still "
               f"wait{'s' if count == 1 else ''} for you",
               body="The managers above you have been told.", link=link + "?mine=1")
    for pk, by_path in above.items():
        paths = ", ".join(sorted(by_path))
        notify(Kind.REVIEW_OVERDUE, [people[pk]],
               title=f"Budget review {cycle.name}: {_allocations(sum(by_path.values()))} "
               f"below {paths} not confirmed by the deadline",
               body="Their managers missed the deadline; you may confirm or change them "
               "yourself.", link=link)
