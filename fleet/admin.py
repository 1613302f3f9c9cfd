from django.contrib import admin

from fleet.models import Cluster, Host


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "gpu_type", "backend", "max_min_runtime", "window", "grace",
                    "unallocated_grace", "pass_interval", "backend_error"]
    list_filter = ["backend"]
    readonly_fields = ["backend_error", "backend_error_at"]
    fieldsets = [
        (None, {"fields": ["name", "gpu_type", "description", "created"]}),
        ("Scheduling contract", {"fields": ["max_min_runtime", "window", "hysteresis", "grace",
                                            "unallocated_grace", "pass_interval"]}),
        ("Fleet backend", {
            "fields": ["backend", "backend_config", "backend_error", "backend_error_at"],
            "description": (
                "Simulated (the default, no real hosts) or Slurm. For Slurm, backend_config "
                "holds e.g. {\"slurm_conf\": \"/etc/slurm/slurm.conf\", \"partition\": "
                "\"timeshare\", \"repair_command\": \"scontrol reboot {host}\"}; import the "
                "hosts with <code>manage.py slurm_sync CLUSTER</code>. The grace period above "
                "is the time between TERM and the cancel of a preempted job."
            ),
        }),
    ]

    def save_model(self, request, obj, form, change):
        if obj.backend == "slurm":
            config = dict(obj.backend_config or {})
            config.setdefault("partition", "timeshare")
            obj.backend_config = config
        super().save_model(request, obj, form, change)


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "gpus", "group", "state"]
    list_filter = ["cluster", "state"]
