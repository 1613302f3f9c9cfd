from rest_framework.routers import SimpleRouter

from scheduler.api import views

router = SimpleRouter()
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("hosts", views.HostViewSet, basename="host")

urlpatterns = router.urls
