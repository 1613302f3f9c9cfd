from axes.helpers import get_cool_off, get_failure_limit
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from budgets import services
from budgets.models import ChangeRequest
from budgets.permissions import roles
from fleet.models import Cluster
from portal import time_zones
from portal.api.authentication import LOCKED_OUT
from portal.forms import SettingsForm
from portal.models import UserSettings
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


@login_required
@require_http_methods(["GET", "POST"])
def user_settings(request):
    """The user's own settings: the time zone times are shown in."""
    saved = UserSettings.objects.filter(user=request.user).first()
    form = SettingsForm(request.POST or None, initial={"time_zone": saved.time_zone if saved
                                                        else ""},
                        browser_zone=time_zones.browser_zone(request))
    if request.method == "POST" and form.is_valid():
        zone = form.cleaned_data["time_zone"]
        UserSettings.objects.update_or_create(user=request.user, defaults={"time_zone": zone})
        if zone:
            request.session[time_zones.SESSION_KEY] = zone
        else:
            request.session.pop(time_zones.SESSION_KEY, None)
        messages.success(request, f"Times are now shown in {zone or 'your browser’s zone'}.")
        return redirect("settings")
    status = 422 if request.method == "POST" else 200
    return render(request, "portal/settings.html", {"form": form}, status=status)


def locked_out(request, original_response=None, credentials=None):
    """django-axes' answer once an address is locked out: JSON under /api/ like every API
    error, the page that says how long otherwise."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": LOCKED_OUT, "field": None}, status=429)
    context = {
        "failure_limit": get_failure_limit(request, credentials),
        "username": (credentials or {}).get("username") or request.POST.get("username", ""),
        "cooloff": get_cool_off(request),
    }
    return render(request, "registration/locked_out.html", context, status=429)
