from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from notifications import services
from notifications.forms import PreferencesForm
from notifications.models import Notification

PAGE_SIZE = 50


@login_required
def inbox(request):
    """Everything the user was told in the app, newest first; unread ones stand out."""
    only_unread = request.GET.get("unread") == "1"
    notifications = services.inbox(request.user)
    if only_unread:
        notifications = notifications.filter(read_at=None)
    page = Paginator(notifications, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "notifications/inbox.html", {
        "page": page, "only_unread": only_unread,
        "unread_notifications": services.unread_count(request.user),
    })


@login_required
@require_POST
def toggle_read(request, pk):
    """Mark one notification read (or unread again); htmx swaps its row and the bell."""
    notification = get_object_or_404(services.inbox(request.user), pk=pk)
    if notification.read_at is None:
        services.mark_read(request.user, [pk])
    else:
        services.mark_unread(request.user, [pk])
    if not request.htmx:
        return redirect("notifications:inbox")
    return render(request, "notifications/_item.html", {
        "n": Notification.objects.get(pk=pk),
        "unread_notifications": services.unread_count(request.user),
        "swap_bell": True,
    })


@login_required
@require_POST
def read_all(request):
    count = services.mark_read(request.user)
    messages.success(request, f"{count} notification{'s' if count != 1 else ''} marked read.")
    return redirect("notifications:inbox")


@login_required
def open_notification(request, pk):
    """Follow a notification's link, marking it read on the way."""
    notification = get_object_or_404(services.inbox(request.user), pk=pk)
    services.mark_read(request.user, [pk])
    return redirect(notification.link)


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request):
    form = PreferencesForm(request.POST or None, user=request.user)
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, "Notification preferences saved.")
            return redirect("notifications:preferences")
        return render(request, "notifications/preferences.html", {"form": form}, status=422)
    return render(request, "notifications/preferences.html", {"form": form})
