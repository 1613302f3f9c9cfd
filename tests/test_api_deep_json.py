"""A JSON body nested deeper than the API accepts is a 400 with a readable message on every
JSON POST endpoint, never a 500 (deep nesting exhausted Python's recursion before)."""

import json

import pytest

from common.api.parsers import MAX_JSON_DEPTH
from scheduler.models import Workload

ENDPOINTS = ["/api/workloads/", "/api/requests/"]


def nested(depth: int) -> str:
    return '{"name": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("depth", [319, 100_000])
def test_deep_json_is_a_400(api_for, endpoint, depth):
    response = api_for("researcher").post(endpoint, nested(depth), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"] == (
        f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels."
    )


def test_deep_json_writes_nothing(api_for):
    api_for("researcher").post("/api/workloads/", nested(400), content_type="application/json")
    assert not Workload.objects.exists()


def test_json_at_the_depth_limit_is_still_read(api_for):
    body = json.loads(nested(MAX_JSON_DEPTH - 1))
    response = api_for("researcher").post("/api/workloads/", body, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "name"
