"""Bad shares and stale edits on the tree page: a field error with 422, nothing written."""

import pytest
from django.urls import reverse

from budgets.models import Allocation, AllocationChange


def tree_url(org):
    return reverse("budgets:tree", kwargs={"cluster": org.cluster.name})


@pytest.mark.parametrize(
    ("shares", "message"),
    [
        ("0", "greater than or equal to 1"),
        ("-5", "greater than or equal to 1"),
        ("abc", "Enter a whole number"),
        ("12.5", "Enter a whole number"),
        ("", "This field is required"),
        ("1000001", "less than or equal to 1000000"),
        ("99999999999999999999", "less than or equal to 1000000"),
    ],
)
def test_bad_shares_answer_422_with_a_field_error(org, client_for, htmx, unchanged, shares,
                                                  message):
    data = {"node": org.proj_a1.pk, "version": 1, "shares": shares, "reason": "x"}
    with unchanged():
        response = client_for("pi").post(tree_url(org), data, **htmx)
    assert response.status_code == 422
    assert message in response.content.decode()
    assert response.context["form"].errors["shares"]
    # The fragment keeps the row in edit mode so the manager can correct the value.
    assert 'name="shares"' in response.content.decode()


def test_bad_shares_without_htmx_answer_the_full_page_with_422(org, client_for, unchanged):
    data = {"node": org.proj_a1.pk, "version": 1, "shares": "0"}
    with unchanged():
        response = client_for("pi").post(tree_url(org), data)
    assert response.status_code == 422
    assert "<html" in response.content.decode()


def test_the_maximum_of_one_million_shares_is_accepted(org, client_for, shares_of):
    data = {"node": org.proj_a1.pk, "version": 1, "shares": "1000000"}
    assert client_for("pi").post(tree_url(org), data).status_code == 302
    assert shares_of(org.proj_a1) == 1_000_000


def test_unknown_node_is_404_and_nothing_changes(org, client_for, unchanged):
    with unchanged():
        response = client_for("pi").post(tree_url(org), {"node": 99999, "version": 1,
                                                         "shares": 5})
    assert response.status_code == 404


def test_stale_version_is_refused_with_a_clear_message(org, client_for, htmx, shares_of):
    pi = client_for("pi")
    first = pi.post(tree_url(org), {"node": org.proj_a1.pk, "version": 1, "shares": 80}, **htmx)
    assert first.status_code == 200
    changes = AllocationChange.objects.count()

    # A second form loaded before the first save still carries version 1.
    second = client_for("ceo").post(
        tree_url(org), {"node": org.proj_a1.pk, "version": 1, "shares": 20}, **htmx
    )
    assert second.status_code == 422
    assert (
        "Project A1 was changed to 80 shares since you loaded the page; reload and try again."
        in second.content.decode()
    )
    assert shares_of(org.proj_a1) == 80
    assert Allocation.objects.get(node=org.proj_a1, cluster=org.cluster).version == 2
    assert AllocationChange.objects.count() == changes


def test_edit_with_the_current_version_after_a_stale_one_succeeds(org, client_for, shares_of):
    pi = client_for("pi")
    pi.post(tree_url(org), {"node": org.proj_a1.pk, "version": 1, "shares": 80})
    response = pi.post(tree_url(org), {"node": org.proj_a1.pk, "version": 2, "shares": 90})
    assert response.status_code == 302
    assert shares_of(org.proj_a1) == 90
