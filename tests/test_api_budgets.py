"""The budget tree over the API: shares and fractions from budgets.services.tree_rows, usage,
ratio and rank from the scheduler's own window usage and the engine's Standing; setting
shares through budgets.services with the portal's rules, stale edits 409.
The organisation: tests/conftest.py (prog-a 70, proj-a1 35% of h100 ...)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from budgets.models import Allocation, AllocationChange
from fleet.models import CapacityRollup
from scheduler.loop import floor_hour
from scheduler.models import OccupancySample, UsageRollup

TREE = "/api/budgets/"


def rows(response):
    assert response.status_code == 200, response.content
    return {node["path"]: node for node in response.json()["nodes"]}


@pytest.fixture
def used(org):
    """One day ago h100 gave 10 GPU-hours of capacity, and exp-1 used 2 GPU-hours of it."""
    now = timezone.now()
    org.cluster.created = now - timedelta(days=2)
    org.cluster.save()
    hour = floor_hour(now - timedelta(days=1))
    CapacityRollup.objects.create(cluster=org.cluster, hour=hour, gpu_seconds=10 * 3600)
    UsageRollup.objects.create(cluster=org.cluster, budget=org.exp_1, hour=hour,
                               gpu_seconds=2 * 3600)
    OccupancySample.objects.create(
        cluster=org.cluster, at=now - timedelta(minutes=1), total=10, available=10,
        allocated=0, unallocated=0, pending_workloads=0, pending_gpus=0,
    )
    return org


@pytest.mark.parametrize("persona", ["ceo", "pi", "lead", "researcher", "operator"])
def test_everyone_with_a_role_reads_the_whole_tree(org, api_for, persona):
    tree = rows(api_for(persona).get(TREE, {"cluster": "h100"}))
    assert list(tree) == [
        "org", "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1",
        "org/prog-a/proj-a2", "org/prog-b", "org/prog-b/proj-b1",
    ]


def test_outsider_reads_nothing(org, api_for):
    response = api_for("outsider").get(TREE)
    assert response.status_code == 403
    assert response.json()["detail"] == "You have no role in this organisation."
    assert api_for("outsider").get(f"/api/budgets/{org.prog_a.pk}/").status_code == 403


def test_shares_and_fractions_are_the_tree_pages(org, api_for):
    tree = rows(api_for("pi").get(TREE))  # the default cluster: the first one
    a1 = tree["org/prog-a/proj-a1"]
    assert (a1["shares"], a1["version"], a1["depth"], a1["managers"]) == (50, 1, 2, ["lead"])
    assert a1["percent_of_parent"] == pytest.approx(50)
    assert a1["percent_of_cluster"] == pytest.approx(35)
    assert a1["gpu_hours_per_week"] == pytest.approx(588)
    assert tree["org/prog-b"]["percent_of_cluster"] == pytest.approx(30)
    assert tree["org"]["percent_of_cluster"] == pytest.approx(100)
    assert response_meta(api_for("pi").get(TREE)) == ("h100", 10)


def response_meta(response):
    body = response.json()
    return body["cluster"], body["gpus"]


def test_usage_ratio_and_rank(used, api_for):
    tree = rows(api_for("ceo").get(TREE, {"cluster": "h100"}))
    assert tree["org/prog-a/proj-a1/exp-1"]["usage_gpu_hours"] == pytest.approx(2)
    assert tree["org/prog-a"]["usage_gpu_hours"] == pytest.approx(2)
    assert tree["org/prog-b"]["usage_gpu_hours"] == 0
    # entitlement = fraction x 10 GPU-h: exp-1 3.5, prog-a 7
    assert tree["org/prog-a/proj-a1/exp-1"]["entitlement_gpu_hours"] == pytest.approx(3.5)
    assert tree["org/prog-a/proj-a1/exp-1"]["ratio"] == pytest.approx(2 / 3.5)
    assert tree["org/prog-a"]["ratio"] == pytest.approx(2 / 7)
    assert tree["org/prog-a"]["ratio_label"] == "29%"
    # Fair Tree: the under-used sibling first.
    assert (tree["org/prog-b"]["rank"], tree["org/prog-a"]["rank"]) == (1, 2)
    assert tree["org/prog-a"]["siblings"] == 2
    assert (tree["org/prog-a/proj-a2"]["rank"], tree["org/prog-a/proj-a1"]["rank"]) == (1, 2)


def test_a_researcher_reads_usage_only_of_her_budgets(used, api_for):
    tree = rows(api_for("researcher").get(TREE, {"cluster": "h100"}))
    with_usage = {path for path, node in tree.items() if node["usage_gpu_hours"] is not None}
    assert with_usage == {"org/prog-a/proj-a1"}  # the one budget she belongs to
    assert (tree["org/prog-b"]["ratio"], tree["org/prog-b"]["rank"]) == (None, None)
    assert tree["org/prog-b"]["shares"] == 30  # shares stay public


def test_a_node_without_shares_has_no_ratio(org, api_for):
    Allocation.objects.filter(node=org.proj_a2).delete()
    tree = rows(api_for("ceo").get(TREE))
    assert tree["org/prog-a/proj-a2"]["shares"] is None
    assert tree["org/prog-a/proj-a2"]["ratio"] is None
    assert tree["org/prog-a/proj-a2"]["ratio_label"] == "no allocation"


def test_unknown_cluster_is_a_400(org, api_for):
    response = api_for("ceo").get(TREE, {"cluster": "nope"})
    assert response.status_code == 400
    assert response.json() == {
        "detail": "cluster: No cluster named 'nope'.", "field": "cluster",
        "errors": {"cluster": ["No cluster named 'nope'."]},
    }


def test_what_each_persona_may_do_is_in_the_tree(org, api_for):
    lead = rows(api_for("lead").get(TREE))
    assert lead["org/prog-a/proj-a1"]["can_request_change"] is True
    assert lead["org/prog-a/proj-a1"]["can_set_shares"] is False
    assert lead["org/prog-a/proj-a1/exp-1"]["can_set_shares"] is True
    researcher = rows(api_for("researcher").get(TREE))
    assert not any(n["can_set_shares"] for n in researcher.values())
    assert [path for path, n in researcher.items() if n["can_request_change"]] == [
        "org/prog-a/proj-a1"
    ]


def test_node_detail(org, api_for):
    body = api_for("researcher").get(f"/api/budgets/{org.proj_a1.pk}/").json()
    assert body["path"] == "org/prog-a/proj-a1"
    assert body["parent"] == "org/prog-a"
    assert body["children"] == ["org/prog-a/proj-a1/exp-1"]
    assert body["allocations"][0]["cluster"] == "h100"
    assert body["allocations"][0]["shares"] == 50


# Setting shares


def shares(client, node, **data):
    return client.post(f"/api/budgets/{node.pk}/shares/", {"cluster": "h100", **data},
                       format="json")


@pytest.mark.parametrize(
    ("persona", "node", "value"),
    [("pi", "proj_a1", 60), ("pi", "exp_1", 10), ("ceo", "prog_a", 80), ("lead", "exp_1", 7)],
)
def test_a_manager_above_sets_shares_at_once(org, api_for, shares_of, persona, node, value):
    target = getattr(org, node)
    response = shares(api_for(persona), target, shares=value, reason="rebalance")
    assert response.status_code == 200, response.content
    assert shares_of(target) == value
    entry = AllocationChange.objects.first()
    assert (entry.node, entry.changed_by, entry.new_shares, entry.reason) == (
        target, org.users[persona], value, "rebalance"
    )
    assert response.json()["allocations"][0]["shares"] == value


@pytest.mark.parametrize(
    ("persona", "node"),
    [("lead", "proj_a1"), ("pi", "prog_a"), ("researcher", "exp_1"), ("pi", "prog_b"),
     ("ceo", "root"), ("operator", "proj_b1")],
)
def test_nobody_sets_shares_they_do_not_manage_from_above(org, api_for, unchanged, persona,
                                                          node):
    with unchanged():
        response = shares(api_for(persona), getattr(org, node), shares=99)
    assert response.status_code == 403
    assert response.json()["detail"]


def test_outsider_cannot_set_shares(org, api_for, unchanged):
    with unchanged():
        assert shares(api_for("outsider"), org.proj_a1, shares=99).status_code == 403


@pytest.mark.parametrize(
    ("data", "field"),
    [({"shares": 0}, "shares"), ({"shares": "many"}, "shares"), ({"shares": 10**7}, "shares"),
     ({}, "shares"), ({"shares": 5, "cluster": "nope"}, "cluster"),
     ({"shares": 5, "version": "x"}, "version")],
)
def test_bad_shares_are_a_400_and_change_nothing(org, api_for, unchanged, data, field):
    with unchanged():
        response = shares(api_for("pi"), org.proj_a1, **data)
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_a_stale_edit_is_a_409(org, api_for, unchanged, shares_of):
    assert shares(api_for("ceo"), org.proj_a1, shares=55, version=1).status_code == 200
    with unchanged():
        response = shares(api_for("pi"), org.proj_a1, shares=60, version=1)
    assert response.status_code == 409
    assert "was changed to 55 shares since you loaded the page" in response.json()["detail"]
    assert shares_of(org.proj_a1) == 55
