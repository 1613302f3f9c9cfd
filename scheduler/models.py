from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Sum

HOUR = 3600
DAY = 24 * HOUR
WEEK_HOURS = 168


class ClusterQuerySet(models.QuerySet):
    def with_gpu_count(self):
        return self.annotate(total_gpus=Sum("hosts__gpus"))


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
    created = models.DateTimeField(auto_now_add=True)

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
    class State(models.TextChoices):
        AVAILABLE = "AVAILABLE"
        DRAINING = "DRAINING"
        DRAINED = "DRAINED"
        REPAIRING = "REPAIRING"
        DOWN = "DOWN"
        ESCALATED = "ESCALATED"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="hosts")
    name = models.CharField(max_length=100)
    gpus = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    group = models.CharField(max_length=50, blank=True, help_text="Network group (e.g. a rail).")
    state = models.CharField(max_length=10, choices=State.choices, default=State.AVAILABLE)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="host_name_unique_in_cluster")
        ]
        permissions = [("operate_fleet", "Can drain, repair and operate hosts")]

    def __str__(self):
        return f"{self.cluster.name}/{self.name}"
