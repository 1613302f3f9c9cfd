from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from fleet.models import Cluster, Host


def gpu_ranges(indices) -> str:
    """GPU indices as people read them: "GPU 5", "GPUs 0-3", "GPUs 0, 2, 5"."""
    indices = sorted(indices)
    if len(indices) == 1:
        return f"GPU {indices[0]}"
    if indices and indices == list(range(indices[0], indices[-1] + 1)):
        return f"GPUs {indices[0]}-{indices[-1]}"
    return "GPUs " + ", ".join(map(str, indices))


# The largest values the workload's number columns hold (PostgreSQL smallint and integer):
# scheduler.services.submit refuses larger ones for the form and the API alike, and the API
# schema states them, so no number reaches the database as an out-of-range error.
GPUS_MAX = 32_767
SECONDS_MAX = 2**31 - 1


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
    # The wait the timeline last recorded (the engine's ``Wait`` as {"blocker", "hosts",
    # "until"}): a new waiting event only when the engine's next one differs materially.
    last_wait = models.JSONField(null=True, blank=True)

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
    # The idle rule (scheduler.utilization): since when its GPUs have stayed below the
    # cluster's threshold, and when the run was flagged idle (None once busy again).
    idle_since = models.DateTimeField(null=True, blank=True)
    idle_flagged_at = models.DateTimeField(null=True, blank=True)

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
        IDLE = "idle", "GPUs idle"
        MOVED = "moved", "Moved to another budget"
        WAITING = "waiting"

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]
        # the reports look requeues (and other kinds) up by time: reports.accounting.queue_stays
        indexes = [models.Index(fields=["kind", "at"], name="event_kind_at")]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind}"


class Claim(models.Model):
    """GPUs on one host that a preemption released, set aside for the workload whose request
    caused it (the engine's ``Claim``, one row per host). The live loop writes exactly the
    last pass's claims after each tick and hands them to the next pass."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="claims")
    host = models.ForeignKey("fleet.Host", on_delete=models.CASCADE, related_name="+")
    gpus = models.PositiveSmallIntegerField()
    # budget paths of the allocated runs preempted for it (empty: only unallocated work)
    displaced = models.JSONField(default=list, blank=True)
    since = models.DateTimeField()

    class Meta:
        ordering = ["id"]  # the engine's order among claims made at the same instant
        constraints = [
            models.UniqueConstraint(fields=["workload", "host"], name="one_claim_per_host")
        ]

    def __str__(self):
        return f"{self.gpus} GPUs on host {self.host_id} for workload #{self.workload_id}"


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




class UtilizationRollup(models.Model):
    """How busy a run's GPUs were per clock hour, from the fleet's telemetry: GPU-seconds the
    telemetry measured and the busy part of them. Budgets, users, clusters and periods sum
    these rows (with the budget and cluster kept here, as in ``UsageRollup``), never the raw
    samples."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="utilization")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    budget = models.ForeignKey("budgets.BudgetNode", on_delete=models.CASCADE, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="+")
    allocated = models.BooleanField()
    hour = models.DateTimeField()
    gpu_seconds = models.FloatField(default=0, help_text="GPU-seconds with telemetry")
    busy_gpu_seconds = models.FloatField(default=0)
    memory_mib_max = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "hour"], name="one_utilization_per_run_hour"),
        ]
        indexes = [models.Index(fields=["cluster", "hour"], name="utilization_cluster_hour")]

    def __str__(self):
        return f"run {self.run_id} {self.hour:%Y-%m-%d %H}h"

    @property
    def busy(self) -> float | None:
        return self.busy_gpu_seconds / self.gpu_seconds if self.gpu_seconds else None


class TelemetryCursor(models.Model):
    """Up to when a cluster's telemetry has been read into the utilization rollups. A
    collection claims its stretch by moving ``until`` from the value it read (a conditional
    UPDATE), so two workers never charge the same stretch twice."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, primary_key=True,
                                   related_name="+")
    until = models.DateTimeField()
    error = models.CharField(max_length=500, blank=True)

    def __str__(self):
        return f"{self.cluster_id} read to {self.until:%Y-%m-%d %H:%M:%S}"
