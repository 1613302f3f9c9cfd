"""``Authorization: Bearer <token>`` (``Token <token>`` is accepted too)."""

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from portal.models import ApiToken, digest

KEYWORDS = ("bearer", "token")
TOUCH_EVERY = timedelta(minutes=1)  # last_used is written at most this often per token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() not in KEYWORDS:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid Authorization header: expected 'Bearer <token>'."
            )
        try:
            key = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = (
            ApiToken.objects.active().select_related("user").filter(digest=digest(key)).first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or expired token.")
        now = timezone.now()
        if token.last_used is None or now - token.last_used > TOUCH_EVERY:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """How the schema (and Swagger UI's Authorize button) describes the token."""

    target_class = BearerTokenAuthentication
    name = "bearerToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from /api/tokens/ or `manage.py create_token USER`.",
        }
