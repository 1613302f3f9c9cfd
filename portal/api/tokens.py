"""/api/tokens/: a user creates, lists and revokes their own API tokens (shown once)."""

from datetime import timedelta

from django import forms
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from portal.models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. 'laptop CLI'.")
    days = forms.IntegerField(
        min_value=1, max_value=3650, required=False, label="Expires after (days)",
        help_text="Empty: never.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request):
    form = TokenForm(request.POST or None)
    created = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            token, created = ApiToken.objects.create_token(request.user, form.cleaned_data["name"])
            if days := form.cleaned_data["days"]:
                token.expires = timezone.now() + timedelta(days=days)
                token.save(update_fields=["expires"])
            form = TokenForm()
        else:
            status = 422
    context = {
        "form": form,
        "created": created,
        "tokens": ApiToken.objects.filter(user=request.user),
        "now": timezone.now(),
        "api_url": request.build_absolute_uri("/api/"),
    }
    return render(request, "api/tokens.html", context, status=status)


@login_required
@require_POST
def revoke(request, pk):
    get_object_or_404(ApiToken, pk=pk, user=request.user).delete()
    return redirect("api:tokens")
