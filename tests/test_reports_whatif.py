"""The what-if: two days of real submissions replayed through the simulator by the Celery
task, next to what happened; who may ask for one and which allocations they may change.

    org  (ceo)
    ├── prog  1 share   (pi)
    │   ├── a  1 -> 3 in the what-if
    │   └── b  1
    └── other  1

Cluster tiny: one host of 4 GPUs. T0 = 47 h ago (1 h into the 2-day replay):
  W1 a: 4 GPUs, min_runtime 2 h, resumable; submitted T0, ran T0 -> T0 + 2 h (completed).
  W2 b: 4 GPUs, min_runtime 1 h; submitted T0 + 30 min, ran T0 + 2 h -> T0 + 3 h (completed).
The replay starts W1 at once and protects it for its whole run, so W2 waits 1.5 h, as it did.
Capacity of the replay: 4 GPUs x 48 h = 192 GPU-h. Fractions: prog 1/2, a and b 1/4 each
(what-if: a 3/8, b 1/8), other 1/2. Delivered: a 8 GPU-h, b 4 GPU-h.
"""


from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from reports import tasks, whatif
from reports.models import WhatIf
from scheduler.models import Event, Run, Workload

HOUR = 3600


def test_the_task_replays_the_history_with_the_changes(tiny):
    what_if = WhatIf.objects.create(
        cluster=tiny.cluster, requested_by=tiny.users["pi"],
        params={"days": 2, "window": 86400, "hysteresis": 0.5,
                "shares": {"org/prog/a": 3}},
    )
    assert tasks.run_what_if(what_if.pk) == "done"
    what_if.refresh_from_db()
    assert (what_if.state, what_if.progress, what_if.error) == ("done", 1.0, "")
    result = what_if.result
    assert (result["jobs"], result["skipped"]) == (2, 0)
    as_is, what, actual = result["as_is"], result["what_if"], result["actual"]
    approx = pytest.approx
    for side in (as_is, what):
        delivered = {p: b["delivered_h"] for p, b in side["budgets"].items()}
        assert delivered == approx({"org": 12, "org/prog": 12, "org/prog/a": 8,
                                    "org/prog/b": 4, "org/other": 0}, abs=1e-6)
        assert side["waits"] == {"n": 2, "p50": approx(2700), "p95": approx(0.95 * 5400)}
        assert side["preemptions"] == 0
    entitled = {p: b["entitlement_h"] for p, b in as_is["budgets"].items()}
    assert entitled == approx({"org": 192, "org/prog": 96, "org/prog/a": 48, "org/prog/b": 48,
                               "org/other": 96})
    entitled = {p: b["entitlement_h"] for p, b in what["budgets"].items()}
    assert entitled == approx({"org": 192, "org/prog": 96, "org/prog/a": 72, "org/prog/b": 24,
                               "org/other": 96})
    assert result["params"]["what_if"] == {"window": 86400, "max_min_runtime": 8 * HOUR,
                                           "grace": 300, "hysteresis": 0.5,
                                           "preempt_idle": False}
    # what actually happened: the same deliveries and waits, from the review report
    assert actual["budgets"]["org/prog/a"]["delivered_h"] == approx(8)
    assert actual["budgets"]["org/prog/b"]["delivered_h"] == approx(4)
    assert actual["budgets"]["org"]["entitlement_h"] == approx(192, rel=1e-3)
    assert actual["waits"] == {"n": 2, "p50": approx(2700), "p95": approx(0.95 * 5400)}


def test_a_claimed_what_if_is_not_run_twice(tiny):
    what_if = WhatIf.objects.create(cluster=tiny.cluster, requested_by=tiny.users["ceo"],
                                    params={"days": 2}, state=WhatIf.State.RUNNING)
    assert tasks.run_what_if(what_if.pk) == "not queued"


def url(tiny):
    return reverse("reports:what_if", args=[tiny.cluster.name])


@pytest.mark.parametrize("persona, status", [
    ("ceo", 200), ("pi", 200), ("researcher", 403), ("outsider", 403),
])
def test_who_may_ask_for_a_what_if(tiny, persona, status):
    assert tiny.clients[persona].get(url(tiny)).status_code == status


def test_a_manager_changes_only_allocations_inside_their_subtree(
        tiny, django_capture_on_commit_callbacks):
    form = {"days": 2, "window_days": 1, "max_min_runtime_hours": 8, "hysteresis": 0.5}
    pi = tiny.clients["pi"]
    page = pi.get(url(tiny)).content.decode()
    assert f'name="shares_{tiny.a.pk}"' in page and f'name="shares_{tiny.b.pk}"' in page
    assert f'name="shares_{tiny.other.pk}"' not in page  # not below a node the PI manages
    assert f'name="shares_{tiny.prog.pk}"' not in page  # their own node: a change request
    refused = pi.post(url(tiny), {**form, f"shares_{tiny.other.pk}": 5})
    assert refused.status_code == 403
    assert not WhatIf.objects.exists()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = pi.post(url(tiny), {**form, f"shares_{tiny.a.pk}": 3})
    what_if = WhatIf.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:what_if_detail", args=[what_if.pk])
    assert len(callbacks) == 1  # the Celery task is sent once the row is committed
    assert what_if.params == {"days": 2, "window": 86400, "max_min_runtime": 8 * HOUR,
                              "hysteresis": 0.5, "preempt_idle": False,
                              "shares": {"org/prog/a": 3}}
    assert what_if.requested_by == tiny.users["pi"]


def test_progress_then_result_side_by_side(tiny):
    what_if = WhatIf.objects.create(cluster=tiny.cluster, requested_by=tiny.users["pi"],
                                    params={"days": 2, "shares": {"org/prog/a": 3}},
                                    state=WhatIf.State.RUNNING, progress=0.4)
    detail = reverse("reports:what_if_detail", args=[what_if.pk])
    pi = tiny.clients["pi"]
    fragment = pi.get(detail, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and 'hx-trigger="every 1s"' in fragment
    assert 'value="40"' in fragment  # the progress bar
    WhatIf.objects.filter(pk=what_if.pk).update(state=WhatIf.State.QUEUED)
    tasks.run_what_if(what_if.pk)
    done = pi.get(detail, HTTP_HX_REQUEST="true").content.decode()
    assert "every 1s" not in done
    assert "org/prog/a" in done and "org/other" not in done  # the PI's subtree only
    assert "72.0" in done and "48.0" in done  # what-if and as-is entitlement of a
    assert tiny.clients["ceo"].get(detail).status_code == 200
    assert tiny.clients["researcher"].get(detail).status_code == 403


def test_the_replays_leave_the_share_of_workloads_flagged_idle_idle(tiny):
    first = Workload.objects.filter(budget=tiny.a).get()
    Event.objects.create(workload=first, kind=Event.Kind.IDLE, reason="GPUs idle",
                         at=first.runs.get().started + timedelta(hours=1))  # while it ran
    what_if = WhatIf.objects.create(cluster=tiny.cluster, requested_by=tiny.users["pi"],
                                    params={"days": 2, "preempt_idle": True})
    assert tasks.run_what_if(what_if.pk) == "done"
    what_if.refresh_from_db()
    result = what_if.result
    assert result["idle_share"] == 0.5  # one of the two workloads
    assert result["params"]["what_if"]["preempt_idle"] is True
    assert result["params"]["as_is"]["preempt_idle"] is False
    assert {"idle_h", "idle_returned_h"} <= set(result["what_if"])


def test_the_period_is_whole_clock_hours_up_to_the_last_full_one():
    asked_at = datetime(2026, 3, 12, 14, 41, 40, tzinfo=UTC)
    assert whatif.period(asked_at, 3) == (datetime(2026, 3, 9, 14, tzinfo=UTC),
                                   datetime(2026, 3, 12, 14, tzinfo=UTC))


def test_usage_of_the_hour_the_period_starts_in_is_replayed_and_counted_actually(tiny):
    """W1 of org/prog/a started mid-hour, 47 h ago. Asked 48 h after halfway between the
    clock hour and W1's start, "the last 2 days" start at that clock hour: both sides count
    W1's first hour, which the hourly rollups charge to the hour it started in."""
    started = Run.objects.get(workload__budget=tiny.a).started
    hour = started.replace(minute=0, second=0)
    asked_at = hour + (started - hour) / 2 + timedelta(hours=48)
    what_if = WhatIf(cluster=tiny.cluster, requested_by=tiny.users["pi"], params={"days": 2})
    result = whatif.run(what_if, now=asked_at)
    assert result["actual"]["budgets"]["org/prog/a"]["delivered_h"] == pytest.approx(8)
    assert result["as_is"]["budgets"]["org/prog/a"]["delivered_h"] == pytest.approx(8)
