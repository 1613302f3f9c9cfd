"""What every API view and serializer shares beyond DRF's settings."""

import copy

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
    """NUL characters in a parsed body are refused with a 400 before any lookup: PostgreSQL
    cannot compare or store them. (Paths, queries and forms: the portal's middleware.)"""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method not in ("GET", "HEAD", "OPTIONS") and _has_nul(request.data):
            raise ValidationError({"body": ["NUL characters are not allowed."]})


class ModelFieldsBuiltOnce:
    """For a ModelSerializer whose fields follow from its Meta alone: DRF works them out
    from the model again for every instance, half the CPU of answering with a workload.
    Here they are built once per class and copied, as DRF copies declared fields."""

    def get_fields(self):
        built = type(self).__dict__.get("_fields_built")
        if built is None:  # two threads building it at once build the same thing
            built = super().get_fields()
            type(self)._fields_built = built
        return copy.deepcopy(built)
