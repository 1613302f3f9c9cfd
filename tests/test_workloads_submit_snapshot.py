"""Submission validates against a snapshot of the cluster's hosts and budget tree kept in the
shared cache under the cluster's validation stamp (scheduler.validation), which database
triggers renew. Every change validation reads is seen by the very next submission, whoever
writes it (a service, a queryset update, a delete); changes it does not read keep the stamp.
The statements a submission costs are pinned. Workloads and personas: fixtures_scheduler."""


import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from budgets import services as budget_services
from budgets.models import Allocation
from fleet.models import Host, ValidationStamp
from scheduler.models import Workload

LIST = "/api/workloads/"
EXP_1 = "org/prog-a/proj-a1/exp-1"


def submit(client, key=None, **overrides):
    body = {"name": "snapshot", "budget": EXP_1, "cluster": "h100", "gpus": 1,
            "min_runtime": 600, "resumable": True, "command": "python train.py", **overrides}
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(LIST, body, format="json", **headers)


def stamp(cluster):
    return ValidationStamp.objects.get(cluster=cluster).stamp


@pytest.fixture
def researcher(fleet, api_for):
    """The researcher's client, after a first submission filled the cache."""
    client = api_for("researcher")
    assert submit(client).status_code == 201
    return client


def test_a_submission_with_an_idempotency_key_costs_at_most_12_statements(
    researcher, django_assert_max_num_queries
):
    # token, lockout check, key claimed (one insert, no savepoint) and kept, roles, budget,
    # cluster, stamp, workload, event, and the key's transaction (a savepoint pair in a test,
    # BEGIN and COMMIT in production): the tree and the hosts come from the cache.
    with django_assert_max_num_queries(12):
        assert submit(researcher, key="pinned").status_code == 201


def test_a_submission_without_a_key_costs_at_most_8_statements(
    researcher, django_assert_max_num_queries
):
    with django_assert_max_num_queries(8):
        assert submit(researcher).status_code == 201


def test_a_second_submission_reads_neither_hosts_nor_budget_tree(researcher):
    with CaptureQueriesContext(connection) as queries:
        assert submit(researcher).status_code == 201
    tables = ('"scheduler_host"', '"budgets_allocation"', 'FROM "budgets_budgetnode" ORDER')
    assert not [q["sql"] for q in queries if any(t in q["sql"] for t in tables)]


def test_the_answer_is_what_reading_the_workload_back_gives(researcher):
    answer = submit(researcher, name="as-written").json()
    assert researcher.get(f"{LIST}{answer['id']}/").json() == answer


def test_removed_allocation_is_seen_by_the_next_submission(researcher, fleet):
    Allocation.objects.filter(node=fleet.org.exp_1).delete()
    response = submit(researcher)
    assert response.status_code == 400
    assert "has no allocation" in response.json()["detail"]


def test_new_shares_are_seen_by_the_next_submission(researcher, fleet):
    Allocation.objects.filter(node=fleet.org.exp_1).delete()
    assert submit(researcher).status_code == 400
    budget_services.set_shares(fleet.org.ceo, fleet.org.exp_1, fleet.org.cluster, 10)
    assert submit(researcher).status_code == 201


def test_a_move_under_the_budget_is_seen_by_the_next_submission(researcher, fleet):
    budget_services.move_node(fleet.org.ceo, fleet.org.proj_a2, fleet.org.exp_1)
    response = submit(researcher)
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"{EXP_1} is not a leaf budget")


def test_a_new_child_of_the_budget_is_seen_by_the_next_submission(researcher, fleet):
    budget_services.add_child(fleet.org.ceo, fleet.org.exp_1, name="Run 1", slug="run-1",
                              kind="researcher")
    response = submit(researcher)
    assert response.status_code == 400
    assert "is not a leaf budget" in response.json()["detail"]


def shrink(fleet):
    Host.objects.filter(pk=fleet.h100_1.pk).update(gpus=2)


def retire(fleet):
    Host.objects.filter(pk=fleet.h100_1.pk).update(retired=timezone.now())


def remove(fleet):
    fleet.h100_1.delete()


def move_to_b200(fleet):
    Host.objects.filter(pk=fleet.h100_1.pk).update(cluster=fleet.b200)


@pytest.mark.parametrize("change", [shrink, retire, remove, move_to_b200])
def test_fewer_gpus_are_seen_by_the_next_submission(researcher, fleet, change):
    # h100 has two hosts of 5 GPUs: 10 GPUs fit on whole hosts until one host changes.
    assert submit(researcher, gpus=10).status_code == 201
    change(fleet)
    response = submit(researcher, gpus=10)
    assert response.status_code == 400
    assert response.json()["field"] == "gpus"


def test_a_new_host_is_seen_by_the_next_submission(researcher, fleet):
    assert submit(researcher, gpus=12).status_code == 400
    Host.objects.create(cluster=fleet.org.cluster, name="h100-2", gpus=2)
    assert submit(researcher, gpus=12).status_code == 201


def test_heartbeats_and_notes_keep_the_stamp(fleet):
    before = stamp(fleet.org.cluster)
    Host.objects.update(last_heartbeat=timezone.now(), state_reason="probed")
    fleet.org.exp_1.description = "a note"
    fleet.org.exp_1.save()
    assert stamp(fleet.org.cluster) == before


def test_a_host_state_change_renews_its_clusters_stamp_only(fleet):
    h100, b200 = stamp(fleet.org.cluster), stamp(fleet.b200)
    Host.objects.filter(pk=fleet.h100_0.pk).update(state=Host.State.DRAINING)
    assert stamp(fleet.org.cluster) != h100
    assert stamp(fleet.b200) == b200


def test_a_change_of_the_tree_renews_every_clusters_stamp(fleet):
    h100, b200 = stamp(fleet.org.cluster), stamp(fleet.b200)
    budget_services.add_child(fleet.org.ceo, fleet.org.proj_b1, name="Exp B", slug="exp-b",
                              kind="researcher")
    assert stamp(fleet.org.cluster) != h100
    assert stamp(fleet.b200) != b200


def test_shares_on_one_cluster_keep_the_others_stamp(fleet):
    h100, b200 = stamp(fleet.org.cluster), stamp(fleet.b200)
    budget_services.set_shares(fleet.org.ceo, fleet.org.prog_b, fleet.org.cluster, 40)
    assert stamp(fleet.org.cluster) != h100
    assert stamp(fleet.b200) == b200


def test_a_new_cluster_has_a_stamp_and_takes_submissions(fleet, api_for):
    response = submit(api_for("researcher"), cluster="b200", gpus=8, min_runtime=0)
    assert response.status_code == 201, response.content
    assert Workload.objects.get(pk=response.json()["id"]).cluster == fleet.b200


def test_an_unreachable_cache_costs_no_submission(researcher, settings):
    settings.CACHES = {"default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
    }}
    assert submit(researcher, name="without-cache").status_code == 201
