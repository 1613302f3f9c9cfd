"""Login throttling (django-axes): too many wrong passwords lock a username out from that
address even with the right password; too many wrong API tokens lock the address out."""

import pytest
from django.test import Client
from django.urls import reverse

LOGIN = reverse("login")


@pytest.fixture
def limit(settings):
    settings.AXES_FAILURE_LIMIT = 3
    return 3


def log_in(client, username, password):
    return client.post(LOGIN, {"username": username, "password": password})


def test_the_right_password_after_too_many_wrong_ones_is_refused(org, password, limit):
    client = Client()
    for _ in range(limit - 1):
        assert log_in(client, "pi", "wrong").status_code == 200
    assert log_in(client, "pi", "wrong").status_code == 429  # the one that reaches the limit
    response = log_in(client, "pi", password)
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_fewer_wrong_passwords_than_the_limit_still_let_the_right_one_in(org, password, limit):
    client = Client()
    for _ in range(limit - 1):
        log_in(client, "pi", "wrong")
    assert log_in(client, "pi", password).status_code == 302


def test_a_lockout_is_per_username(org, password, limit):
    client = Client()
    for _ in range(limit):
        log_in(client, "pi", "wrong")
    assert log_in(client, "lead", password).status_code == 302


def test_wrong_api_tokens_lock_the_address_out(api_for, token_for, org, limit):
    forged = Client(HTTP_AUTHORIZATION="Bearer ts_forged")
    for _ in range(limit - 1):
        assert forged.get("/api/workloads/").status_code == 401
    assert forged.get("/api/workloads/").status_code == 429
    real = Client(HTTP_AUTHORIZATION=f"Bearer {token_for(org.researcher)}")
    response = real.get("/api/workloads/")
    assert response.status_code == 429
    assert response.json()["detail"] == (
        "Too many invalid tokens from your address: wait before trying again."
    )


def test_a_good_token_is_not_counted(api_for, limit):
    for _ in range(limit + 1):
        assert api_for("researcher").get("/api/workloads/").status_code == 200
