"""Managers add a child with the same slug at the same instant: one is created, every other
one gets the slug's field error (422), never a 500 (PostgreSQL: concurrent transactions)."""

import threading

import pytest
from django.db import connection, connections
from django.test import Client
from django.urls import reverse

from budgets.models import BudgetNode

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="concurrent transactions need PostgreSQL"
)

MANAGERS = 8


@pytest.mark.django_db(transaction=True)
def test_same_slug_at_once_one_created_the_others_a_field_error(org):
    url = reverse("budgets:node_add_child", kwargs={"pk": org.prog_a.pk})
    clients = []
    for _ in range(MANAGERS):
        client = Client(raise_request_exception=False)
        client.force_login(org.ceo)
        clients.append(client)
    barrier = threading.Barrier(MANAGERS)
    answers = []

    def add(client):
        try:
            barrier.wait(timeout=20)
            response = client.post(url, {"name": "Twin", "slug": "twin", "kind": "project"})
            errors = response.context["form"].errors if response.status_code == 422 else None
            answers.append((response.status_code, errors))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=add, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    codes = sorted(code for code, _ in answers)
    assert codes == [302] + [422] * (MANAGERS - 1), answers
    for code, errors in answers:
        if code == 422:
            assert errors["slug"] == ["Program A already has a child named twin."]
    assert BudgetNode.objects.filter(parent=org.prog_a, slug="twin").count() == 1
