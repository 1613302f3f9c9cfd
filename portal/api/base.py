"""What every API view shares beyond DRF's settings."""

from rest_framework.exceptions import ValidationError


def _has_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


class RejectNulMixin:
    """NUL characters in the path, the query or the body are refused with a 400 before any
    lookup: PostgreSQL cannot compare or store them (it would be a 500)."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        sources = {"path": kwargs, "query": request.query_params.lists()}
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            sources["body"] = request.data
        for where, value in sources.items():
            if _has_nul(list(value) if where == "query" else value):
                raise ValidationError({where: ["NUL characters are not allowed."]})
