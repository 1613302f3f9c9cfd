"""Every API error is JSON with one readable ``detail`` (and ``field`` when it is about one
input field):

* ``ServiceError`` (a service refused: bad input, impossible action)                   -> 400
* ``ConflictError`` or ``Conflict`` (someone changed it since you read it)             -> 409
* ``PermissionDenied`` (the same rules as the portal)                                  -> 403
* serializer validation -> 400 with the first message in ``detail``, all in ``errors``
"""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from common.errors import ConflictError, ServiceError


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object changed since you read it; read it again and retry."
    default_code = "conflict"


def _error(detail, field=None, code=status.HTTP_400_BAD_REQUEST, **extra) -> Response:
    set_rollback()
    body = {"detail": str(detail), "field": field, **extra}
    return Response(body, status=code)


def _first(errors, prefix=""):
    """(field, message) of the first validation error in DRF's nested error structure."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            name = key if key != "non_field_errors" else ""
            return _first(value, f"{prefix}.{name}" if prefix and name else prefix or name)
    if isinstance(errors, list) and errors:
        return _first(errors[0], prefix)
    return (prefix or None), str(errors)


def exception_handler(exc, context):
    if isinstance(exc, ConflictError):
        return _error(exc.message, exc.field, status.HTTP_409_CONFLICT)
    if isinstance(exc, ServiceError):
        return _error(exc.message, exc.field)
    if isinstance(exc, DjangoPermissionDenied):
        message = str(exc) or exceptions.PermissionDenied.default_detail
        return _error(message, code=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, Http404):
        return _error(str(exc) or "Not found.", code=status.HTTP_404_NOT_FOUND)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug: Django's 500 handling takes over
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first(exc.detail)
        label = f"{field}: " if field else ""
        response.data = {"detail": f"{label}{message}", "field": field, "errors": exc.detail}
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"detail": str(response.data["detail"]), "field": None}
    return response
