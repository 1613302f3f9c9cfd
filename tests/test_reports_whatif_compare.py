"""The what-if comparison: several parameter sets replayed over the same days, one Celery task
per set (queued as one group), each with its progress, then one table. On `tiny`
(tests/fixtures_reports.py): W1 on a (4 GPUs, 2 h, resumable) starts at T0 on the only host;
W2 on b (4 GPUs, 1 h) comes 30 min later and waits for W1 to end, 1.5 h: in every set the
median wait is 45 min (b outranks a, but taking W1's 4 GPUs would give b twice its share).
"""

import pytest
from django.urls import reverse

from portal.celery import app
from reports.models import WhatIf, WhatIfComparison

SET = {"window_days": 1, "max_min_runtime_hours": 8, "grace_minutes": 5, "hysteresis": 0.1}
# what the form shows in every set: the cluster's defaults (7-day window, 8 h, 5 min, 0.1)
SHOWN = {"window_days": "7.0", "max_min_runtime_hours": "8.0", "grace_minutes": "5.0",
         "hysteresis": "0.1"}


def url(tiny):
    return reverse("reports:what_if_compare", args=[tiny.cluster.name])


def post(days=2, *sets):
    """The form as a browser posts it: the sets given, the others as shown."""
    data = {"days": days, "set-TOTAL_FORMS": 3, "set-INITIAL_FORMS": 0,
            "set-MIN_NUM_FORMS": 2, "set-MAX_NUM_FORMS": 3}
    for number, values in enumerate([*sets, SHOWN, SHOWN, SHOWN][:3]):
        data.update({f"set-{number}-{key}": value for key, value in values.items()})
    return data


@pytest.fixture
def eager():
    """The group runs at once, in this process (a real worker runs it in tests/integration)."""
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.mark.parametrize("persona, status", [
    ("ceo", 200), ("pi", 200), ("researcher", 403), ("outsider", 403),
])
def test_who_may_ask_for_a_comparison(tiny, persona, status):
    assert tiny.clients[persona].get(url(tiny)).status_code == status


def test_the_form_starts_every_set_at_the_cluster_parameters(tiny):
    page = tiny.clients["pi"].get(url(tiny)).content.decode()
    for number in range(3):
        for field, value in SHOWN.items():
            assert f'name="set-{number}-{field}" value="{value}"' in page


def test_two_sets_are_queued_as_two_tasks_once_committed(
        tiny, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = tiny.clients["pi"].post(
            url(tiny), post(2, SET, {**SET, "max_min_runtime_hours": 1}))
    comparison = WhatIfComparison.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:what_if_comparison", args=[comparison.pk])
    assert len(callbacks) == 1
    sets = list(comparison.sets.order_by("pk").values_list("params", "state"))
    assert sets == [
        ({"days": 2, "window": 86400, "max_min_runtime": 8 * 3600, "grace": 300,
          "hysteresis": 0.1}, "queued"),
        ({"days": 2, "window": 86400, "max_min_runtime": 3600, "grace": 300,
          "hysteresis": 0.1}, "queued"),
    ]


def test_a_changed_third_set_is_replayed_too(tiny, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        tiny.clients["pi"].post(url(tiny), post(2, SET, {**SET, "hysteresis": 0.5},
                                                {**SET, "grace_minutes": 1}))
    graces = WhatIf.objects.order_by("pk").values_list("params__grace", flat=True)
    assert list(graces) == [300, 300, 60]


def test_an_emptied_third_set_is_left_out(tiny, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        tiny.clients["pi"].post(url(tiny), post(2, SET, {**SET, "hysteresis": 0.5},
                                                dict.fromkeys(SET, "")))
    assert WhatIf.objects.count() == 2


@pytest.mark.parametrize("sets, field, message", [
    ((SET, {**SET, "hysteresis": ""}), "set-1-hysteresis", "This field is required."),
    ((SET, {**SET, "grace_minutes": -1}), "set-1-grace_minutes", "greater than or equal to 0"),
    ((SET, {**SET, "window_days": "a week"}), "set-1-window_days", "Enter a number."),
])
def test_a_bad_set_gives_its_field_an_error_and_queues_nothing(tiny, sets, field, message):
    response = tiny.clients["pi"].post(url(tiny), post(2, *sets))
    assert response.status_code == 200
    page = response.content.decode()
    assert message in page
    assert f'name="{field}"' in page
    assert not WhatIfComparison.objects.exists() and not WhatIf.objects.exists()


def test_two_equal_sets_are_refused(tiny):
    response = tiny.clients["pi"].post(url(tiny), post(2, SET, dict(SET)))
    assert "Two sets are the same" in response.content.decode()
    assert not WhatIfComparison.objects.exists()


def test_a_bad_number_of_days_is_a_field_error(tiny):
    response = tiny.clients["pi"].post(url(tiny), post(0, SET, {**SET, "hysteresis": 0.5}))
    assert "greater than or equal to 1" in response.content.decode()
    assert not WhatIfComparison.objects.exists()


def test_the_sets_replay_side_by_side_in_one_table(
        tiny, eager, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        tiny.clients["pi"].post(url(tiny), post(2, SET, {**SET, "max_min_runtime_hours": 1}))
    first, second = WhatIf.objects.order_by("pk")
    assert (first.state, second.state) == ("done", "done")
    assert (first.result["start"], first.result["end"]) == (
        second.result["start"], second.result["end"])  # the same days
    comparison = reverse("reports:what_if_comparison", args=[first.comparison_id])
    fragment = tiny.clients["pi"].get(comparison, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and "every 1s" not in fragment
    for line in ("actual", "as-is", "set-1", "set-2"):
        row = fragment.split(f'<tr id="{line}">', 1)[1].split("</tr>", 1)[0]
        assert '<td class="num">45</td>' in row  # the median wait, in minutes
    assert "org/prog/a" in fragment and "org/other" not in fragment  # the PI's subtree only


def test_each_set_shows_its_progress_while_they_run(tiny):
    comparison = WhatIfComparison.objects.create(cluster=tiny.cluster, days=2,
                                                 requested_by=tiny.users["pi"])
    for progress, state in ((0.4, "running"), (0.0, "queued")):
        WhatIf.objects.create(cluster=tiny.cluster, requested_by=tiny.users["pi"],
                              comparison=comparison, state=state, progress=progress,
                              params={"days": 2, **{"window": 86400, "max_min_runtime": 3600,
                                                    "grace": 300, "hysteresis": progress}})
    page = reverse("reports:what_if_comparison", args=[comparison.pk])
    fragment = tiny.clients["pi"].get(page, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in fragment
    assert 'id="set-1-progress" value="40"' in fragment
    assert 'id="set-2-progress" value="0"' in fragment and "Waiting for a worker" in fragment


@pytest.mark.parametrize("persona, status", [
    ("pi", 200), ("ceo", 200), ("researcher", 403), ("outsider", 403),
])
def test_who_may_see_a_comparison(tiny, persona, status):
    comparison = WhatIfComparison.objects.create(cluster=tiny.cluster, days=2,
                                                 requested_by=tiny.users["pi"])
    page = reverse("reports:what_if_comparison", args=[comparison.pk])
    assert tiny.clients[persona].get(page).status_code == status
