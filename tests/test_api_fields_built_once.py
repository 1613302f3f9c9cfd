"""Serializers whose fields are built once per class (``common.api.base.FieldsBuiltOnce``):
each instance still gets fields of its own, bound to it."""

from rest_framework import serializers

from common.api.base import FieldsBuiltOnce


class Tagged(FieldsBuiltOnce, serializers.Serializer):
    name = serializers.CharField(max_length=10)
    tags = serializers.ListField(child=serializers.CharField())


def test_each_instance_has_its_own_fields_bound_to_it():
    first, second = Tagged(data={}), Tagged(data={})
    assert first.fields["name"] is not second.fields["name"]
    assert first.fields["name"].parent is first
    assert second.fields["name"].parent is second


def test_a_field_holding_a_child_is_copied_with_its_child():
    first, second = Tagged(), Tagged()
    first_child, second_child = first.fields["tags"].child, second.fields["tags"].child
    assert first_child is not second_child
    assert first_child.parent is first.fields["tags"]
    assert second_child.root is second


def test_a_field_changed_on_one_instance_is_unchanged_on_the_next():
    first = Tagged()
    first.fields["name"].max_length = 3
    assert Tagged().fields["name"].max_length == 10


def test_fields_validate_as_declared():
    ok = Tagged(data={"name": "train", "tags": ["a", "b"]})
    assert ok.is_valid(), ok.errors
    too_long = Tagged(data={"name": "x" * 11, "tags": []})
    assert not too_long.is_valid()
    assert "name" in too_long.errors
