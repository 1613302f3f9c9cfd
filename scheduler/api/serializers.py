"""Workloads, clusters and hosts as JSON. Reading serializers only describe; the submit
serializer only checks types and ranges: the rules (contract, membership) are in
scheduler.services, which the views call."""

from collections import defaultdict

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from budgets.models import BudgetNode
from common.api.base import FieldsBuiltOnce, UniqueSlugField
from fleet.models import Cluster, Host, HostEvent
from scheduler.models import GPUS_MAX, SECONDS_MAX, Event, Run, Workload
from scheduler.permissions import visible_workload_ids


class WorkloadSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    budget = serializers.CharField(source="budget.path", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    allocated = serializers.BooleanField(read_only=True)

    class Meta:
        model = Workload
        fields = [
            "id", "name", "owner", "budget", "cluster", "gpus", "min_runtime", "allocated",
            "resumable", "command", "expected_duration", "state", "submitted", "finished",
            "exit_code", "queue_position", "queue_reason",
        ]
        read_only_fields = fields


class PlacementSerializer(serializers.Serializer):
    host = serializers.CharField()
    gpus = serializers.ListField(child=serializers.IntegerField(), help_text="GPU indices")


class RunSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    placement = serializers.SerializerMethodField()
    end_reason = serializers.CharField(
        read_only=True, help_text="completed, failed, preempted, drained, host_failure or "
        "cancelled; empty while the run lasts.",
    )

    class Meta:
        model = Run
        fields = [
            "number", "allocated", "gpus", "started", "protected_until", "signalled_at",
            "ended", "end_reason", "exit_code", "placement",
        ]
        read_only_fields = fields

    @extend_schema_field(PlacementSerializer(many=True))
    def get_placement(self, run):
        """Hosts and GPU indices the run holds (or held)."""
        by_host = defaultdict(list)
        for gpu in run.assigned_gpus.all():
            by_host[gpu.host.name].append(gpu.index)
        return [{"host": host, "gpus": sorted(ix)} for host, ix in sorted(by_host.items())]


class EventSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    label = serializers.CharField(source="get_kind_display", read_only=True)
    run = serializers.SerializerMethodField()

    class Meta:
        model = Event
        fields = ["at", "kind", "label", "reason", "run"]
        read_only_fields = fields

    def get_run(self, event) -> int | None:
        """The run number the event is about, if any."""
        return self.context.get("run_numbers", {}).get(event.run_id)


class WorkloadDetailSerializer(WorkloadSerializer):
    explanation = serializers.CharField(read_only=True, help_text="Why it is where it is.")
    can_cancel = serializers.BooleanField(read_only=True)
    runs = RunSerializer(many=True, read_only=True)
    events = serializers.SerializerMethodField()

    class Meta(WorkloadSerializer.Meta):
        fields = [*WorkloadSerializer.Meta.fields, "explanation", "can_cancel", "runs", "events"]
        read_only_fields = fields

    @extend_schema_field(EventSerializer(many=True))
    def get_events(self, workload):
        """The timeline: every decision with its human reason, oldest first."""
        numbers = {run.pk: run.number for run in workload.runs.all()}
        return EventSerializer(
            workload.events.all(), many=True, context={"run_numbers": numbers}
        ).data


class SubmitSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A workload to queue. Durations are in seconds."""

    name = serializers.CharField(max_length=100)
    budget = UniqueSlugField(
        slug_field="path", queryset=BudgetNode.objects.all(),
        help_text="Path of a budget leaf you are a member of, e.g. org/prog-a/proj-a1.",
    )
    cluster = UniqueSlugField(slug_field="name", queryset=Cluster.objects.all())
    gpus = serializers.IntegerField(min_value=1, max_value=GPUS_MAX)
    min_runtime = serializers.IntegerField(
        min_value=0, max_value=SECONDS_MAX,
        help_text="Seconds protected from rebalancing once started; 0 = unallocated (free, "
        "preemptible at any moment).",
    )
    resumable = serializers.BooleanField(
        default=False,
        help_text="It checkpoints and can restart: a preempted run is requeued. Otherwise a "
        "preempted workload ends as PREEMPTED.",
    )
    command = serializers.CharField(max_length=10_000)
    expected_duration = serializers.IntegerField(
        min_value=1, max_value=SECONDS_MAX, required=False, allow_null=True,
        help_text="Seconds of work (the simulated fleet finishes the run then).",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:  # budgets the user may read: others do not exist for them
            self.fields["budget"].queryset = BudgetNode.objects.restrict(request.user)


class ClusterSerializer(serializers.ModelSerializer):
    gpus = serializers.IntegerField(source="gpu_count", read_only=True)
    gpu_states = serializers.DictField(
        child=serializers.IntegerField(), read_only=True,
        help_text="GPUs by state: allocated, unallocated, free, unavailable.",
    )
    host_states = serializers.DictField(
        child=serializers.IntegerField(), read_only=True, help_text="Hosts by state."
    )
    pending_workloads = serializers.IntegerField(read_only=True)
    pending_gpus = serializers.IntegerField(read_only=True)

    class Meta:
        model = Cluster
        fields = [
            "name", "gpu_type", "description", "gpus", "max_min_runtime", "window",
            "hysteresis", "grace", "gpu_states", "host_states", "pending_workloads",
            "pending_gpus",
        ]
        read_only_fields = fields


class HostSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    busy_gpus = serializers.IntegerField(read_only=True, help_text="GPUs held by runs now.")

    class Meta:
        model = Host
        fields = [
            "id", "name", "cluster", "gpus", "busy_gpus", "group", "state", "state_reason",
            "state_changed", "last_heartbeat", "failed_repairs",
        ]
        read_only_fields = fields


class HolderSerializer(serializers.Serializer):
    workload = serializers.IntegerField(
        allow_null=True, help_text="Null, like name, owner and budget, for a workload of "
        "another budget: one the caller may not see.")
    name = serializers.CharField(allow_null=True)
    owner = serializers.CharField(allow_null=True)
    budget = serializers.CharField(allow_null=True)
    allocated = serializers.BooleanField()
    gpus = serializers.ListField(child=serializers.IntegerField(), help_text="GPU indices")


class HostEventSerializer(serializers.ModelSerializer):
    by = serializers.CharField(
        source="by.username", default=None, allow_null=True, read_only=True
    )

    class Meta:
        model = HostEvent
        fields = ["at", "kind", "reason", "by", "needed_human"]
        read_only_fields = fields


class HostDetailSerializer(HostSerializer):
    holders = serializers.SerializerMethodField()
    events = serializers.SerializerMethodField()

    class Meta(HostSerializer.Meta):
        fields = [*HostSerializer.Meta.fields, "holders", "events"]
        read_only_fields = fields

    @extend_schema_field(HolderSerializer(many=True))
    def get_holders(self, host):
        """Who holds the host's GPUs now."""
        by_run: dict[int, dict] = {}
        gpus = host.assigned_gpus.filter(held=True).select_related(
            "run__workload__budget", "run__workload__owner"
        ).order_by("index")
        gpus = list(gpus)
        visible = visible_workload_ids(self.context["request"].user,
                                       {gpu.run.workload_id for gpu in gpus})
        hidden = {"workload": None, "name": None, "owner": None, "budget": None}
        for gpu in gpus:
            w = gpu.run.workload
            shown = {"workload": w.pk, "name": w.name, "owner": w.owner.username,
                     "budget": w.budget.path} if w.pk in visible else hidden
            holder = by_run.setdefault(gpu.run_id, {
                **shown, "allocated": gpu.run.allocated, "gpus": [],
            })
            holder["gpus"].append(gpu.index)
        return list(by_run.values())

    @extend_schema_field(HostEventSerializer(many=True))
    def get_events(self, host):
        """Health and maintenance history, newest first (the last 100)."""
        return HostEventSerializer(host.events.select_related("by")[:100], many=True).data


class HostActionSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=500, required=False, allow_blank=True,
        help_text="Why (required to drain); for repair, what was done.",
    )


class TreeNodeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    path = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField()
    parent = serializers.IntegerField(allow_null=True)
    depth = serializers.IntegerField()
    managers = serializers.ListField(child=serializers.CharField())
    shares = serializers.IntegerField(allow_null=True, help_text="Shares on the cluster.")
    version = serializers.IntegerField(
        allow_null=True, help_text="Send it back when setting shares: a stale edit gets 409."
    )
    percent_of_parent = serializers.FloatField(allow_null=True)
    percent_of_cluster = serializers.FloatField()
    gpu_hours_per_week = serializers.FloatField()
    usage_gpu_hours = serializers.FloatField(
        allow_null=True,
        help_text="Allocated GPU-hours charged to the subtree over the cluster's window; "
        "null (like ratio and rank) for budgets whose figures the caller may not see.",
    )
    entitlement_gpu_hours = serializers.FloatField(
        help_text="Fraction of the cluster x its healthy capacity over the window."
    )
    ratio = serializers.FloatField(
        allow_null=True, help_text="usage / entitlement; null without an allocation."
    )
    ratio_label = serializers.CharField()
    rank = serializers.IntegerField(
        allow_null=True, help_text="Fair Tree rank among its siblings (1 is served first)."
    )
    siblings = serializers.IntegerField(allow_null=True)
    can_set_shares = serializers.BooleanField()
    can_request_change = serializers.BooleanField()


class TreeSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    gpus = serializers.IntegerField()
    window = serializers.IntegerField(help_text="Fair-share lookback window, seconds.")
    capacity_gpu_hours = serializers.FloatField(
        help_text="GPU-hours the healthy hosts could give over the window."
    )
    as_of = serializers.DateTimeField()
    nodes = TreeNodeSerializer(many=True, help_text="Depth first, parents before children.")
