"""The workload list: who sees what, scopes, filters (one definition for page and CSV),
the htmx fragment, pagination and a pinned query count. Workloads: tests/fixtures_scheduler.py."""

import csv
import io

import pytest
from django.urls import reverse
from query_counts import count_queries

from scheduler.models import Workload

LIST = reverse("scheduler:workloads")
EXPORT = reverse("scheduler:workload_export")

VISIBLE = {
    "ceo": {"run", "wait", "a2", "b", "done"},
    "operator": {"run", "wait", "a2", "b", "done"},
    "pi": {"run", "wait", "a2", "done"},
    "lead": {"run", "wait", "a2", "done"},
    "researcher": {"run", "wait", "done"},
    "bob": {"b"},
    "outsider": set(),
}


def names(response):
    return {w.name for w in response.context["page"]}


@pytest.mark.parametrize("persona", sorted(VISIBLE))
def test_each_persona_sees_what_the_permissions_allow(fleet, client_for, persona):
    response = client_for(persona).get(LIST)
    assert response.status_code == 200
    assert names(response) == VISIBLE[persona]


@pytest.mark.parametrize(
    ("persona", "scope", "expected"),
    [
        ("researcher", "mine", {"run", "done"}),
        ("researcher", "projects", {"run", "wait", "done"}),
        ("lead", "mine", {"wait", "a2"}),
        ("lead", "projects", {"run", "wait", "a2", "done"}),
        ("pi", "mine", set()),
        ("pi", "projects", {"run", "wait", "a2", "done"}),
        # The operator sees everything, but manages and belongs to no budget.
        ("operator", "projects", set()),
        ("operator", "all", {"run", "wait", "a2", "b", "done"}),
    ],
)
def test_scopes(fleet, client_for, persona, scope, expected):
    assert names(client_for(persona).get(LIST, {"scope": scope})) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"state": "PENDING"}, {"wait", "a2", "b"}),
        ({"state": "active"}, {"run", "wait", "a2", "b"}),
        ({"state": "finished"}, {"done"}),
        ({"budget": "org/prog-a"}, {"run", "wait", "a2", "done"}),
        ({"budget": "org/prog-a/proj-a1/exp-1"}, {"run", "wait", "done"}),
        ({"budget": "org/prog-a/proj-a1/exp-1", "state": "PENDING"}, {"wait"}),
        ({"cluster": "h100"}, {"run", "wait", "a2", "b", "done"}),
        ({"cluster": "b200"}, set()),
    ],
)
def test_filters(fleet, client_for, query, expected):
    assert names(client_for("ceo").get(LIST, query)) == expected


def test_filters_never_widen_what_one_may_see(fleet, client_for):
    response = client_for("researcher").get(LIST, {"budget": "org/prog-b/proj-b1"})
    assert names(response) == set()


def test_invalid_filter_value_shows_nothing_and_says_why(fleet, client_for):
    response = client_for("ceo").get(LIST, {"state": "SLEEPING"})
    assert response.status_code == 200
    assert names(response) == set()
    assert "state" in response.context["filterset"].errors


def test_csv_export_uses_the_same_filters(fleet, client_for):
    response = client_for("lead").get(EXPORT, {"state": "PENDING"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sorted(row["name"] for row in rows) == ["a2", "wait"]
    wait = next(row for row in rows if row["name"] == "wait")
    assert wait["budget"] == "org/prog-a/proj-a1/exp-1"
    assert wait["owner"] == "lead"
    assert wait["min_runtime"] == "3600"
    assert wait["queue_position"] == "1"
    assert wait["queue_reason"] == "needs 4 GPUs, 3 free on one host"


def test_csv_export_is_restricted_too(fleet, client_for):
    response = client_for("outsider").get(EXPORT)
    assert response.content.decode().strip().splitlines() == [
        "id,name,owner,budget,cluster,gpus,min_runtime,resumable,state,submitted,finished,"
        "exit_code,queue_position,queue_reason"
    ]


def test_htmx_request_gets_only_the_table(fleet, client_for, htmx):
    response = client_for("researcher").get(LIST, {"state": "PENDING"}, **htmx)
    body = response.content.decode()
    assert [t.name for t in response.templates][0] == "scheduler/_workload_rows.html"
    assert "<html" not in body
    assert 'hx-trigger="every 5s"' in body
    # The poll keeps the current filters.
    assert 'hx-get="/workloads/?state=PENDING"' in body


def test_pending_rows_say_why_they_wait(fleet, client_for):
    body = client_for("ceo").get(LIST).content.decode()
    assert "#1 in the queue" in body
    assert "needs 4 GPUs, 3 free on one host" in body
    assert "prog-b is at 140% of its entitlement and ranks below prog-a" in body
    # a2 has no reason yet: it still says something better than "pending".
    assert "waiting for the scheduler's next pass" in body


def test_pagination(fleet, client_for):
    template = fleet.wait
    Workload.objects.bulk_create([
        Workload(name=f"bulk-{i}", owner=template.owner, budget=template.budget,
                 cluster=template.cluster, gpus=1, min_runtime=0, command="x")
        for i in range(55)
    ])
    first = client_for("ceo").get(LIST)
    assert first.context["page"].paginator.count == 60
    assert len(first.context["page"]) == 50
    second = client_for("ceo").get(LIST, {"page": 2})
    assert len(second.context["page"]) == 10


@pytest.mark.parametrize("persona", ["researcher", "ceo"])
def test_query_count_does_not_grow_with_rows(fleet, client_for, persona):
    client = client_for(persona)
    client.get(LIST)  # warm the session
    few = count_queries(client, LIST)
    template = fleet.run_w
    Workload.objects.bulk_create([
        Workload(name=f"bulk-{i}", owner=template.owner, budget=template.budget,
                 cluster=template.cluster, gpus=1, min_runtime=60, command="x")
        for i in range(40)
    ])
    assert count_queries(client, LIST) == few


def test_query_count_is_pinned(fleet, client_for):
    """Session, user, roles (managed, member_of, user and group permissions), the count of
    workloads, the cluster and budget choices of the filter form, the page of workloads (owner,
    budget, cluster joined), and the held GPUs of the page's running workloads (one query for
    the page, for "Why / where"). The nav's pending decisions cost nothing for a researcher."""
    client = client_for("researcher")
    client.get(LIST)
    assert count_queries(client, LIST) == 11


def test_query_count_without_running_workloads_needs_no_gpu_query(fleet, client_for):
    client = client_for("researcher")
    client.get(LIST)
    assert count_queries(client, LIST + "?state=PENDING") == 10


def test_running_rows_say_where_they_run_and_whether_protected(fleet, client_for):
    from datetime import timedelta

    from django.utils import timezone

    from scheduler.models import Run, RunGPU

    body = client_for("ceo").get(LIST).content.decode()
    row = body[body.index(f'id="workload-{fleet.run_w.pk}"'):]
    row = row[:row.index("</tr>")]
    # fixture run: 2 GPUs on h100-0, protected for an hour from T0 (long past): preemptible
    assert "on h100-0 GPUs 0-1" in row
    assert "preemptible" in row
    assert "past its minimum runtime" in row
    Run.objects.filter(pk=fleet.run.pk).update(
        protected_until=timezone.now() + timedelta(minutes=30, seconds=30))
    RunGPU.objects.create(run=fleet.run, host=fleet.h100_1, index=5)
    body = client_for("ceo").get(LIST).content.decode()
    row = body[body.index(f'id="workload-{fleet.run_w.pk}"'):]
    row = row[:row.index("</tr>")]
    assert "on h100-0 GPUs 0-1; h100-1 GPU 5" in row
    assert "protected for 30 min" in row
    # an unallocated run is preemptible at any moment; a signalled one is checkpointing
    Run.objects.filter(pk=fleet.run.pk).update(allocated=False)
    assert "unallocated: free, preemptible" in client_for("ceo").get(LIST).content.decode()
    Run.objects.filter(pk=fleet.run.pk).update(signalled_at=timezone.now())
    assert "checkpointing" in client_for("ceo").get(LIST).content.decode()


@pytest.mark.parametrize(
    ("persona", "budgets"),
    [
        ("researcher", {"org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1"}),
        ("lead", {"org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1", "org/prog-a/proj-a2"}),
        ("bob", {"org/prog-b/proj-b1"}),
        ("outsider", set()),
    ],
)
def test_the_budget_filter_lists_only_budgets_the_viewer_may_see(fleet, client_for, persona,
                                                                   budgets):
    form = client_for(persona).get(reverse("scheduler:workloads")).context["filterset"].form
    assert {node.path for node in form.fields["budget"].queryset} == budgets


@pytest.mark.parametrize("persona", ["ceo", "operator"])
def test_those_who_see_every_workload_filter_by_every_budget(fleet, client_for, persona):
    form = client_for(persona).get(reverse("scheduler:workloads")).context["filterset"].form
    assert form.fields["budget"].queryset.count() == 7
