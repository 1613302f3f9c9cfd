from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q, Sum
from django.utils import timezone

from scheduler.engine import HostState

HOUR = 3600
DAY = 24 * HOUR
WEEK_HOURS = 168


def gpu_ranges(indices) -> str:
    """GPU indices as people read them: "GPU 5", "GPUs 0-3", "GPUs 0, 2, 5"."""
    indices = sorted(indices)
    if len(indices) == 1:
        return f"GPU {indices[0]}"
    if indices and indices == list(range(indices[0], indices[-1] + 1)):
        return f"GPUs {indices[0]}-{indices[-1]}"
    return "GPUs " + ", ".join(map(str, indices))


class ClusterQuerySet(models.QuerySet):
    def with_gpu_count(self):
        # Meta.ordering does not apply to aggregate queries: keep the clusters in name order.
        return self.annotate(total_gpus=Sum("hosts__gpus")).order_by("name")


class Cluster(models.Model):
    """A pool of GPU hosts of one type; budgets hold shares per cluster."""

    name = models.SlugField(max_length=50, unique=True)
    gpu_type = models.CharField(max_length=50, help_text="e.g. H100, B200")
    description = models.CharField(max_length=200, blank=True)
    max_min_runtime = models.PositiveIntegerField(
        default=8 * HOUR,
        validators=[MinValueValidator(0), MaxValueValidator(7 * DAY)],
        help_text="Longest minimum runtime a workload may declare, in seconds.",
    )
    window = models.PositiveIntegerField(
        default=7 * DAY,
        validators=[MinValueValidator(HOUR), MaxValueValidator(90 * DAY)],
        help_text="Fair-share lookback window, in seconds.",
    )
    hysteresis = models.FloatField(
        default=0.1, validators=[MinValueValidator(0), MaxValueValidator(10)]
    )
    grace = models.PositiveIntegerField(
        default=300,
        validators=[MaxValueValidator(DAY)],
        help_text="Seconds a preempted run keeps its GPUs to checkpoint.",
    )
    backend = models.CharField(
        max_length=20, choices=[("simulated", "Simulated fleet"), ("slurm", "Slurm")],
        default="simulated",
    )
    backend_config = models.JSONField(
        default=dict, blank=True,
        help_text="Backend settings. Slurm: slurm_conf, partition, repair_command, unknown_jobs "
        "(scheduler/fleet/slurm.py); simulated: e.g. failure_rate_per_host_day.",
    )
    # The last problem the backend reported (Slurm unreachable, jobs Timeshare did not start),
    # shown on the cluster page; cleared by the next tick that reaches the backend.
    backend_error = models.CharField(max_length=1000, blank=True)
    backend_error_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def gpu_count(self) -> int:
        if hasattr(self, "total_gpus"):
            return self.total_gpus or 0
        return self.hosts.aggregate(total=Sum("gpus"))["total"] or 0


class Host(models.Model):
    # The engine owns the host states (DESIGN.md); the database stores exactly those.
    State = models.TextChoices("State", [(state.name, state.value) for state in HostState])

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="hosts")
    name = models.CharField(max_length=100)
    gpus = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    group = models.CharField(max_length=50, blank=True, help_text="Network group (e.g. a rail).")
    state = models.CharField(max_length=10, choices=State.choices, default=State.AVAILABLE)
    state_reason = models.CharField(max_length=500, blank=True)
    state_changed = models.DateTimeField(default=timezone.now)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    failed_repairs = models.PositiveSmallIntegerField(
        default=0, help_text="Failed repairs in a row; escalated to a human past the limit."
    )

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="host_name_unique_in_cluster")
        ]
        permissions = [("operate_fleet", "Can drain, repair and operate hosts")]

    def __str__(self):
        return f"{self.cluster.name}/{self.name}"


class Workload(models.Model):
    """What a researcher asks for: GPUs charged to a budget leaf under the scheduling contract."""

    class State(models.TextChoices):
        PENDING = "PENDING"
        RUNNING = "RUNNING"
        PREEMPTING = "PREEMPTING", "Preempting (grace period)"
        COMPLETED = "COMPLETED"
        FAILED = "FAILED"
        CANCELLED = "CANCELLED"
        PREEMPTED = "PREEMPTED"

    ACTIVE_STATES = (State.PENDING, State.RUNNING, State.PREEMPTING)

    name = models.CharField(max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workloads"
    )
    budget = models.ForeignKey(
        "budgets.BudgetNode", on_delete=models.PROTECT, related_name="workloads"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="workloads")
    gpus = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    min_runtime = models.PositiveIntegerField(
        help_text="Seconds of protection from rebalancing; 0 = unallocated (free, preemptible)."
    )
    resumable = models.BooleanField(default=False)
    command = models.TextField(help_text="Command line or container image to run.")
    expected_duration = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds of work; the simulated fleet finishes runs then."
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    submitted = models.DateTimeField(default=timezone.now, db_index=True)
    finished = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    # Written by every tick for pending work: the researcher sees why they wait.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    queue_reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-submitted", "-id"]
        indexes = [models.Index(fields=["cluster", "state"])]

    def __str__(self):
        return f"{self.name} (#{self.pk})"

    @property
    def allocated(self) -> bool:
        return self.min_runtime > 0

    @property
    def active(self) -> bool:
        return self.state in self.ACTIVE_STATES


class Run(models.Model):
    """One stint of a workload on GPUs; a requeued workload gets a new run."""

    class EndReason(models.TextChoices):
        COMPLETED = "completed"
        FAILED = "failed"
        PREEMPTED = "preempted"
        DRAINED = "drained"
        HOST_FAILURE = "host_failure"
        CANCELLED = "cancelled"

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="runs")
    number = models.PositiveSmallIntegerField()
    allocated = models.BooleanField()
    gpus = models.PositiveSmallIntegerField()
    started = models.DateTimeField()
    protected_until = models.DateTimeField()
    signalled_at = models.DateTimeField(null=True, blank=True)
    ended = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=20, choices=EndReason.choices, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    backend_id = models.CharField(max_length=100, blank=True, help_text="e.g. the Slurm job id")
    # Usage is charged into hourly rollups up to this moment, so a tick never charges twice.
    accounted_until = models.DateTimeField()

    class Meta:
        ordering = ["workload", "number"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "number"], name="run_number_unique"),
            models.UniqueConstraint(
                fields=["workload"], condition=Q(ended=None), name="one_live_run_per_workload"
            ),
        ]

    def __str__(self):
        return f"{self.workload} run {self.number}"


class RunGPU(models.Model):
    """A GPU held by a run. The partial unique index makes double assignment impossible."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="assigned_gpus")
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="assigned_gpus")
    index = models.PositiveSmallIntegerField()
    held = models.BooleanField(default=True)

    class Meta:
        ordering = ["host", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "index"], condition=Q(held=True), name="gpu_held_once"
            ),
        ]

    def __str__(self):
        return f"{self.host.name}:{self.index}"


class Event(models.Model):
    """The workload's timeline: each decision with its human reason."""

    class Kind(models.TextChoices):
        SUBMITTED = "submitted"
        QUEUED = "queued"
        STARTED = "started"
        SIGNALLED = "signalled", "Preemption signalled"
        REQUEUED = "requeued"
        PREEMPTED = "preempted"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        HELD = "held", "Hosts reserved"

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]
        # the reports look requeues (and other kinds) up by time: reports.metrics.queue_stays
        indexes = [models.Index(fields=["kind", "at"], name="event_kind_at")]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind}"


class HostEvent(models.Model):
    """Health and maintenance history of a host: drains, failures, repairs, escalations."""

    class Kind(models.TextChoices):
        DRAIN_REQUESTED = "drain_requested"
        HEALTH_SIGNAL = "health_signal"
        DRAINED = "drained"
        FAILED = "failed"
        REPAIR_STARTED = "repair_started"
        REPAIR_SUCCEEDED = "repair_succeeded"
        REPAIR_FAILED = "repair_failed"
        ESCALATED = "escalated"
        RETURNED = "returned"

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.CharField(max_length=500, blank=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    needed_human = models.BooleanField(default=False)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.host_id} {self.kind}"


class UsageRollup(models.Model):
    """Allocated GPU-seconds charged to a budget leaf per clock hour: the window sums these
    instead of scanning every run."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="usage_rollups")
    budget = models.ForeignKey(
        "budgets.BudgetNode", on_delete=models.CASCADE, related_name="usage_rollups"
    )
    hour = models.DateTimeField()
    gpu_seconds = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "budget", "hour"], name="one_rollup_per_hour"
            )
        ]
        indexes = [models.Index(fields=["cluster", "hour"])]

    def __str__(self):
        return f"{self.budget_id}@{self.cluster_id} {self.hour:%Y-%m-%d %H}h"


class OccupancySample(models.Model):
    """GPUs by state at the end of a tick, for the occupancy charts and the capacity sum."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField(db_index=True)
    total = models.PositiveIntegerField()
    available = models.PositiveIntegerField(help_text="GPUs on healthy hosts")
    allocated = models.PositiveIntegerField()
    unallocated = models.PositiveIntegerField()
    pending_workloads = models.PositiveIntegerField()
    pending_gpus = models.PositiveIntegerField()

    class Meta:
        ordering = ["cluster", "at"]
        indexes = [models.Index(fields=["cluster", "at"])]

    def __str__(self):
        return f"{self.cluster_id} {self.at:%Y-%m-%d %H:%M:%S}"


class CapacityRollup(models.Model):
    """GPU-seconds the cluster's healthy hosts could give per clock hour: the fair-share
    entitlement's capacity sums these instead of integrating every occupancy sample."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capacity_rollups")
    hour = models.DateTimeField()
    gpu_seconds = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "hour"], name="one_capacity_rollup_per_hour")
        ]

    def __str__(self):
        return f"{self.cluster_id} {self.hour:%Y-%m-%d %H:00}: {self.gpu_seconds:.0f} GPU-s"
