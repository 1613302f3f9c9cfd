"""/api/: every app's endpoints, the OpenAPI schema, its docs page and the token page."""

from django.urls import include, path, re_path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularSwaggerSplitView,
)
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.reverse import reverse

from common.api.exceptions import exception_handler
from portal.api import tokens

app_name = "api"

ENDPOINTS = ["workloads", "budgets", "requests", "usage", "clusters", "hosts"]


@extend_schema(exclude=True)
@api_view(["GET"])
@permission_classes([AllowAny])
def root(request):
    """Where everything is."""
    links = {name: request.build_absolute_uri(f"/api/{name}/") for name in ENDPOINTS}
    links["schema"] = reverse("api:schema", request=request)
    links["docs"] = reverse("api:docs", request=request)
    links["tokens"] = reverse("api:tokens", request=request)
    return Response(links)


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE"])
@permission_classes([AllowAny])
def not_found(request, rest=""):
    """Unknown URLs under /api/ answer JSON like everything else there."""
    from django.http import Http404

    return exception_handler(Http404(f"No API endpoint at {request.path}."), {})



urlpatterns = [
    path("", root, name="root"),
    path("", include("scheduler.api.urls")),
    path("", include("budgets.api.urls")),
    path("", include("reports.api.urls")),
    # The schema and its docs are public on purpose (README, "The API"): they describe what
    # the API accepts, never any data, and a newcomer reads them before having a token.
    path("schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    # The split view serves Swagger UI's start-up code as a script file of its own: the
    # Content-Security-Policy allows no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(
        url_name="api:schema", permission_classes=[AllowAny]), name="docs"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.revoke, name="token_revoke"),
    re_path(r"^(?P<rest>.*)$", not_found),
]
