"""Every change to workloads goes through here: permission, validation, one
transaction, events with reasons. Views, the API and commands call these functions; the
decisions themselves (who runs where, who is preempted) belong to the engine, applied by
``scheduler.loop.tick``.

- ``submit``, ``cancel``: researchers (members of a budget leaf; cancel also its managers
  and operators).
- ``explain``: why a workload is where it is, in one sentence.
- ``settle_leavers_work``: a member left a budget; their pending work there is cancelled or
  moved (``budgets.signals.member_leaving``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.dispatch import receiver
from django.utils import timezone

from budgets.models import Allocation, BudgetNode
from budgets.paths import PATH_SEPARATOR
from budgets.signals import allocation_expired, member_leaving
from common.errors import ServiceError
from common.statements import insert
from fleet.backends import backend_for
from fleet.locks import lock_cluster
from fleet.models import Cluster
from scheduler import permissions
from scheduler.engine import BudgetTree, ContractError, Params, contract
from scheduler.engine import Workload as EngineWorkload
from scheduler.engine.wording import quantity
from scheduler.engine_views import engine_params, engine_workload
from scheduler.loop import charge_usage
from scheduler.models import GPUS_MAX, SECONDS_MAX, Claim, Event, Run, RunGPU, Workload
from scheduler.signals import announce_events
from scheduler.tasks import request_tick
from scheduler.validation import validation_snapshot

log = logging.getLogger(__name__)

NAME_MAX = Workload._meta.get_field("name").max_length
EVENT_REASON_MAX = Event._meta.get_field("reason").max_length


class SubmissionError(ServiceError):
    """Bad workload input, or an action on a workload that is not possible in its state."""


# ---------------------------------------------------------------------------------------------
# Workloads


def _whole(value, field: str, label: str, *, at_most: int, too_large: str) -> int:
    """The one check of a workload's numbers, whether they come from the form or the API: a
    whole number no larger than its column holds (the lower bounds follow, with their own
    words)."""
    if isinstance(value, bool):
        raise SubmissionError(f"{label} must be a whole number.", field)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SubmissionError(f"{label} must be a whole number.", field) from None
    if isinstance(value, float) and number != value:
        raise SubmissionError(f"{label} must be a whole number.", field)
    if number > at_most:
        raise SubmissionError(f"{label} {too_large}.", field)
    return number


def _seconds_whole(value, field: str, label: str) -> int:
    return _whole(value, field, label, at_most=SECONDS_MAX,
                  too_large=f"is too long: at most {SECONDS_MAX // 3600:,} h")


def _contract_field(workload: EngineWorkload, hosts, tree: BudgetTree, params: Params) -> str:
    """Which form field a ``ContractError`` is about (the engine owns the rules and words)."""
    if workload.gpus < 1 or not contract.placeable(workload.gpus, hosts):
        return "gpus"
    if not 0 <= workload.min_runtime <= params.max_min_runtime:
        return "min_runtime"
    return "min_runtime" if workload.min_runtime > 0 else "budget"


def submit(
    user,
    *,
    name: str,
    budget: BudgetNode,
    cluster: Cluster,
    gpus,
    min_runtime,
    resumable: bool,
    command: str,
    expected_duration=None,
) -> Workload:
    """Queue a workload. Raises ``SubmissionError`` (with ``.field``) for bad input and
    ``PermissionDenied`` for a budget the user may not charge; nothing is written then.

    The workload comes back with its runs, claims and events known as a prefetch leaves them
    (none, none, the submitted event), so that answering with it reads nothing back: read it
    again to see what later ticks did."""
    name = (name or "").strip()
    command = (command or "").strip()
    if not name:
        raise SubmissionError("Give the workload a name.", "name")
    if len(name) > NAME_MAX:
        raise SubmissionError(f"The name is at most {NAME_MAX} characters.", "name")
    if not command:
        raise SubmissionError("Give the command line or container image to run.", "command")
    if budget is None:
        raise SubmissionError("Choose a budget.", "budget")
    if cluster is None:
        raise SubmissionError("Choose a cluster.", "cluster")
    gpus = _whole(gpus, "gpus", "GPUs", at_most=GPUS_MAX, too_large=f"are at most {GPUS_MAX:,}")
    min_runtime = _seconds_whole(min_runtime, "min_runtime", "The minimum runtime")
    if gpus < 1:
        raise SubmissionError("A workload needs at least 1 GPU.", "gpus")
    if min_runtime < 0:
        raise SubmissionError(
            "The minimum runtime cannot be negative (0 means unallocated: free, preemptible "
            "at any moment).", "min_runtime"
        )
    if expected_duration in ("", None):
        expected_duration = None
    else:
        expected_duration = _seconds_whole(
            expected_duration, "expected_duration", "The expected duration"
        )
        if expected_duration < 1:
            raise SubmissionError("The expected duration must be positive.", "expected_duration")
    snapshot = validation_snapshot(cluster)
    if not snapshot.is_leaf(budget.path):
        raise SubmissionError(
            f"{budget.path} is not a leaf budget: charge one of its projects or researchers.",
            "budget",
        )
    if not permissions.can_charge(user, budget):
        raise PermissionDenied(f"You are not a member of {budget.path}.")
    hosts, tree = snapshot.hosts, snapshot.tree
    if not hosts:
        raise SubmissionError(f"Cluster {cluster.name} has no hosts yet.", "cluster")
    params = engine_params(cluster)
    candidate = EngineWorkload(
        id="new", budget=budget.path, gpus=gpus, min_runtime=float(min_runtime),
        resumable=bool(resumable), submitted=0.0, duration=expected_duration,
    )
    try:
        contract.validate(candidate, hosts, tree, params)
    except ContractError as error:
        message = str(error)
        raise SubmissionError(
            message[:1].upper() + message[1:] + ".", _contract_field(candidate, hosts, tree, params)
        ) from None

    # the two rows by statements written once (``insert``): composing each insert cost the ORM
    # more CPU than running it, and every submission makes both
    with transaction.atomic(savepoint=False):  # nothing here is worth retrying alone
        workload = Workload(
            name=name,
            owner=user,
            budget=budget,
            cluster=cluster,
            gpus=gpus,
            min_runtime=min_runtime,
            resumable=bool(resumable),
            command=command,
            expected_duration=expected_duration,
            queue_reason="submitted: waiting for the next scheduling pass",
        )
        insert(workload)
        submitted = Event(
            workload=workload, at=workload.submitted, kind=Event.Kind.SUBMITTED,
            reason=_contract_words(workload),
        )
        insert(submitted)
        request_tick(cluster.pk)
    _known_to_be_new(workload, submitted)
    return workload


def _known_to_be_new(workload: Workload, submitted: Event) -> None:
    """A workload just created has no runs and no claims, and one event: say so the way
    ``prefetch_related`` would, so that answering with it reads nothing back."""
    workload._prefetched_objects_cache = {
        "runs": _as_read(Run.objects.none(), []), "claims": _as_read(Claim.objects.none(), []),
        "events": _as_read(Event.objects.filter(pk=submitted.pk), [submitted]),
    }


def _as_read(queryset, rows):
    """``queryset`` as if it had been read and given ``rows`` (an unread ``none()`` still
    composes its SQL each time it is iterated, to find that it reads nothing)."""
    queryset._result_cache, queryset._prefetch_done = rows, True
    return queryset


def _contract_words(w: Workload) -> str:
    gpus = f"{quantity(w.gpus, 'GPU')} on {w.cluster.name}"
    if w.min_runtime <= 0:
        return f"{gpus}, unallocated: free, preemptible at any moment"
    again = "requeued if preempted" if w.resumable else "ends as PREEMPTED if preempted"
    return (
        f"{gpus} charged to {w.budget.path}, protected for {_span(w.min_runtime)} "
        f"once started, then preemptible ({again})"
    )


def cancel(user, workload: Workload) -> Workload:
    """Cancel a pending or running workload: a running one is stopped at once and its GPUs
    released (usage charged up to now)."""
    if not permissions.can_cancel(user, workload):
        raise PermissionDenied("Only the owner, a manager of its budget or an operator may cancel.")
    now = timezone.now()
    with transaction.atomic():
        lock_cluster(workload.cluster_id)
        current = Workload.objects.select_for_update().get(pk=workload.pk)
        if not current.active:
            raise SubmissionError(
                f"{current.name} is already {current.get_state_display().lower()}.", None
            )
        who = user.get_username()
        run = Run.objects.filter(workload=current, ended=None).select_related("workload").first()
        if run is not None:
            now = max(now, run.accounted_until)  # a worker's clock may run a little ahead
            charge_usage([run], now)
            run.ended = now
            run.end_reason = Run.EndReason.CANCELLED
            run.save(update_fields=["ended", "end_reason", "accounted_until"])
            RunGPU.objects.filter(run=run, held=True).update(held=False)
            cluster = current.cluster
            transaction.on_commit(lambda: backend_for(cluster).stop(run))
        current.state = Workload.State.CANCELLED
        current.finished = now
        current.queue_position = None
        current.queue_reason = ""
        current.save(update_fields=["state", "finished", "queue_position", "queue_reason"])
        cancelled = Event.objects.create(
            workload=current, run=run, at=now, kind=Event.Kind.CANCELLED,
            reason=f"cancelled by {who}" + (", run stopped and GPUs released" if run else ""),
        )
        announce_events([cancelled], actor=user)
        request_tick(current.cluster_id)
    workload.refresh_from_db()
    return workload


@receiver(member_leaving, dispatch_uid="scheduler.settle_leavers_work")
def settle_leavers_work(sender, node, person, by, move_to, reason, **kwargs) -> str:
    """A member leaves ``node``: their pending workloads charged to it are cancelled with the
    reason, or moved to ``move_to`` keeping their place in the queue. Running work finishes
    as it would have; finished work and its history stay charged where they ran. Runs inside
    the removal's transaction: a refusal here leaves the person a member."""
    pending = Workload.objects.filter(owner=person, budget=node, state=Workload.State.PENDING)
    for cluster_id in sorted(set(pending.values_list("cluster_id", flat=True))):
        lock_cluster(cluster_id)  # no tick starts the work while it leaves
    workloads = list(pending.select_for_update().select_related("cluster"))
    if not workloads:
        return ""
    why = f"{person.get_username()} left {node.path}" + (f": {reason}" if reason else "")
    now = timezone.now()
    if move_to is not None:
        allocated_on = set(
            Allocation.objects.filter(node=move_to).values_list("cluster_id", flat=True)
        )
        for workload in workloads:
            if workload.allocated and workload.cluster_id not in allocated_on:
                raise SubmissionError(
                    f"{move_to.path} has no allocation on {workload.cluster.name}, so "
                    f"{workload.name} (#{workload.pk}) could not run allocated there: move it "
                    "to a budget with shares there, or cancel it.", "move_to",
                )
        for workload in workloads:
            workload.budget = move_to
            workload.save(update_fields=["budget"])
            Event.objects.create(
                workload=workload, at=now, kind=Event.Kind.MOVED,
                reason=f"moved from {node.path} to {move_to.path} by {by.get_username()}: {why}",
            )
            request_tick(workload.cluster_id)
        return f"{len(workloads)} pending workload(s) moved to {move_to.path}"
    cancelled = []
    for workload in workloads:
        workload.state = Workload.State.CANCELLED
        workload.finished = now
        workload.queue_position = None
        workload.queue_reason = ""
        workload.save(update_fields=["state", "finished", "queue_position", "queue_reason"])
        cancelled.append(Event.objects.create(
            workload=workload, at=now, kind=Event.Kind.CANCELLED,
            reason=f"cancelled by {by.get_username()}: {why}",
        ))
        request_tick(workload.cluster_id)
    announce_events(cancelled, actor=by)
    return f"{len(workloads)} pending workload(s) cancelled"


@receiver(allocation_expired, dispatch_uid="scheduler.tell_work_of_expiry")
def tell_work_of_expiry(sender, node, cluster, at, **kwargs) -> None:
    """The allocation of ``node`` on ``cluster`` expired: each pending allocated workload
    charged at or below it learns, on its timeline and in its queue reason, why it can no
    longer run allocated there (unless another allocation above still covers it)."""
    pending = Workload.objects.filter(
        cluster=cluster, state=Workload.State.PENDING, min_runtime__gt=0,
    ).filter(Q(budget=node) | Q(budget__path__startswith=node.path + PATH_SEPARATOR))
    why = (
        f"the allocation of {node.path} on {cluster.name} expired on {at:%Y-%m-%d %H:%M} UTC: "
        "this workload can no longer run allocated there; ask for shares, or cancel it and "
        "submit it unallocated (minimum runtime 0)"
    )[:EVENT_REASON_MAX]
    told = []
    for workload in pending:
        told.append(Event(workload=workload, at=at, kind=Event.Kind.QUEUED, reason=why))
    if told:
        Event.objects.bulk_create(told)
        pending.update(queue_reason=why)
        request_tick(cluster.pk)


def _grace_for(workload: Workload) -> float:
    """The grace period a preempted run of ``workload`` gets (shorter for unallocated work)."""
    return engine_params(workload.cluster).grace_for(
        engine_workload(workload, workload.budget.path)
    )


def claimed_for(workload: Workload) -> str:
    """The GPUs a preemption set aside for a pending ``workload``, in one phrase, or "".
    Its claims are read as prefetched, with their hosts (the API's detail does; a new
    workload is known to have none)."""
    claims = list(workload.claims.all())
    if not claims:
        return ""
    where = ", ".join(f"{c.gpus} on {c.host.name}" for c in claims)
    displaced = sorted({path for c in claims for path in c.displaced})
    after = (f"after preempting runs of {', '.join(displaced)}" if displaced
             else "after preempting unallocated work")
    return f"GPUs ({where}) claimed for it since {claims[0].since:%H:%M:%S} {after}"


def explain(workload: Workload) -> str:
    """Why the workload is where it is, in one sentence (never a bare "pending")."""
    now = timezone.now()
    state = workload.state
    if state == Workload.State.PENDING:
        where = f"#{workload.queue_position} in the queue of {workload.cluster.name}: " if (
            workload.queue_position
        ) else ""
        claimed = claimed_for(workload)
        return where + (workload.queue_reason or "waiting for the next scheduling pass") + (
            f"; {claimed}" if claimed else ""
        )
    if state in (Workload.State.RUNNING, Workload.State.PREEMPTING):
        run = workload.runs.filter(ended=None).first()
        if run is None:
            return workload.get_state_display()
        hosts = " ".join(
            sorted(set(run.assigned_gpus.filter(held=True).values_list("host__name", flat=True)))
        )
        text = f"running on {hosts} since {run.started:%Y-%m-%d %H:%M:%S}"
        if run.signalled_at:
            return text + (
                f"; preemption signalled at {run.signalled_at:%H:%M:%S}, "
                f"leaves by {run.signalled_at + timedelta(seconds=_grace_for(workload)):%H:%M:%S}"
            )
        if not run.allocated:
            return text + "; unallocated: preemptible at any moment"
        if run.protected_until > now:
            return text + f"; protected until {run.protected_until:%Y-%m-%d %H:%M:%S}"
        return text + f"; preemptible since {run.protected_until:%Y-%m-%d %H:%M:%S}"
    last = workload.events.order_by("-at", "-id").first()
    label = workload.get_state_display().lower()
    return f"{label}: {last.reason}" if last and last.reason else label


def _span(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:g} h"
