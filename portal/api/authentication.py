"""``Authorization: Bearer <token>`` (``Token <token>`` is accepted too)."""

from datetime import timedelta

from axes.handlers.proxy import AxesProxyHandler
from django.contrib.auth.signals import user_login_failed
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from portal.models import ApiToken, active_token, digest

KEYWORDS = ("bearer", "token")
# Failed tokens count like failed logins (django-axes, settings.AXES_*), with no username: an
# address that tries too many wrong tokens is locked out for the cool-off time.
TOKEN_CREDENTIALS = {"username": None}
LOCKED_OUT = "Too many invalid tokens from your address: wait before trying again."
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
        django_request = getattr(request, "_request", request)  # /metrics passes Django's
        # The idempotency middleware authenticates before the view does: one lookup (and one
        # counted failure) per request, the same answer both times.
        if not hasattr(django_request, "_bearer_token"):
            try:
                django_request._bearer_token = self._check(django_request, header[1])
            except exceptions.APIException as refusal:
                django_request._bearer_token = refusal
        if isinstance(django_request._bearer_token, exceptions.APIException):
            raise django_request._bearer_token
        return django_request._bearer_token

    def _check(self, django_request, presented: bytes):
        if AxesProxyHandler.is_locked(django_request, TOKEN_CREDENTIALS):
            raise exceptions.Throttled(detail=LOCKED_OUT)
        try:
            key = presented.decode()
        except UnicodeError:
            key = None
        token = key and active_token(digest(key))
        if not token or not token.user.is_active:
            user_login_failed.send(
                sender=type(self), credentials=TOKEN_CREDENTIALS, request=django_request
            )
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
