"""`Idempotency-Key` on API POSTs: a retry with the same key and body gets the first answer and
creates nothing more; the same key with another body is a 409 (workloads: fixtures_scheduler)."""

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone
from fixtures_api import create_token
from rest_framework.test import APIClient

from common.models import IdempotencyKey
from common.tasks import purge_idempotency_keys
from scheduler.models import Workload

LIST = "/api/workloads/"
BODY = {
    "name": "retry-me",
    "budget": "org/prog-a/proj-a1/exp-1",
    "cluster": "h100",
    "gpus": 1,
    "min_runtime": 600,
    "resumable": True,
    "command": "python train.py",
}


def post(client, body=BODY, key="key-1"):
    return client.post(LIST, json.dumps(body), content_type="application/json",
                       HTTP_IDEMPOTENCY_KEY=key)


def created():
    return Workload.objects.filter(name__startswith="retry-me").count()


def test_same_key_same_body_returns_the_first_answer(fleet, api_for):
    first = post(api_for("researcher"))
    again = post(api_for("researcher"))
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert created() == 1


def test_same_key_other_body_is_a_409(fleet, api_for):
    post(api_for("researcher"))
    response = post(api_for("researcher"), {**BODY, "name": "retry-me-too"})
    assert response.status_code == 409
    assert response.json()["field"] == "Idempotency-Key"
    assert "already used for a different request" in response.json()["detail"]
    assert created() == 1


def test_keys_belong_to_their_user(fleet, api_for):
    post(api_for("researcher"))
    post(api_for("lead"), {**BODY, "budget": "org/prog-a/proj-a2", "min_runtime": 0})
    assert created() == 2


def test_without_a_key_every_post_counts(fleet, api_for):
    client = api_for("researcher")
    for _ in range(2):
        client.post(LIST, BODY, format="json")
    assert created() == 2


def test_a_refused_request_keeps_its_answer_too(fleet, api_for):
    first = post(api_for("researcher"), {**BODY, "gpus": 0})
    again = post(api_for("researcher"), {**BODY, "gpus": 0})
    assert first.status_code == again.status_code == 400
    assert again.json() == first.json()


def age_keys(hours):
    IdempotencyKey.objects.update(created=timezone.now() - timedelta(hours=hours))


def test_a_key_older_than_a_day_is_a_new_request(fleet, api_for):
    post(api_for("researcher"))
    age_keys(25)  # the hourly purge has not run yet
    again = post(api_for("researcher"), {**BODY, "name": "retry-me-next-day"})
    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert created() == 2


def test_a_key_younger_than_a_day_still_replays(fleet, api_for):
    post(api_for("researcher"))
    age_keys(23)
    assert post(api_for("researcher"))["Idempotent-Replayed"] == "true"
    assert created() == 1


def test_the_hourly_purge_deletes_only_keys_older_than_a_day(fleet, api_for):
    post(api_for("researcher"), key="old")
    age_keys(25)
    post(api_for("researcher"), {**BODY, "name": "retry-me-fresh"}, key="fresh")
    assert purge_idempotency_keys() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["fresh"]


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there"])
def test_a_malformed_key_is_a_400(fleet, api_for, key):
    response = post(api_for("researcher"), key=key)
    assert response.status_code == 400
    assert response.json()["field"] == "Idempotency-Key"
    assert created() == 0


def send_at_once(fleet, body, clients=6):
    """``clients`` researchers' clients posting ``body`` with the same key at the same moment:
    their (status, workload id) answers."""
    token = create_token(fleet.org.researcher)
    barrier = threading.Barrier(clients)
    answers = []

    def send():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        try:
            barrier.wait(timeout=20)
            response = post(client, body)
            answers.append((response.status_code, response.json()["id"]))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent requests need PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_create_one_workload(fleet):
    answers = send_at_once(fleet, BODY)
    assert len(answers) == 6
    assert {code for code, _ in answers} == {201}
    assert len({workload_id for _, workload_id in answers}) == 1
    assert created() == 1


def test_a_form_encoded_post_with_a_key_is_answered(fleet, api_for):
    response = api_for("researcher").post(
        f"/api/workloads/{fleet.run_w.pk}/cancel/", {"x": "1"}, format="multipart",
        HTTP_IDEMPOTENCY_KEY="form-1",
    )
    assert response.status_code == 200


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent requests need PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_concurrent_reuses_of_an_expired_key_create_one_workload(fleet):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(fleet.org.researcher)}")
    post(client)
    age_keys(25)  # forgotten, and the hourly purge has not run yet
    answers = send_at_once(fleet, {**BODY, "name": "retry-me-next-day"})
    assert len(answers) == 6
    assert {code for code, _ in answers} == {201}  # one ran, the others got its answer
    assert len({workload_id for _, workload_id in answers}) == 1
    assert created() == 2
