from django.urls import path

from scheduler import views

app_name = "scheduler"

urlpatterns = [
    path("workloads/", views.workload_list, name="workloads"),
    path("workloads/export.csv", views.workload_export, name="workload_export"),
    path("workloads/new/", views.workload_create, name="workload_create"),
    path("workloads/<int:pk>/", views.workload_detail, name="workload"),
    path("workloads/<int:pk>/cancel/", views.workload_cancel, name="workload_cancel"),
    path("hosts/", views.cluster_hosts, name="hosts_default"),
    path("clusters/<slug:cluster>/hosts/", views.cluster_hosts, name="hosts"),
    path("hosts/<int:pk>/", views.host_detail, name="host"),
    path("hosts/<int:pk>/drain/", views.host_drain, name="host_drain"),
    path("hosts/<int:pk>/return/", views.host_return, name="host_return"),
    path("hosts/<int:pk>/repair/", views.host_repair, name="host_repair"),
]
