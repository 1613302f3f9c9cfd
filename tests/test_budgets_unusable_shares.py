"""A budget holding shares on a cluster where none of its children has any: its part of the
cluster cannot be used, and the tree page and the dashboards say so.

On top of conftest's org, a cluster b200 (8 GPUs) where program A (70 shares) passes its
part on to project A1 (100) and A1 to experiment 1 (100), but program B (30 shares) gives
none to project B1: 30% of b200 cannot be used."""

import pytest
from django.urls import reverse

from budgets import services
from fleet.models import Cluster, Host

WARNING = ("30% of b200 cannot be used: org/prog-b holds shares there but none of its "
           "children does.")


@pytest.fixture
def b200(org):
    cluster = Cluster.objects.create(name="b200", gpu_type="B200")
    Host.objects.create(cluster=cluster, name="b200-0", gpus=8)
    for budget, shares in [(org.prog_a, 70), (org.proj_a1, 100), (org.exp_1, 100),
                           (org.prog_b, 30)]:
        services.set_shares(org.ceo, budget, cluster, shares, reason="b200 arrives")
    return cluster


def test_the_stranded_part_is_found(b200, org):
    (unusable,) = services.unusable_shares(b200)
    assert unusable.node == org.prog_b
    assert unusable.fraction == pytest.approx(0.3)


def test_a_cluster_whose_shares_all_reach_leaves_has_none(org):
    assert services.unusable_shares(org.cluster) == []


def test_a_cluster_nobody_holds_shares_on_is_wholly_unusable(org):
    bare = Cluster.objects.create(name="bare", gpu_type="L4")
    (unusable,) = services.unusable_shares(bare)
    assert str(unusable) == "100% of bare cannot be used: no budget holds shares there."


def test_the_tree_page_warns(b200, client_for):
    body = client_for("researcher").get(reverse("budgets:tree", args=["b200"])).content.decode()
    assert WARNING in body


def test_the_tree_page_of_a_sound_cluster_does_not(b200, client_for):
    body = client_for("ceo").get(reverse("budgets:tree", args=["h100"])).content.decode()
    assert "cannot be used" not in body


def test_the_dashboards_warn(b200, client_for):
    body = client_for("ceo").get(reverse("reports:dashboards")).content.decode()
    assert WARNING in body
