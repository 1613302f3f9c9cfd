"""Counts read as people say them: "1 GPU", never "1 GPUs" (scheduler.engine.wording), on
the pages and in the engine's reasons."""

import pytest
from django.urls import reverse

from fleet.models import Cluster, Host
from scheduler.engine.wording import quantity


@pytest.mark.parametrize(
    ("count", "said"), [(0, "0 GPUs"), (1, "1 GPU"), (2, "2 GPUs"), (12, "12 GPUs")]
)
def test_a_count_of_gpus(count, said):
    assert quantity(count, "GPU") == said


def test_an_irregular_plural():
    assert (quantity(1, "class", "classes"), quantity(3, "class", "classes")) == (
        "1 class", "3 classes")


@pytest.fixture
def tiny(org):
    """A one-GPU cluster on a single host."""
    cluster = Cluster.objects.create(name="tiny", gpu_type="L4")
    Host.objects.create(cluster=cluster, name="tiny-0", gpus=1)
    return cluster


@pytest.mark.parametrize(
    ("page", "said"),
    [
        (reverse("scheduler:hosts", args=["tiny"]), "tiny: L4, 1 GPU on 1 host."),
        (reverse("reports:cluster", args=["tiny"]), "L4 · 1 GPU<"),
        (reverse("budgets:tree", args=["tiny"]), "tiny: L4, 1 GPU."),
    ],
)
def test_pages_say_one_gpu(tiny, client_for, page, said):
    body = client_for("ceo").get(page).content.decode()
    assert said in body
    assert "1 GPUs" not in body
