"""Who follows and decides a review cycle, per persona, on the pages and in the API: the
CEO everything; the PI and the lead the subtrees they manage (deciding only below their own
node); a reviewer reads their subtree and decides nothing; a researcher, the operator and an
outsider see no review at all. A second decision is a conflict, never a second write."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from budgets import people, reviews
from budgets.models import ReviewCycle, ReviewItem

NOW = timezone.now().replace(microsecond=0)
PERSONAS = ("ceo", "pi", "lead", "researcher", "outsider", "operator", "reviewer")


@pytest.fixture
def cycle(org):
    """2027 Q1, opened by the CEO; Bea, from finance, reviews Program A."""
    bea = org.outsider.__class__.objects.create_user("bea", password="x")
    org.users["reviewer"] = bea
    people.add_person(org.ceo, org.prog_a, "bea", "reviewer", reason="finance")
    return reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=NOW,
                                  due_at=NOW + timedelta(days=14))


def item(cycle, node):
    return ReviewItem.objects.get(cycle=cycle, node=node)


def decide(client, review_item, decision="confirm", shares=None, **headers):
    data = {"decision": decision, **({"shares": shares} if shares else {})}
    return client.post(reverse("budgets:review_item_decide", args=[review_item.pk]), data,
                       **headers)


@pytest.mark.parametrize(("persona", "status"), [
    ("ceo", 200), ("pi", 200), ("lead", 200), ("reviewer", 200),
    ("researcher", 403), ("outsider", 403), ("operator", 403),
])
def test_the_review_pages_open_to_managers_and_reviewers(org, cycle, client_for, persona,
                                                          status):
    client = client_for(persona)
    assert client.get(reverse("budgets:reviews")).status_code == status
    assert client.get(reverse("budgets:review", args=[cycle.pk])).status_code == status


@pytest.mark.parametrize(("persona", "budgets"), [
    ("ceo", ["Program A", "Project A1", "Experiment 1", "Project A2", "Program B",
             "Project B1"]),
    ("pi", ["Program A", "Project A1", "Experiment 1", "Project A2"]),
    ("lead", ["Project A1", "Experiment 1"]),
    ("reviewer", ["Program A", "Project A1", "Experiment 1", "Project A2"]),
])
def test_each_follows_the_allocations_of_their_subtree(org, cycle, client_for, persona, budgets):
    page = client_for(persona).get(reverse("budgets:review", args=[cycle.pk]))
    shown = [i.node.name for g in page.context["groups"] for i in g.items]
    assert sorted(shown) == sorted(budgets)


@pytest.mark.parametrize(("persona", "decidable"), [
    ("ceo", {"Program A", "Project A1", "Experiment 1", "Project A2", "Program B",
             "Project B1"}),
    ("pi", {"Project A1", "Experiment 1", "Project A2"}),
    ("lead", {"Experiment 1"}),
    ("reviewer", set()),
])
def test_each_may_decide_only_below_the_nodes_they_manage(org, cycle, client_for, persona,
                                                           decidable):
    page = client_for(persona).get(reverse("budgets:review", args=[cycle.pk]))
    offered = {i.node.name for g in page.context["groups"] for i in g.items if i.can_review}
    assert offered == decidable
    assert page.content.decode().count('value="confirm"') == len(decidable)


def test_the_pi_confirms_a_project_on_the_page(org, cycle, client_for):
    response = decide(client_for("pi"), item(cycle, org.proj_a1))
    assert response.status_code == 302
    assert item(cycle, org.proj_a1).decision == "confirmed"


def test_the_lead_changes_an_experiment_through_htmx(org, cycle, client_for, htmx, shares_of):
    response = decide(client_for("lead"), item(cycle, org.exp_1), "change", 40, **htmx)
    assert response.status_code == 200
    assert 'id="review-body"' in response.content.decode()
    assert "1 of 2" in response.content.decode()  # the lead follows A1 and Experiment 1
    assert shares_of(org.exp_1) == 40


@pytest.mark.parametrize(("persona", "status"), [
    ("lead", 403),  # A1 is decided by Program A's managers
    ("reviewer", 403), ("researcher", 403), ("operator", 403), ("outsider", 403),
])
def test_the_others_cannot_decide_project_a1(org, cycle, client_for, unchanged, persona,
                                             status):
    with unchanged():
        assert decide(client_for(persona), item(cycle, org.proj_a1)).status_code == status
    assert item(cycle, org.proj_a1).decision == "pending"


def test_an_item_outside_the_subtree_is_not_found(org, cycle, client_for):
    assert decide(client_for("pi"), item(cycle, org.proj_b1)).status_code == 404


def test_a_second_decision_on_the_page_is_a_conflict(org, cycle, client_for, htmx, shares_of):
    decide(client_for("pi"), item(cycle, org.proj_a1))
    response = decide(client_for("ceo"), item(cycle, org.proj_a1), "change", 90, **htmx)
    assert response.status_code == 409
    assert "already confirmed by pi" in response.content.decode()
    assert shares_of(org.proj_a1) == 50


def test_a_change_without_shares_is_a_field_error(org, cycle, client_for, htmx, unchanged):
    with unchanged():
        response = decide(client_for("pi"), item(cycle, org.proj_a1), "change", **htmx)
    assert response.status_code == 422
    assert "Give the new shares." in response.content.decode()


def test_only_the_ceo_is_offered_the_schedule_form(org, cycle, client_for):
    assert client_for("ceo").get(reverse("budgets:reviews")).context["form"] is not None
    assert client_for("pi").get(reverse("budgets:reviews")).context["form"] is None


def test_the_ceo_schedules_a_cycle_from_the_page(org, client_for):
    response = client_for("ceo").post(reverse("budgets:reviews"), {
        "organisation": org.root.pk, "name": "2027 Q2",
        "opens_at": (NOW + timedelta(days=90)).strftime("%Y-%m-%dT%H:%M"),
        "due_at": (NOW + timedelta(days=104)).strftime("%Y-%m-%dT%H:%M"),
        "repeat_months": 3,
    })
    scheduled = ReviewCycle.objects.get()
    assert response.status_code == 302
    assert (scheduled.name, scheduled.state, scheduled.repeat_months) == ("2027 Q2",
                                                                          "scheduled", 3)


def test_a_deadline_before_the_opening_is_a_field_error_on_the_page(org, client_for):
    response = client_for("ceo").post(reverse("budgets:reviews"), {
        "organisation": org.root.pk, "name": "odd",
        "opens_at": (NOW + timedelta(days=9)).strftime("%Y-%m-%dT%H:%M"),
        "due_at": (NOW + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"),
    })
    assert response.status_code == 422
    assert response.context["form"].errors["due_at"][0].startswith(
        "The deadline must come after the opening"
    )
    assert not ReviewCycle.objects.exists()


def test_the_pi_may_not_schedule_a_cycle(org, client_for):
    response = client_for("pi").post(reverse("budgets:reviews"), {
        "organisation": org.root.pk, "name": "mine", "opens_at": "2030-01-01T00:00",
        "due_at": "2030-01-10T00:00",
    })
    assert response.status_code == 403
    assert not ReviewCycle.objects.exists()


@pytest.mark.parametrize(("persona", "link"), [
    ("ceo", True), ("pi", True), ("lead", True), ("reviewer", True),
    ("researcher", False), ("operator", False),
])
def test_the_navigation_links_to_reviews_only_for_those_who_may_open_them(
    org, cycle, client_for, persona, link
):
    home = client_for(persona).get("/").content.decode()
    assert (reverse("budgets:reviews") in home) == link


# The API

@pytest.mark.parametrize(("persona", "status", "count"), [
    ("ceo", 200, 6), ("pi", 200, 4), ("lead", 200, 2), ("reviewer", 200, 4),
    ("researcher", 403, None), ("outsider", 403, None), ("operator", 403, None),
])
def test_the_api_lists_the_items_each_follows(org, cycle, api_for, persona, status, count):
    response = api_for(persona).get("/api/review-items/", {"cycle": cycle.pk})
    assert response.status_code == status
    if count is not None:
        assert response.json()["count"] == count


def test_the_api_gives_the_cycle_s_progress_in_the_followed_subtree(org, cycle, api_for):
    reviews.confirm(org.lead, item(cycle, org.exp_1))
    body = api_for("pi").get(f"/api/reviews/{cycle.pk}/").json()
    assert body["progress"] == {"total": 4, "confirmed": 1, "changed": 0, "pending": 3,
                                "flagged": 0}


def test_the_api_confirms_then_answers_a_second_decider_409(org, cycle, api_for, shares_of):
    target = item(cycle, org.proj_a2)
    first = api_for("pi").post(f"/api/review-items/{target.pk}/confirm/", {}, format="json")
    second = api_for("ceo").post(f"/api/review-items/{target.pk}/change/", {"shares": 5},
                                 format="json")
    assert first.status_code == 200 and first.json()["decision"] == "confirmed"
    assert second.status_code == 409
    assert "already confirmed by pi" in second.json()["detail"]
    assert shares_of(org.proj_a2) == 50


def test_the_api_refuses_a_reviewer_s_decision(org, cycle, api_for, unchanged):
    target = item(cycle, org.proj_a2)
    with unchanged():
        response = api_for("reviewer").post(f"/api/review-items/{target.pk}/change/",
                                            {"shares": 5}, format="json")
    assert response.status_code == 403


def test_the_api_refuses_zero_shares(org, cycle, api_for, unchanged):
    target = item(cycle, org.proj_a2)
    with unchanged():
        response = api_for("pi").post(f"/api/review-items/{target.pk}/change/",
                                      {"shares": 0}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "shares"


def test_the_api_schedules_a_cycle_for_the_ceo_only(org, api_for):
    body = {"organisation": "org", "name": "2027 Q2", "opens_at": "2030-01-01T00:00:00Z",
            "due_at": "2030-01-15T00:00:00Z", "repeat_months": 3}
    assert api_for("pi").post("/api/reviews/", body, format="json").status_code == 403
    created = api_for("ceo").post("/api/reviews/", body, format="json")
    assert created.status_code == 201
    assert (created.json()["state"], created.json()["repeat_months"]) == ("scheduled", 3)


def test_what_the_pi_decides_are_the_children_of_the_nodes_they_manage(org, cycle, client_for):
    reviews.confirm(org.pi, item(cycle, org.proj_a1))
    page = client_for("pi").get(reverse("budgets:review", args=[cycle.pk]), {"mine": "1"})
    assert [g.parent.path for g in page.context["groups"]] == [
        "org/prog-a", "org/prog-a/proj-a1"
    ]


def test_the_cycle_page_reads_a_fixed_number_of_queries(org, cycle, client_for):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from budgets.models import BudgetNode

    client = client_for("ceo")

    def count():
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("budgets:review", args=[cycle.pk])).status_code == 200
        return len(queries)

    before = count()
    for k in range(5):  # five more projects, each with a researcher below: five more groups
        project = BudgetNode.objects.create(parent=org.prog_b, slug=f"p{k}", name=f"P{k}",
                                            kind="project")
        leaf = BudgetNode.objects.create(parent=project, slug="r", name="R", kind="researcher")
        for node in (project, leaf):
            ReviewItem.objects.create(cycle=cycle, node=node, cluster=org.cluster, shares=10)
    assert count() == before


def test_each_group_names_its_deciders(org, cycle, client_for):
    page = client_for("ceo").get(reverse("budgets:review", args=[cycle.pk]))
    deciders = {g.parent.path: [u.username for u in g.deciders] for g in page.context["groups"]}
    # Program B has no manager: the CEO decides below it
    assert deciders == {"org": ["ceo"], "org/prog-a": ["pi"], "org/prog-a/proj-a1": ["lead"],
                        "org/prog-b": ["ceo"]}
