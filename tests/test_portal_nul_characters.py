"""PostgreSQL cannot compare a NUL character: every page refuses one with a 400, never a 500."""

import pytest

from budgets.models import Allocation, AllocationChange


@pytest.mark.django_db
def test_a_nul_in_a_list_filter_is_a_400(client_for):
    response = client_for("researcher").get("/workloads/", {"budget": "org\x00"})
    assert response.status_code == 400


@pytest.mark.django_db
def test_a_nul_in_the_csv_export_filter_is_a_400(client_for):
    response = client_for("ceo").get("/workloads/export.csv", {"cluster": "\x00"})
    assert response.status_code == 400


@pytest.mark.django_db
def test_a_nul_in_a_form_is_a_400_and_writes_nothing(client_for, org):
    before = (list(Allocation.objects.values_list("shares", flat=True)),
              AllocationChange.objects.count())
    response = client_for("pi").post(
        f"/budgets/clusters/{org.cluster.name}/",
        {"node": org.proj_a1.pk, "shares": "60", "reason": "more\x00"},
    )
    assert response.status_code == 400
    assert (list(Allocation.objects.values_list("shares", flat=True)),
            AllocationChange.objects.count()) == before


@pytest.mark.django_db
def test_the_api_answers_a_nul_with_json(client_for):
    response = client_for("ceo").get("/api/workloads/", {"state": "\x00"})
    assert response.status_code == 400
    assert response.json() == {"detail": "query: NUL characters are not allowed.",
                               "field": "query"}
