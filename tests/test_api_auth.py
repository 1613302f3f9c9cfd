"""Authentication: hashed API tokens (the token page, `manage.py create_token`), the browser
session, and JSON for every error under /api/; the schema and its docs page."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from portal.models import ApiToken, active_token, digest


def bearer(key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_a_token_authenticates_as_its_user(org, token_for):
    key = token_for(org.pi)
    assert bearer(key).get("/api/requests/").status_code == 200
    token = ApiToken.objects.get(user=org.pi)
    assert token.last_used is not None
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/requests/").status_code == 200


def test_only_a_digest_is_stored(org, token_for):
    key = token_for(org.pi)
    token = ApiToken.objects.get(user=org.pi)
    assert token.digest == digest(key) and key not in (token.digest, token.prefix)
    assert key.startswith(token.prefix)


@pytest.mark.parametrize("header", ["Bearer nope", "Bearer", "Bearer a b", "Token ts_wrong"])
def test_bad_tokens_are_401(org, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/workloads/")
    assert response.status_code == 401
    assert response.json()["detail"]


def test_expired_token_and_inactive_user(org, token_for):
    key = token_for(org.pi)
    ApiToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    assert bearer(key).get("/api/workloads/").status_code == 401
    key = token_for(org.lead)
    org.lead.is_active = False
    org.lead.save()
    assert bearer(key).get("/api/workloads/").status_code == 401


def test_the_written_token_lookup_reads_what_the_orm_reads(org, token_for):
    # active_token is the hot path's hand-written ApiToken.objects.active(): the same rows,
    # every field of the token and of its user, for every kind of expiry.
    now = timezone.now()
    keys = {token_for(org.pi): None, token_for(org.lead): now + timedelta(hours=1),
            token_for(org.researcher): now - timedelta(seconds=1)}
    for key, expires in keys.items():
        ApiToken.objects.filter(digest=digest(key)).update(expires=expires, last_used=now)
    org.lead.last_login = now
    org.lead.save()
    for key in [*keys, "ts_unknown"]:
        found = active_token(digest(key))
        expected = ApiToken.objects.active().select_related("user").filter(
            digest=digest(key)).first()
        if expected is None:
            assert found is None
            continue
        for model_of, got, want in ((ApiToken, found, expected),
                                    (type(expected.user), found.user, expected.user)):
            for field in model_of._meta.concrete_fields:
                assert getattr(got, field.attname) == getattr(want, field.attname), field.name
        assert not found._state.adding and found.user.pk == found.user_id


def test_token_page_creates_shows_once_and_revokes(org, client_for):
    client = client_for("researcher")
    page = client.get("/api/tokens/")
    assert page.status_code == 200 and "No token yet" in page.content.decode()
    created = client.post("/api/tokens/", {"name": "laptop", "days": "30"})
    key = created.context["created"]
    assert key.startswith("ts_") and key in created.content.decode()
    token = ApiToken.objects.get(user=org.researcher)
    assert token.name == "laptop" and token.expires > timezone.now() + timedelta(days=29)
    assert key not in client.get("/api/tokens/").content.decode()  # shown once
    assert bearer(key).get("/api/workloads/").status_code == 200
    client.post(f"/api/tokens/{token.pk}/revoke/")
    assert not ApiToken.objects.exists()
    assert bearer(key).get("/api/workloads/").status_code == 401


def test_token_page_refuses_bad_input_and_other_peoples_tokens(org, client_for, token_for):
    assert client_for("pi").post("/api/tokens/", {"name": ""}).status_code == 422
    token_for(org.ceo)
    other = ApiToken.objects.get(user=org.ceo)
    assert client_for("pi").post(f"/api/tokens/{other.pk}/revoke/").status_code == 404
    assert ApiToken.objects.filter(pk=other.pk).exists()
    assert client_for(None).get("/api/tokens/").status_code == 302  # to the login page


def test_create_token_command(org):
    out = StringIO()
    call_command("create_token", "lead", "--name", "ci", "--days", "7", stdout=out)
    key = out.getvalue().strip()
    assert bearer(key).get("/api/workloads/").status_code == 200
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("create_token", "nobody")


def test_unknown_api_urls_answer_json(org, api_for):
    response = api_for("ceo").get("/api/nothing/here/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No API endpoint at /api/nothing/here/.", "field": None}
    response = api_for("ceo").delete("/api/workloads/")
    assert response.status_code == 405
    assert response.json()["detail"] == 'Method "DELETE" not allowed.'


def test_schema_and_docs_are_served_without_a_cdn(org, client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    spec = schema.json()
    assert spec["openapi"].startswith("3.")
    assert "/api/workloads/{id}/cancel/" in spec["paths"]
    assert "bearerToken" in spec["components"]["securitySchemes"]
    docs = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs and "cdn" not in docs.lower() and "/static/" in docs
