"""API clients for the personas (tests/conftest.py): `api_for("pi")` authenticates with a real
API token, as the CLI and scripts do; `api_for(None)` is anonymous.

Registered for the whole suite by tests/conftest.py.
"""

import pytest
from rest_framework.test import APIClient

from portal.models import ApiToken


def create_token(user) -> str:
    return ApiToken.objects.create_token(user, "tests")[1]


@pytest.fixture
def token_for(db):
    """`token_for(user)`: a new API token of the user (the secret)."""
    return create_token


@pytest.fixture
def api_for(org):
    clients = {}

    def make(persona):
        if persona not in clients:
            client = APIClient()
            if persona is not None:
                key = create_token(org.users[persona])
                client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
            clients[persona] = client
        return clients[persona]

    return make
