"""Requests from anyone: a member asks for more for their own budget (shares, a temporary
boost, a new child); the deciders may pass it up the tree; a thread keeps states and
comments; only the first decision counts."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from budgets import services
from budgets.models import (
    AllocationChange,
    BudgetNode,
    ChangeRequest,
    MembershipChange,
    ScheduledShareChange,
)
from budgets.tasks import apply_share_changes


@pytest.fixture
def researcher_request(org):
    """The researcher, a member of Project A1, asks for 75 shares for it (now 50)."""
    return services.request_change(org.researcher, org.proj_a1, org.cluster, shares=75,
                                   reason="the new model does not fit")


def test_a_member_files_a_request_for_their_budget(org, researcher_request):
    assert (researcher_request.requested_by, researcher_request.deciding_node) == (
        org.researcher, org.prog_a
    )


def test_the_request_goes_to_the_managers_of_the_parent(org, researcher_request):
    assert list(ChangeRequest.objects.restrict(org.pi, "decide")) == [researcher_request]
    assert not ChangeRequest.objects.restrict(org.lead, "decide").exists()
    assert not ChangeRequest.objects.restrict(org.ceo, "decide").exists()


def test_a_decider_passes_it_up_to_the_ceo(org, researcher_request, client_for):
    url = reverse("budgets:request_pass_up", kwargs={"pk": researcher_request.pk})
    response = client_for("pi").post(url, {"comment": "program A is full"})
    assert response.status_code == 302
    assert list(ChangeRequest.objects.restrict(org.ceo, "decide")) == [researcher_request]
    assert not ChangeRequest.objects.restrict(org.pi, "decide").exists()
    assert researcher_request.entries.last().text == (
        "passed up to the managers of org: program A is full"
    )


def test_above_the_root_there_is_nobody(org, researcher_request):
    services.pass_up(org.pi, researcher_request)
    with pytest.raises(services.BudgetError, match="there is nobody above"):
        services.pass_up(org.ceo, researcher_request)


def test_a_member_cannot_pass_up(org, researcher_request, client_for, unchanged):
    url = reverse("budgets:request_pass_up", kwargs={"pk": researcher_request.pk})
    with unchanged():
        assert client_for("lead").post(url).status_code == 403


def test_the_thread_keeps_states_and_comments_in_order(org, researcher_request, client_for):
    url = reverse("budgets:request_comment", kwargs={"pk": researcher_request.pk})
    client_for("pi").post(url, {"text": "how many GPU-hours a week?"})
    client_for("researcher").post(url, {"text": "about 400"})
    services.decide(org.pi, researcher_request, approve=True, comment="fine")
    assert [(e.kind, e.author_name, e.text) for e in researcher_request.entries.all()] == [
        ("filed", "researcher", "the new model does not fit"),
        ("comment", "pi", "how many GPU-hours a week?"),
        ("comment", "researcher", "about 400"),
        ("approved", "pi", "fine"),
    ]


def test_a_comment_with_htmx_answers_the_thread(org, researcher_request, client_for, htmx):
    url = reverse("budgets:request_comment", kwargs={"pk": researcher_request.pk})
    response = client_for("lead").post(url, {"text": "seconded"}, **htmx)
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section class="card" id="thread">')
    assert "<strong>lead</strong> wrote: seconded" in body


def test_an_empty_comment_is_refused(org, researcher_request, client_for, htmx):
    url = reverse("budgets:request_comment", kwargs={"pk": researcher_request.pk})
    response = client_for("pi").post(url, {"text": "  "}, **htmx)
    assert response.status_code == 422
    assert researcher_request.entries.count() == 1


def test_who_cannot_see_the_request_cannot_comment(org, researcher_request, client_for):
    url = reverse("budgets:request_comment", kwargs={"pk": researcher_request.pk})
    assert client_for("outsider").post(url, {"text": "hello"}).status_code == 404
    assert researcher_request.entries.count() == 1


def test_deciding_twice_gives_one_decision_and_a_conflict(org, researcher_request, client_for,
                                                          shares_of):
    org.prog_a.managers.add(org.operator)
    url = reverse("budgets:request", kwargs={"pk": researcher_request.pk})
    first = client_for("pi").post(url, {"decision": "approve", "comment": ""})
    second = client_for("operator").post(url, {"decision": "reject", "comment": "no"})
    assert (first.status_code, second.status_code) == (302, 409)
    assert "This request was already approved by pi." in second.content.decode()
    assert AllocationChange.objects.filter(request=researcher_request).count() == 1
    assert shares_of(org.proj_a1) == 75


# Boosts ----------------------------------------------------------------------------------


@pytest.fixture
def boost(org):
    """The lead asks for 80 shares for Project A1 (now 50) for three days; the PI approves."""
    until = timezone.now().replace(microsecond=0) + timedelta(days=3)
    change_request = services.request_change(
        org.lead, org.proj_a1, org.cluster, shares=80, kind="boost", boost_until=until,
        reason="conference deadline",
    )
    services.decide(org.pi, change_request, approve=True)
    return change_request


def test_an_approved_boost_applies_at_once(org, boost, shares_of):
    assert shares_of(org.proj_a1) == 80


def test_the_boost_ends_at_its_date(org, boost, shares_of):
    assert services.apply_due_share_changes(now=boost.boost_until - timedelta(seconds=1)) == 0
    assert shares_of(org.proj_a1) == 80
    assert services.apply_due_share_changes(now=boost.boost_until + timedelta(minutes=3)) == 1
    assert shares_of(org.proj_a1) == 50


def test_the_end_of_a_boost_is_audited_at_its_date(org, boost):
    services.apply_due_share_changes(now=boost.boost_until + timedelta(minutes=3))
    entry = AllocationChange.objects.filter(node=org.proj_a1).first()
    assert (entry.old_shares, entry.new_shares, entry.at, entry.request) == (
        80, 50, boost.boost_until, boost
    )
    assert entry.reason == f"boost of request #{boost.pk} ended"


def test_the_end_of_a_boost_applies_once(org, boost):
    later = boost.boost_until + timedelta(minutes=3)
    services.apply_due_share_changes(now=later)
    assert services.apply_due_share_changes(now=later) == 0
    assert ScheduledShareChange.objects.get().applied_at == later


def test_beat_runs_the_share_changes_every_minute():
    entry = next(e for e in settings.CELERY_BEAT_SCHEDULE.values()
                 if e["task"] == "budgets.apply_share_changes")
    assert entry["schedule"] == 60.0
    assert apply_share_changes.name == "budgets.apply_share_changes"


@pytest.mark.parametrize(
    ("fields", "words"),
    [({"boost_until": None}, "Say until when the boost lasts."),
     ({"boost_until": "past"}, "A boost must end in the future."),
     ({"shares": 40}, "A boost asks for more shares than now.")],
)
def test_bad_boosts_are_refused(org, unchanged, fields, words):
    data = {"shares": 80, "boost_until": timezone.now() + timedelta(days=1), **fields}
    if data["boost_until"] == "past":
        data["boost_until"] = timezone.now() - timedelta(hours=1)
    with unchanged(), pytest.raises(services.BudgetError, match=words):
        services.request_change(org.lead, org.proj_a1, org.cluster, kind="boost",
                                reason="x", **data)


# A new child -----------------------------------------------------------------------------


@pytest.fixture
def child_request(org):
    return services.request_change(
        org.researcher, org.proj_a1, org.cluster, kind="child", shares=10,
        child_name="Sparse attention", child_slug="sparse", reason="a line of my own",
    )


def test_a_child_request_goes_to_the_budgets_own_managers(org, child_request):
    assert child_request.deciding_node == org.proj_a1
    assert list(ChangeRequest.objects.restrict(org.lead, "decide")) == [child_request]


def test_an_approved_child_exists_with_shares_and_its_requester(org, child_request, shares_of):
    services.decide(org.lead, child_request, approve=True)
    child = BudgetNode.objects.get(path="org/prog-a/proj-a1/sparse")
    assert (child.name, child.kind, shares_of(child)) == ("Sparse attention", "researcher", 10)
    assert list(child.members.all()) == [org.researcher]
    assert MembershipChange.objects.get(node=child).changed_by_name == "lead"


@pytest.mark.parametrize(
    ("slug", "words"),
    [("exp-1", "already has a child named exp-1"), ("no spaces", "letters, digits")],
)
def test_bad_child_names_are_refused(org, unchanged, slug, words):
    with unchanged(), pytest.raises(services.BudgetError, match=words):
        services.request_change(org.researcher, org.proj_a1, org.cluster, kind="child",
                                shares=10, child_name="X", child_slug=slug, reason="x")


def test_the_form_files_a_boost(org, client_for):
    url = reverse("budgets:request_create", kwargs={"pk": org.proj_a1.pk})
    response = client_for("researcher").post(url, {
        "kind": "boost", "cluster": org.cluster.pk, "shares": 90,
        "boost_until": (timezone.now() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"),
        "reason": "deadline",
    })
    created = ChangeRequest.objects.get()
    assert response.status_code == 302
    assert (created.kind, created.requested_shares, created.requested_by) == (
        "boost", 90, org.researcher
    )
