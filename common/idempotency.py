"""Requests that take effect once however often they arrive: the API's ``Idempotency-Key``
header (``IdempotencyMiddleware``) and the submit form's one-time token both go through
``once``."""

import hashlib
from collections.abc import Callable
from datetime import timedelta

from django.db import transaction
from django.http import HttpResponse, JsonResponse
from django.http.request import RawPostDataException
from django.utils import timezone
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.settings import api_settings

from common.errors import ConflictError
from common.models import IdempotencyKey
from common.statements import insert

HEADER = "Idempotency-Key"
KEY_MAX = IdempotencyKey._meta.get_field("key").max_length
KEPT_FOR = timedelta(hours=24)
_ONE_PER_USER = next(c for c in IdempotencyKey._meta.constraints
                     if c.name == "one_idempotency_key_per_user")


class KeyReused(ConflictError):
    """The key was already used for a different request."""


def fingerprint(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()


def once(
    user,
    key: str,
    request_fingerprint: str,
    respond: Callable[[], HttpResponse],
    *,
    keep: Callable[[HttpResponse], bool],
) -> HttpResponse:
    """``respond()`` at most once per user and key; later calls get the first answer.

    The key is claimed and the answer kept in the transaction that wraps ``respond``. An
    answer ``keep`` refuses (a crash, or a form sent back with errors) is rolled back with the
    claim, so the same key may try again. Raises ``KeyReused`` for the same key with another
    fingerprint."""
    with transaction.atomic():
        claim, first = _claim(user, key, request_fingerprint)
        if first is not None:
            if first.fingerprint != request_fingerprint:
                raise KeyReused(
                    f"This {HEADER} was already used for a different request; use a new key "
                    "for a new request."
                )
            return first.replay()
        response = respond()
        if keep(response):
            claim.remember(response)
        else:
            transaction.set_rollback(True)
    return response


def _claim(user, key: str, request_fingerprint: str):
    """``(claim, None)`` when this request holds the key (a new row, or an expired one taken
    over), else ``(None, first)``: the first request's row, to replay or refuse. Concurrent
    requests with one key queue on the row (the unique index, then the row lock of the
    take-over), so exactly one of them runs."""
    while True:
        claim = IdempotencyKey(user=user, key=key, fingerprint=request_fingerprint)
        # one statement, not an insert inside a savepoint that catches the duplicate (three)
        if insert(claim, unless_taken=_ONE_PER_USER.fields):
            return claim, None
        first = IdempotencyKey.objects.filter(user=user, key=key).first()
        if first is None:
            continue  # purged meanwhile: claim it afresh
        if first.created >= timezone.now() - KEPT_FOR:
            return None, first
        # not purged yet, but forgotten: taken over by compare-and-set, so of two requests
        # reusing it at once one runs and the other then finds its answer
        now = timezone.now()
        taken = IdempotencyKey.objects.filter(pk=first.pk, created=first.created).update(
            created=now, fingerprint=request_fingerprint, status=None, content_type="",
            location="", body=b"",
        )
        if taken:
            first.refresh_from_db()
            return first, None


def purge_expired(now) -> int:
    """Delete the keys older than KEPT_FOR (hourly, ``common.tasks``): a request carries no
    cleaning of its own. Returns how many were deleted."""
    deleted, _ = IdempotencyKey.objects.filter(created__lt=now - KEPT_FOR).delete()
    return deleted


class IdempotencyMiddleware:
    """A POST under /api/ with an ``Idempotency-Key`` header runs once per user and key: the
    same key with the same body (a retry) gets the first answer again, marked with the
    ``Idempotent-Replayed`` header; with a different body it is a 409. Answers of 500 and
    above are not kept (their effects are rolled back), so a retry runs again."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = request.headers.get(HEADER)
        if request.method != "POST" or key is None or not request.path.startswith("/api/"):
            return self.get_response(request)
        if not key.strip() or len(key) > KEY_MAX or not key.isprintable():
            return JsonResponse(
                {"detail": f"{HEADER} must be 1 to {KEY_MAX} printable characters.",
                 "field": HEADER},
                status=400,
            )
        request_fingerprint = fingerprint(request.path, _body(request))
        user = _api_user(request)
        if user is None:
            return self.get_response(request)  # the view answers 401 or 403 itself
        try:
            return once(
                user, key, request_fingerprint,
                lambda: self.get_response(request),
                keep=lambda response: response.status_code < 500,
            )
        except KeyReused as error:
            return JsonResponse({"detail": error.message, "field": HEADER}, status=409)


def _body(request) -> bytes:
    """The request's body, or for a multipart form already parsed (the NUL check reads every
    form, and then the raw bytes are gone) its fields and files, which stand for it."""
    try:
        return request.body
    except RawPostDataException:
        files = sorted((name, f.name, f.size) for name, f in request.FILES.items())
        return repr((sorted(request.POST.lists()), files)).encode()


def _api_user(request):
    """Who the API will take the request to be from: the same authentication classes."""
    drf_request = Request(request)
    for authentication in api_settings.DEFAULT_AUTHENTICATION_CLASSES:
        try:
            found = authentication().authenticate(drf_request)
        except APIException:
            return None
        if found is not None:
            return found[0]
    return None
