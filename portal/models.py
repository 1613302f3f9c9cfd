"""API tokens: a user creates them on /api/tokens/ (or `manage.py create_token USER`) and the
CLI and scripts send them as ``Authorization: Bearer <token>``.

Only a SHA-256 digest of a token is stored (like a password, but a token is long and random,
so a plain digest is enough): whoever reads the database cannot use it. The token itself is
shown once, when it is created. ``prefix`` lets its owner tell their tokens apart.
"""

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "ts_"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def create_token(self, user, name: str) -> tuple["ApiToken", str]:
        """A new token of ``user``; returns the row and the secret (shown once)."""
        key = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = self.create(user=user, name=name, prefix=key[:10], digest=digest(key))
        return token, key

    def active(self):
        return self.filter(models.Q(expires=None) | models.Q(expires__gt=timezone.now()))


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What it is for, e.g. 'laptop CLI'.")
    prefix = models.CharField(max_length=10, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"{self.prefix}… ({self.name}) of {self.user}"


class UserSettings(models.Model):
    """What a user set for themselves. ``time_zone`` empty: the zone their browser reports
    (portal.time_zones)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="portal_settings"
    )
    time_zone = models.CharField(
        max_length=64, blank=True,
        help_text="An IANA zone such as Europe/Paris; empty: your browser's.",
    )

    def __str__(self):
        return f"settings of {self.user}"
