import functools

from django.conf import settings
from django.db import connection, models
from django.http import HttpResponse, HttpResponseRedirect
from django.utils import timezone

REPLAY_HEADER = "Idempotent-Replayed"


class IdempotencyKey(models.Model):
    """A request a client may send more than once (a retry after a lost connection, a double
    click) and that must take effect once: the first answer, kept to be given again.

    The row is written in the same transaction as whatever the request changed, so an answer
    is kept exactly when its effects are; a second request with the same key waits on the
    unique index until the first commits, then gets the kept answer."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # sha256 of what the request asked for: the same key with another request is a mistake.
    fingerprint = models.CharField(max_length=64)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    status = models.PositiveSmallIntegerField(null=True)
    content_type = models.CharField(max_length=100, blank=True)
    location = models.CharField(max_length=500, blank=True)
    body = models.BinaryField(default=b"")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="one_idempotency_key_per_user")
        ]

    def __str__(self):
        return f"{self.user_id}:{self.key}"

    def remember(self, response: HttpResponse) -> None:
        """Keep the answer, in a statement written once: every POST with a key keeps one,
        and composing ``save(update_fields=...)`` cost the ORM more CPU than running it."""
        self.status = response.status_code
        self.content_type = response.get("Content-Type", "")
        self.location = response.get("Location", "")
        self.body = b"" if response.streaming else response.content
        sql, fields = _remember_sql()
        values = [field.get_db_prep_save(getattr(self, field.attname), connection)
                  for field in fields]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*values, self.pk])

    def replay(self) -> HttpResponse:
        if self.location:
            response = HttpResponseRedirect(self.location)
            response.status_code = self.status
        else:
            response = HttpResponse(
                bytes(self.body), status=self.status, content_type=self.content_type or None
            )
        response[REPLAY_HEADER] = "true"
        return response


@functools.cache
def _remember_sql() -> tuple[str, list[models.Field]]:
    meta = IdempotencyKey._meta
    fields = [meta.get_field(name) for name in ("status", "content_type", "location", "body")]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    return (f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s",
            fields)
