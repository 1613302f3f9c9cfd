"""The fleet: clusters, their hosts, each host's health and maintenance history, and the
healthy capacity they give. Nothing here knows of budgets or workloads; the tables keep the
names they had when these models lived in ``scheduler`` (migrations moved only the state)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q, Sum
from django.utils import timezone

from scheduler.engine import HostState, Params

HOUR = 3600
DAY = 24 * HOUR
WEEK_HOURS = 168


class ClusterQuerySet(models.QuerySet):
    def with_gpu_count(self):
        # Meta.ordering does not apply to aggregate queries: keep the clusters in name order.
        return self.annotate(
            total_gpus=Sum("hosts__gpus", filter=Q(hosts__retired=None))
        ).order_by("name")


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
    unallocated_grace = models.PositiveIntegerField(
        default=30,
        validators=[MaxValueValidator(DAY)],
        help_text="Seconds a preempted unallocated run keeps its GPUs (never more than the "
        "grace above): unallocated work was promised nothing, so debug work waits less.",
    )
    pass_interval = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(HOUR)],
        help_text="Seconds between scheduling passes while allocated work waits: the live "
        "loop's tick (TIMESHARE_TICK_SECONDS) and the simulator's cadence, the same value.",
    )
    backend = models.CharField(
        max_length=20, choices=[("simulated", "Simulated fleet"), ("slurm", "Slurm")],
        default="simulated",
    )
    backend_config = models.JSONField(
        default=dict, blank=True,
        help_text="Backend settings. Slurm: slurm_conf, partition, repair_command, unknown_jobs "
        "(fleet/backends/slurm.py); simulated: e.g. failure_rate_per_host_day.",
    )
    # The last problem the backend reported (Slurm unreachable, jobs Timeshare did not start),
    # shown on the cluster page; cleared by the next tick that reaches the backend.
    backend_error = models.CharField(max_length=1000, blank=True)
    backend_error_at = models.DateTimeField(null=True, blank=True)
    # What the last tick learnt about the backend (Slurm: {"accounting": bool, "min_job_age":
    # seconds}), for the cluster page: what a worker outage costs without accounting.
    backend_facts = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(default=timezone.now)
    telemetry = models.CharField(
        max_length=20,
        choices=[("none", "Not reported"), ("simulated", "Simulated profiles"),
                 ("prometheus", "Prometheus (DCGM exporter)")],
        default="none",
        help_text="Where GPU busy fractions come from (fleet/telemetry).",
    )
    # The idle rule: a run whose GPUs stay below idle_threshold busy for idle_period seconds
    # is flagged idle (and, with preempt_idle, preempted once past its minimum runtime).
    idle_threshold = models.FloatField(
        default=0.10, validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Busy fraction below which a run's GPUs count as idle (0.10 = 10%).",
    )
    idle_period = models.PositiveIntegerField(
        default=30 * 60, validators=[MinValueValidator(60), MaxValueValidator(7 * DAY)],
        help_text="Seconds a run must stay idle before it is flagged.",
    )
    preempt_idle = models.BooleanField(
        default=False,
        help_text="Preempt allocated runs flagged idle once past their minimum runtime.",
    )

    objects = ClusterQuerySet.as_manager()

    class Meta:
        db_table = "scheduler_cluster"
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        super().clean()
        tick = settings.TIMESHARE_TICK_SECONDS
        if self.pass_interval is not None and self.pass_interval != tick:
            raise ValidationError({"pass_interval": (
                f"The live loop ticks every {tick} s (TIMESHARE_TICK_SECONDS): the pass interval "
                "must be the same, or the simulator and the what-if decide on another cadence."
            )})

    def engine_params(self) -> Params:
        """The engine's parameters of this cluster: what the live loop, the fleet's grace
        signal and the what-if replay all use."""
        return Params(
            window=float(self.window),
            max_min_runtime=float(self.max_min_runtime),
            hysteresis=float(self.hysteresis),
            grace=float(self.grace),
            unallocated_grace=float(self.unallocated_grace),
            pass_interval=float(self.pass_interval),
        )

    @property
    def gpu_count(self) -> int:
        if hasattr(self, "total_gpus"):
            return self.total_gpus or 0
        return self.hosts.aggregate(total=Sum("gpus"))["total"] or 0


class LiveHosts(models.Manager):
    """Hosts in service (not retired): what the loop schedules on and capacity counts."""

    def get_queryset(self):
        return super().get_queryset().filter(retired=None)


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
    # Set when the cluster's backend no longer knows the host (its backend was switched): it
    # keeps its history, but nothing is scheduled on it and no capacity counts it.
    retired = models.DateTimeField(null=True, blank=True)

    with_retired = models.Manager()
    objects = LiveHosts()  # the default (Meta.default_manager_name): hosts in service

    class Meta:
        db_table = "scheduler_host"
        ordering = ["cluster", "name"]
        default_manager_name = "objects"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="host_name_unique_in_cluster")
        ]
        permissions = [("operate_fleet", "Can drain, repair and operate hosts")]

    def __str__(self):
        return f"{self.cluster.name}/{self.name}"


class ValidationStamp(models.Model):
    """What submission validation reads of a cluster (its hosts, the budget tree, the
    cluster's allocations) changed when this stamp changed: submit keeps its validation
    snapshot in the shared cache under the stamp (``scheduler.validation``).

    Only database triggers write it (fleet's and budgets' migrations), so every writer is
    seen: services, the admin, queryset ``update()``s and raw SQL alike. A new stamp is
    random rather than a counter so that no rolled-back or restored database ever repeats
    a stamp another state of the data was cached under."""

    cluster = models.OneToOneField(
        Cluster, primary_key=True, on_delete=models.CASCADE, related_name="validation_stamp"
    )
    stamp = models.CharField(max_length=32)

    def __str__(self):
        return f"{self.cluster_id}: {self.stamp}"


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
        RETIRED = "retired"

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.CharField(max_length=500, blank=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    needed_human = models.BooleanField(default=False)

    class Meta:
        db_table = "scheduler_hostevent"
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.host_id} {self.kind}"


class CapacityRollup(models.Model):
    """GPU-seconds the cluster's healthy hosts could give per clock hour: the fair-share
    entitlement's capacity sums these instead of integrating every occupancy sample."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capacity_rollups")
    hour = models.DateTimeField()
    gpu_seconds = models.FloatField(default=0)

    class Meta:
        db_table = "scheduler_capacityrollup"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "hour"], name="one_capacity_rollup_per_hour")
        ]

    def __str__(self):
        return f"{self.cluster_id} {self.hour:%Y-%m-%d %H:00}: {self.gpu_seconds:.0f} GPU-s"
