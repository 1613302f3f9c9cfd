"""Schemathesis against the OpenAPI schema the API serves: for every operation, generated
valid and invalid requests (as a researcher who may submit, and as an operator who may drain)
never get a 5xx, every response matches the schema (status codes, content type, body), and
input the schema forbids is refused with a 4xx.

The operations are walked by hand (schemathesis' pytest plugin does not run under this
pytest), each with a bounded Hypothesis run: EXAMPLES per operation and mode, no deadline,
derandomized so that a failure reproduces."""

from datetime import timedelta

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from budgets import reviews, services
from portal.wsgi import application

EXAMPLES = 10

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """Like Django's test client: the WSGI app must not close the test's database connection
    at the end of each request (it holds the test's transaction)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def operations():
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
    return [result.ok() for result in schema.get_all_operations()]


def known_objects(fleet) -> dict[str, dict]:
    """Path parameters of objects that exist, so generated requests also reach real ones."""
    org = fleet.org
    change = services.request_change(org.lead, org.proj_a1, org.cluster, shares=75,
                                      reason="schemathesis")
    now = timezone.now()
    cycle = reviews.schedule_cycle(org.ceo, org.root, name="schemathesis", opens_at=now,
                                   due_at=now + timedelta(days=14))
    return {
        "/workloads/": {"id": fleet.run_w.pk},
        "/budgets/": {"id": org.proj_a1.pk},
        "/hosts/": {"id": fleet.h100_1.pk},
        "/requests/": {"id": change.pk},
        "/clusters/": {"name": "h100"},
        "/reviews/": {"id": cycle.pk},
        "/review-items/": {"id": cycle.items.first().pk},
    }


def exercise(operation, mode, headers, path_parameters=None):
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

    @given(case=strategy)
    @settings(deadline=None, max_examples=EXAMPLES, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case):
        case.call_and_validate(headers=headers, checks=CHECKS)

    run()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("persona", ["researcher", "operator"])
def test_api_conforms_to_its_schema(fleet, token_for, persona, mode):
    headers = {"Authorization": f"Bearer {token_for(fleet.org.users[persona])}"}
    found = operations()
    assert len(found) >= 19
    known = known_objects(fleet)
    for operation in found:
        exercise(operation, mode, headers)
        if mode == GenerationMode.POSITIVE and "{" in operation.path:
            prefix = operation.path[: operation.path.index("{")].removeprefix("/api")
            exercise(operation, mode, headers, known[prefix])


def test_anonymous_requests_get_documented_401s(fleet):
    for operation in operations():
        exercise(operation, GenerationMode.POSITIVE, {})
