"""Statements written once from the models (``common.statements``): lookups by a unique
column (``by_unique``, ``common.api.base.UniqueSlugField``) give the same rows, answers and
errors as the ORM's ``get`` and DRF's ``SlugRelatedField``, and ``insert`` writes what
``save()`` writes; the ORM and DRF serve as the reference."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db.models import signals
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from budgets.models import Allocation, BudgetNode
from common.api.base import UniqueSlugField
from common.models import IdempotencyKey
from common.statements import by_unique, insert
from fleet.models import Cluster
from scheduler.models import Event, Workload


def outcome(field, data):
    """What a field makes of ``data``: the instance's primary key, or its error messages."""
    try:
        return field.run_validation(data).pk
    except ValidationError as error:
        return [str(message) for message in error.detail]


def both(queryset, slug_field):
    return (UniqueSlugField(slug_field=slug_field, queryset=queryset),
            serializers.SlugRelatedField(slug_field=slug_field, queryset=queryset))


@pytest.mark.parametrize("model, field, value", [
    (BudgetNode, "path", "org/prog-a/proj-a1"),
    (BudgetNode, "path", "org"),
    (Cluster, "name", "h100"),
    (User, "username", "pi"),  # dates and booleans, which SQLite keeps as text and integers
])
def test_a_row_read_by_its_unique_column_is_the_one_the_orm_reads(org, model, field, value):
    User.objects.filter(username="pi").update(last_login="2026-11-30T10:00:00Z")
    found = by_unique(model, field, value)
    expected = model.objects.get(**{field: value})
    for concrete in model._meta.concrete_fields:
        assert getattr(found, concrete.attname) == getattr(expected, concrete.attname), concrete
    assert not found._state.adding and found._state.db == expected._state.db


def test_no_row_is_none(org):
    assert by_unique(BudgetNode, "path", "org/nowhere") is None


def test_a_column_that_is_not_unique_is_refused(org):
    with pytest.raises(ValueError, match="not unique"):
        by_unique(BudgetNode, "slug", "org")


@pytest.mark.parametrize("data", [
    "org/prog-a/proj-a1", "org/prog-b", "org/nowhere", "", "x" * 600, 7, 3.5, True,
    ["org"], {"path": "org"},
])
def test_the_submit_fields_answer_as_drf_answers(org, data):
    for queryset, slug_field in ((BudgetNode.objects.all(), "path"),
                                 (Cluster.objects.all(), "name")):
        ours, drf = both(queryset, slug_field)
        assert outcome(ours, data) == outcome(drf, data)


def test_an_existing_row_outside_an_empty_queryset_does_not_exist(org):
    ours, drf = both(BudgetNode.objects.none(), "path")
    assert outcome(ours, "org/prog-a") == outcome(drf, "org/prog-a") == [
        "Object with path=org/prog-a does not exist."]


def test_a_filtered_queryset_keeps_its_filter(org):
    projects = BudgetNode.objects.filter(kind=BudgetNode.Kind.PROJECT)
    ours, drf = both(projects, "path")
    assert outcome(ours, "org/prog-a") == outcome(drf, "org/prog-a") == [
        "Object with path=org/prog-a does not exist."]
    assert outcome(ours, "org/prog-a/proj-a2") == org.proj_a2.pk


def workload_of(org, name):
    return Workload(name=name, owner=org.researcher, budget=org.proj_a1, cluster=org.cluster,
                    gpus=2, min_runtime=600, resumable=True, command="python train.py",
                    expected_duration=None, submitted=datetime(2026, 11, 30, 12, tzinfo=UTC))


def test_an_inserted_row_reads_back_as_the_one_save_writes(org):
    ours, theirs = workload_of(org, "ours"), workload_of(org, "theirs")
    assert insert(ours) is True
    theirs.save()
    assert ours.pk is not None and not ours._state.adding and ours._state.db == "default"
    ours, theirs = Workload.objects.get(pk=ours.pk), Workload.objects.get(pk=theirs.pk)
    for field in Workload._meta.concrete_fields:
        if field.name not in ("id", "name"):
            assert getattr(ours, field.attname) == getattr(theirs, field.attname), field.name


def test_an_insert_applies_each_fields_pre_save(org):
    # Allocation.updated is auto_now: only the field's pre_save sets it
    before = datetime.now(UTC) - timedelta(seconds=1)
    allocation = Allocation(node=org.proj_b1, cluster=Cluster.objects.create(name="b200"),
                            shares=5)
    insert(allocation)
    assert Allocation.objects.get(pk=allocation.pk).updated >= before


def test_an_insert_sends_the_signals_save_sends(org):
    heard = []

    def pre(sender, instance, **kwargs):
        heard.append(("pre_save", instance.pk))

    def post(sender, instance, created, **kwargs):
        heard.append(("post_save", created, instance.pk))

    signals.pre_save.connect(pre, sender=Event)
    signals.post_save.connect(post, sender=Event)
    try:
        workload = workload_of(org, "heard")
        insert(workload)
        event = Event(workload=workload, kind=Event.Kind.SUBMITTED, reason="submitted")
        insert(event)
    finally:
        signals.pre_save.disconnect(pre, sender=Event)
        signals.post_save.disconnect(post, sender=Event)
    assert heard == [("pre_save", None), ("post_save", True, event.pk)]


def test_a_taken_unique_value_writes_nothing_and_says_so(org):
    fields = ("user", "key")
    first = IdempotencyKey(user=org.pi, key="k-1", fingerprint="a")
    assert insert(first, unless_taken=fields) is True
    again = IdempotencyKey(user=org.pi, key="k-1", fingerprint="b")
    assert insert(again, unless_taken=fields) is False
    assert again.pk is None and again._state.adding
    assert list(IdempotencyKey.objects.values_list("fingerprint", flat=True)) == ["a"]
    other_user = IdempotencyKey(user=org.lead, key="k-1", fingerprint="c")
    assert insert(other_user, unless_taken=fields) is True
