from django.contrib import admin

from scheduler.models import Cluster, Host


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "gpu_type", "max_min_runtime", "window", "grace"]


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "gpus", "group", "state"]
    list_filter = ["cluster", "state"]
