"""The workload list's search, sort, class filter, count and numbered pages: one filter set
(scheduler.filters) behind the page, its CSV export and the API list, so each behaviour is
checked through all three. Workloads: tests/fixtures_scheduler.py (hosts of 5 GPUs)."""

import csv
import io

import pytest
from django.urls import reverse

from scheduler.models import Workload

PAGE = reverse("scheduler:workloads")
EXPORT = reverse("scheduler:workload_export")
API = "/api/workloads/"
CHANNELS = ["page", "csv", "api"]


def listed(channel, client_for, api_for, persona, query) -> list[str]:
    """The workload names a persona gets for a query, in the order shown."""
    if channel == "api":
        response = api_for(persona).get(API, query)
        assert response.status_code == 200, response.content
        return [w["name"] for w in response.json()["results"]]
    response = client_for(persona).get(PAGE if channel == "page" else EXPORT, query)
    assert response.status_code == 200
    if channel == "page":
        return [w.name for w in response.context["page"]]
    return [row["name"] for row in csv.DictReader(io.StringIO(response.content.decode()))]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"q": "wai"}, {"wait"}),  # name
        ({"q": "LEAD"}, {"wait", "a2"}),  # owner, whatever the case
        ({"q": "proj-a2"}, {"a2"}),  # budget
        ({"q": "exp-1", "state": "finished"}, {"done"}),
        ({"q": "nothing-like-this"}, set()),
    ],
)
def test_search_by_name_owner_and_budget(fleet, client_for, api_for, channel, query,
                                         expected):
    assert set(listed(channel, client_for, api_for, "ceo", query)) == expected


SEES_PROG_B = {"ceo": {"b"}, "operator": {"b"}, "bob": {"b"}, "pi": set(), "lead": set(),
               "researcher": set(), "outsider": set()}


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("persona", sorted(SEES_PROG_B))
def test_search_never_finds_what_the_persona_may_not_see(fleet, client_for, api_for, channel,
                                                         persona):
    found = listed(channel, client_for, api_for, persona, {"q": "prog-b"})
    assert set(found) == SEES_PROG_B[persona]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("name", ["a2", "b", "done", "run", "wait"]),
        ("-name", ["wait", "run", "done", "b", "a2"]),
        # equal values: newest (highest id) first
        ("owner", ["b", "a2", "wait", "done", "run"]),
        ("-gpus", ["wait", "run", "done", "b", "a2"]),
        ("contract", ["a2", "done", "b", "wait", "run"]),
        ("budget", ["done", "wait", "run", "a2", "b"]),
        ("state", ["done", "b", "a2", "wait", "run"]),
        ("id", ["run", "wait", "a2", "b", "done"]),
    ],
)
def test_sort_by_a_column(fleet, client_for, api_for, channel, sort, expected):
    assert listed(channel, client_for, api_for, "ceo", {"sort": sort}) == expected


@pytest.fixture
def classes(fleet):
    """Besides the fixture's small and unallocated work: a debug session and a run spanning
    two 5-GPU hosts."""
    template = fleet.wait
    for name, gpus, min_runtime in [("debug-session", 2, 900), ("wide", 8, 3600)]:
        Workload.objects.create(name=name, owner=template.owner, budget=template.budget,
                                cluster=template.cluster, gpus=gpus, min_runtime=min_runtime,
                                command="x")
    return fleet


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("workload_class", "expected"),
    [
        ("debug", {"debug-session"}),
        ("small", {"run", "wait", "b", "done"}),
        ("large", {"wide"}),
        ("unallocated", {"a2"}),
    ],
)
def test_filter_by_class(classes, client_for, api_for, channel, workload_class, expected):
    assert set(listed(channel, client_for, api_for, "ceo", {"class": workload_class})) \
        == expected


def test_an_unknown_sort_is_a_400_in_the_api(fleet, api_for):
    response = api_for("ceo").get(API, {"sort": "password"})
    assert response.status_code == 400
    assert response.json()["field"] == "sort"


def test_an_unknown_sort_on_the_page_shows_nothing_and_says_why(fleet, client_for):
    response = client_for("ceo").get(PAGE, {"sort": "password"})
    assert response.status_code == 200
    assert list(response.context["page"]) == []
    assert 'role="alert"' in response.content.decode()


@pytest.fixture
def many(fleet):
    template = fleet.wait
    Workload.objects.bulk_create([
        Workload(name=f"bulk-{i:03}", owner=template.owner, budget=template.budget,
                 cluster=template.cluster, gpus=1, min_runtime=0, command="x")
        for i in range(245)
    ])
    return fleet


def test_the_page_says_how_many_match(many, client_for):
    body = client_for("ceo").get(PAGE, {"page": 2}).content.decode()
    assert "<strong>250</strong> workloads, 51–100 shown" in body


def test_one_match_is_said_in_the_singular(fleet, client_for):
    body = client_for("ceo").get(PAGE, {"q": "wai"}).content.decode()
    assert "<strong>1</strong> workload<" in body


def test_numbered_pages_keep_the_filters(many, client_for):
    body = client_for("ceo").get(PAGE, {"state": "PENDING", "page": 3}).content.decode()
    pager = body[body.index('<nav class="pager"'):]
    pager = pager[:pager.index("</nav>")]
    assert '<span aria-current="page" class="current">3</span>' in pager
    for number in (1, 2, 4, 5):
        assert f'href="?state=PENDING&amp;page={number}">{number}</a>' in pager


def test_sort_links_keep_the_filters_and_flip_the_direction(fleet, client_for):
    body = client_for("ceo").get(PAGE, {"state": "PENDING", "sort": "name"}).content.decode()
    assert '<th aria-sort="ascending"><a href="?state=PENDING&amp;sort=-name"' in body
    assert 'href="?state=PENDING&amp;sort=gpus"' in body


def test_newest_first_is_marked_when_nothing_is_asked(fleet, client_for):
    body = client_for("ceo").get(PAGE).content.decode()
    assert '<th aria-sort="descending"><a href="?sort=submitted"' in body


def test_the_sort_survives_a_filter_change(fleet, client_for, htmx):
    """The table fragment carries the sort into the filter form (form=workload-filters)."""
    body = client_for("ceo").get(PAGE, {"sort": "-gpus"}, **htmx).content.decode()
    assert '<input type="hidden" name="sort" value="-gpus" form="workload-filters">' in body


VISIBLE = {
    "ceo": ["a2", "b", "done", "run", "wait"],
    "operator": ["a2", "b", "done", "run", "wait"],
    "pi": ["a2", "done", "run", "wait"],
    "lead": ["a2", "done", "run", "wait"],
    "researcher": ["done", "run", "wait"],
    "bob": ["b"],
    "outsider": [],
}


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("persona", sorted(VISIBLE))
def test_sorting_and_classes_show_each_persona_only_their_workloads(fleet, client_for, api_for,
                                                                    channel, persona):
    small = [name for name in VISIBLE[persona] if name != "a2"]  # a2 is unallocated
    assert listed(channel, client_for, api_for, persona, {"sort": "name"}) == VISIBLE[persona]
    assert listed(channel, client_for, api_for, persona, {"sort": "name", "class": "small"}) \
        == small
