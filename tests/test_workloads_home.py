"""The home page lists the user's own active workloads, with why pending ones wait."""

from django.urls import reverse


def test_home_lists_my_active_workloads(fleet, client_for):
    response = client_for("lead").get(reverse("home"))
    # Both were submitted at the same moment: newest id first.
    assert [w.name for w in response.context["my_workloads"]] == ["a2", "wait"]
    assert "needs 4 GPUs, 3 free on one host" in response.content.decode()


def test_finished_and_other_peoples_workloads_are_not_listed(fleet, client_for):
    response = client_for("researcher").get(reverse("home"))
    assert [w.name for w in response.context["my_workloads"]] == ["run"]


def test_nothing_active(fleet, client_for):
    response = client_for("outsider").get(reverse("home"))
    assert list(response.context["my_workloads"]) == []
    assert "Nothing queued or running." in response.content.decode()
