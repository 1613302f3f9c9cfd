from django.contrib import admin, messages

from fleet.backends import BackendUnavailable, backend_for
from fleet.models import Cluster, Host
from fleet.services import switch_backend


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "gpu_type", "backend", "telemetry", "max_min_runtime", "window",
                    "grace", "unallocated_grace", "pass_interval", "preempt_idle",
                    "backend_error"]
    list_filter = ["backend"]
    readonly_fields = ["backend_error", "backend_error_at", "backend_facts"]
    fieldsets = [
        (None, {"fields": ["name", "gpu_type", "description", "created"]}),
        ("Scheduling contract", {"fields": ["max_min_runtime", "window", "hysteresis", "grace",
                                            "unallocated_grace", "pass_interval"]}),
        ("Fleet backend", {
            "fields": ["backend", "backend_config", "backend_error", "backend_error_at",
                       "backend_facts"],
            "description": (
                "Simulated (the default, no real hosts) or Slurm. For Slurm, backend_config "
                "holds e.g. {\"slurm_conf\": \"/etc/slurm/slurm.conf\", \"partition\": "
                "\"timeshare\", \"repair_command\": \"scontrol reboot {host}\"}; import the "
                "hosts with <code>manage.py slurm_sync CLUSTER</code>. The grace period above "
                "is the time between TERM and the cancel of a preempted job."
            ),
        }),
        ("Utilization and idle GPUs", {
            "fields": ["telemetry", "idle_threshold", "idle_period", "preempt_idle"],
            "description": (
                "Where GPU busy fractions come from: the simulated fleet's profiles, or "
                "Prometheus scraping NVIDIA's dcgm-exporter (DCGM_FI_DEV_GPU_UTIL with Hostname "
                "and gpu labels) at PROMETHEUS_URL, or backend_config[\"prometheus_url\"]. A "
                "run below the idle threshold for the idle period is flagged idle; with "
                "preempt_idle, allocated ones are preempted once past their minimum runtime."
            ),
        }),
    ]

    def save_model(self, request, obj, form, change):
        if obj.backend == "slurm":
            config = dict(obj.backend_config or {})
            config.setdefault("partition", "timeshare")
            obj.backend_config = config
        if change and "backend" in form.changed_data:
            try:
                retired = switch_backend(obj, obj.backend, backend_for(obj).known_hosts(),
                                         request.user)
            except BackendUnavailable as error:
                self.message_user(request, f"Hosts not checked against the new backend "
                                  f"({error}): run manage.py slurm_sync {obj.name}.",
                                  messages.WARNING)
            else:
                if retired:
                    self.message_user(request, "Retired (unknown to the new backend): "
                                      + " ".join(retired), messages.INFO)
        super().save_model(request, obj, form, change)


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "gpus", "group", "state"]
    list_filter = ["cluster", "state"]
