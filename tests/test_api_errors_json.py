"""API errors are JSON and say what is wrong: a page number that is not one is a 400 (a page
past the end stays a 404), unknown URLs under /api/ are JSON 404s, and the schema lists the
429 of a locked-out address and the Idempotency-Key header of every POST."""

import pytest

LIST = "/api/workloads/"


@pytest.mark.parametrize("page", ["", "0", "-1", "two", "1.5"])
def test_a_page_that_is_not_a_whole_number_from_1_is_a_400(fleet, api_for, page):
    response = api_for("ceo").get(LIST, {"page": page})
    assert response.status_code == 400
    assert response.json() == {
        "detail": "page: A whole number from 1.", "field": "page",
        "errors": {"page": ["A whole number from 1."]},
    }


def test_a_page_past_the_end_is_a_404(fleet, api_for):
    assert api_for("ceo").get(LIST, {"page": 99}).status_code == 404


@pytest.mark.parametrize("url", ["/api/nothing/", "/api/workloads", "/api/workloads/9999999/",
                                 "/api/hosts/not-a-number/"])
def test_not_found_under_the_api_is_json(fleet, api_for, url):
    response = api_for("ceo").get(url)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]


def test_the_schema_lists_lockouts_and_the_idempotency_key(client, db):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    submit = schema["paths"]["/api/workloads/"]["post"]
    assert "429" in submit["responses"]
    assert "429" in schema["paths"]["/api/workloads/"]["get"]["responses"]
    headers = [p for p in submit["parameters"] if p["in"] == "header"]
    assert [h["name"] for h in headers] == ["Idempotency-Key"]
