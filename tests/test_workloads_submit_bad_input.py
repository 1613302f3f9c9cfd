"""Bad input through the submit form: the error lands on the field, the answer is 422, and
nothing is written (no workload, no event)."""

import pytest
from django.urls import reverse
from fixtures_scheduler import form_data

NEW = reverse("scheduler:workload_create")


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        # h100: two hosts of 5 GPUs, 10 at most on whole hosts.
        ({"gpus": "11"}, "gpus", "11 GPUs can never be placed: the cluster has 10 GPUs"),
        ({"gpus": "0"}, "gpus", "greater than or equal to 1"),
        ({"gpus": "-2"}, "gpus", "greater than or equal to 1"),
        ({"gpus": "two"}, "gpus", "Enter a whole number"),
        # h100's maximum is the default 8 h = 480 minutes.
        ({"min_runtime": "481"}, "min_runtime", "between 0 and 8 h"),
        ({"min_runtime": "8:01"}, "min_runtime", "between 0 and 8 h"),
        ({"min_runtime": "-5"}, "min_runtime", "not negative"),
        ({"min_runtime": "-0:30"}, "min_runtime", "not negative"),
        ({"min_runtime": "an hour"}, "min_runtime", "minutes (e.g. 90) or hours:minutes"),
        ({"min_runtime": "1:75"}, "min_runtime", "minutes (e.g. 90) or hours:minutes"),
        ({"min_runtime": "1.5"}, "min_runtime", "minutes (e.g. 90) or hours:minutes"),
        ({"min_runtime": ""}, "min_runtime", "required"),
        ({"expected_duration": "0"}, "expected_duration", "positive duration"),
        ({"expected_duration": "soon"}, "expected_duration", "minutes (e.g. 90)"),
        # 35,791,395 minutes is past the 2**31 - 1 seconds a duration column holds.
        ({"expected_duration": "35791395"}, "expected_duration", "too long: at most 596,523 h"),
        ({"expected_duration": "596524:00"}, "expected_duration", "too long: at most 596,523 h"),
        ({"name": ""}, "name", "required"),
        ({"name": "x" * 101}, "name", "at most 100 characters"),
        ({"command": ""}, "command", "required"),
        ({"command": "   "}, "command", "required"),
        ({"cluster": "999"}, "cluster", "Select a valid choice"),
    ],
)
def test_bad_field_is_refused_on_that_field(fleet, client_for, nothing_written, overrides,
                                            field, words):
    with nothing_written():
        response = client_for("researcher").post(NEW, form_data(fleet, **overrides))
    assert response.status_code == 422
    errors = response.context["form"].errors
    assert list(errors) == [field]
    assert words in " ".join(errors[field])
    assert words.replace("'", "&#x27;") in response.content.decode()


def test_budget_you_are_not_a_member_of(fleet, client_for, nothing_written):
    with nothing_written():
        response = client_for("researcher").post(
            NEW, form_data(fleet, budget=fleet.org.proj_a2.pk)
        )
    assert response.status_code == 422
    assert response.context["form"].errors["budget"] == [
        "You are not a member of that budget: charge one of your own budget leaves."
    ]


def test_budget_that_is_not_a_leaf(fleet, client_for, nothing_written):
    """The researcher belongs to proj-a1, but proj-a1 has a child: work goes to exp-1."""
    with nothing_written():
        response = client_for("researcher").post(
            NEW, form_data(fleet, budget=fleet.org.proj_a1.pk)
        )
    assert response.status_code == 422
    assert list(response.context["form"].errors) == ["budget"]


@pytest.mark.parametrize("persona", ["outsider", "pi", "ceo", "operator"])
def test_people_without_a_leaf_cannot_submit(fleet, client_for, nothing_written, persona):
    with nothing_written():
        response = client_for(persona).post(NEW, form_data(fleet))
    assert response.status_code == 422
    assert list(response.context["form"].errors) == ["budget"]


def test_allocated_time_on_a_cluster_without_shares(fleet, client_for, nothing_written):
    """exp-1 holds no shares on b200: asking for protected time there is refused, never
    silently downgraded to unallocated."""
    with nothing_written():
        response = client_for("researcher").post(
            NEW, form_data(fleet, cluster=fleet.b200.pk, min_runtime="30")
        )
    assert response.status_code == 422
    errors = response.context["form"].errors
    assert list(errors) == ["min_runtime"]
    assert "prog-a/proj-a1/exp-1 has no allocation on this cluster" in errors["min_runtime"][0]


def test_b200_has_its_own_maximum(fleet, client_for, nothing_written):
    """b200's maximum min_runtime is 4 h: 4:01 is refused even as the first problem."""
    with nothing_written():
        response = client_for("researcher").post(
            NEW, form_data(fleet, cluster=fleet.b200.pk, min_runtime="4:01")
        )
    assert response.status_code == 422
    assert "between 0 and 4 h" in response.context["form"].errors["min_runtime"][0]


def test_the_form_keeps_what_was_typed(fleet, client_for):
    response = client_for("researcher").post(NEW, form_data(fleet, gpus="11", min_runtime="1:30"))
    body = response.content.decode()
    assert 'value="1:30"' in body
    assert 'value="11"' in body


def test_refused_submission_page_is_not_a_redirect(fleet, client_for):
    response = client_for("researcher").post(NEW, form_data(fleet, gpus="11"))
    assert response.status_code == 422
    assert reverse("scheduler:workloads") in response.content.decode()
