"""What the apps' endpoints need from the fleet: the cluster a request names."""

from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError

from fleet.models import Cluster

CLUSTER = OpenApiParameter(
    "cluster", str,
    description="Cluster name (default: the first cluster created, as in the portal).",
)


def cluster_from(request) -> Cluster:
    name = request.query_params.get("cluster")
    clusters = Cluster.objects.with_gpu_count().order_by("pk")
    if name:
        cluster = clusters.filter(name=name).first()
        if cluster is None:
            raise ValidationError({"cluster": [f"No cluster named {name!r}."]})
        return cluster
    cluster = clusters.first()
    if cluster is None:
        raise ValidationError({"cluster": ["There is no cluster yet."]})
    return cluster
