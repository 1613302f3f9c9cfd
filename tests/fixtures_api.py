"""API clients for the personas (tests/conftest.py): `api_for("pi")` authenticates with a real
API token, as the CLI and scripts do; `api_for(None)` is anonymous.

Use them with `pytest_plugins = ["fixtures_api"]` in a test module.
"""

import pytest
from rest_framework.test import APIClient

from portal.models import ApiToken


def token_for(user) -> str:
    return ApiToken.objects.create_token(user, "tests")[1]


@pytest.fixture
def api_for(org):
    clients = {}

    def make(persona):
        if persona not in clients:
            client = APIClient()
            if persona is not None:
                key = token_for(org.users[persona])
                client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
            clients[persona] = client
        return clients[persona]

    return make
