from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from budgets import services
from budgets.models import ChangeRequest
from budgets.permissions import roles
from fleet.models import Cluster
from scheduler.models import Workload
from scheduler.status import tick_outage


@login_required
def home(request):
    """Where the user stands: the budgets they manage or charge, on every cluster."""
    who = roles(request.user)
    mine = set(who.managed) | set(who.member_of)
    clusters, outages = [], []
    for cluster in Cluster.objects.with_gpu_count():
        rows = [row for row in services.tree_rows(cluster) if row.node.path in mine]
        clusters.append((cluster, rows))
        outages.append(tick_outage(cluster))
    context = {
        "roles": who,
        "clusters": clusters,
        "tick_outages": [o for o in outages if o],
        "my_requests": ChangeRequest.objects.filter(requested_by=request.user)
        .select_related("node", "cluster")[:5],
        "to_decide": ChangeRequest.objects.restrict(request.user, "decide")
        .select_related("node", "cluster", "requested_by")[:5],
        "my_workloads": Workload.objects.filter(
            owner=request.user, state__in=Workload.ACTIVE_STATES
        ).select_related("budget", "cluster")[:10],
    }
    return render(request, "portal/home.html", context)
