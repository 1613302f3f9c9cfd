"""What every API view and serializer shares beyond DRF's settings."""

import copy

from django.utils.encoding import smart_str
from rest_framework.exceptions import ValidationError
from rest_framework.relations import SlugRelatedField
from rest_framework.serializers import BaseSerializer

from common.statements import by_unique


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


class FieldsBuiltOnce:
    """For a serializer whose fields follow from its class alone: DRF builds them again for
    every instance (a ModelSerializer from the model, any serializer by re-creating each
    declared field from its arguments), most of the CPU of answering with a workload. Here
    they are built once per class, and each instance gets copies. A plain field is copied
    shallowly: it is never bound itself, and binding a copy only sets attributes on the
    copy. A field that holds fields of its own (a nested serializer, a list or dict field's
    child, a many-related field's child relation, each bound to its parent when created) is
    copied whole, as DRF does."""

    def get_fields(self):
        built = type(self).__dict__.get("_fields_built")
        if built is None:  # two threads building it at once build the same thing
            built = super().get_fields()
            type(self)._fields_built = built
        return {
            name: copy.deepcopy(field) if _holds_fields(field) else copy.copy(field)
            for name, field in built.items()
        }


def _holds_fields(field) -> bool:
    return isinstance(field, BaseSerializer) or hasattr(field, "child") or hasattr(
        field, "child_relation")


class UniqueSlugField(SlugRelatedField):
    """A ``SlugRelatedField`` on a unique column whose queryset is a whole table or none of it
    (as ``restrict`` gives for reading): the row is read by a statement written once
    (``common.statements.by_unique``), not composed by the ORM for every request, with the
    same answers and the same errors. Any other queryset is asked as DRF asks it."""

    def to_internal_value(self, data):
        queryset = self.get_queryset()
        if not _whole_table(queryset):
            return super().to_internal_value(data)
        try:
            found = None if queryset.query.is_empty() else by_unique(
                queryset.model, self.slug_field, data)
        except (TypeError, ValueError):
            self.fail("invalid")
        if found is None:
            self.fail("does_not_exist", slug_name=self.slug_field, value=smart_str(data))
        return found


def _whole_table(queryset) -> bool:
    """Whether ``queryset`` reads every row of its model's table as plain instances (or none:
    ``none()``), so that a lookup by a unique column needs nothing of it but the model."""
    query = queryset.query
    return (
        (not query.where or query.is_empty())
        and not query.select_related
        and not query.annotations
        and query.deferred_loading == (frozenset(), True)
        and not queryset._prefetch_related_lookups
    )
