"""The cluster dashboard's queue and fleet charts against the hand-built week of
tests/fixtures_reports.py (custom range Mon 3 to Sun 9 March, daily buckets, 7-day window):
waits by budget ratio, pending GPUs per leaf budget, host states over time.

Ratios at the start of the day each wait began (7 days of usage / fraction x capacity; 10
healthy GPUs all along, 1680 GPU-h per window), with two extra usage rollups on 1 March:
  W1 proj-a1 Mon 08:00 -> Mon:  0 / 588        = 0%     wait 30 min
  W2 proj-a1 Wed 10:00 -> Wed: 10 / 588        = 1.7%   wait 10 min, requeue 60 min
  W3 proj-a2 Thu 00:00 -> Thu: (560 + 4) / 588 = 95.9%  wait 120 min
  W7 proj-b1 Sun 2 22:00, before the range -> Mon: (600 + 10) / 504 = 121%  wait 180 min
"""

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from fleet.models import HostEvent
from reports import accounting, budget_history, fleet_statistics, queue_statistics
from scheduler.models import UsageRollup


def at(day, hour=0, minute=0):
    return datetime(2025, 3, day, hour, minute, tzinfo=UTC)


WEEK = {"range": "custom", "start": "2025-03-03", "end": "2025-03-09"}


def figure(body, figure_id):
    match = re.search(rf'<script id="{figure_id}" type="application/json">(.*?)</script>',
                      body, re.S)
    assert match, f"no figure {figure_id}"
    return json.loads(match.group(1))


def week_page(history):
    response = history.client_for("ceo").get(reverse("reports:cluster", args=["h100"]), WEEK)
    assert response.status_code == 200
    return response.content.decode()


def test_waits_by_the_budget_ratio_when_the_wait_began(history):
    for budget, gpu_hours in [(history.proj_a2, 560), (history.proj_b1, 600)]:
        UsageRollup.objects.create(cluster=history.cluster, budget=budget, hour=at(1, 12),
                                   gpu_seconds=gpu_hours * 3600)
    bands = {b["name"]: b for b in queue_statistics.queue_figures(
        history.cluster, accounting.Tree(), at(3), at(10), now=at(20))["bands"]}
    assert list(bands) == ["under 50%", "50-90%", "90-110%", "110-200%", "200% and over"]
    assert bands["under 50%"]["count"] == 3  # W1, W2 and W2's requeue
    assert bands["under 50%"]["median"] == pytest.approx(30 * 60)
    assert bands["under 50%"]["p95"] == pytest.approx((30 + 0.9 * 30) * 60)
    assert (bands["90-110%"]["count"], bands["90-110%"]["median"]) == (1, 120 * 60)
    assert (bands["110-200%"]["count"], bands["110-200%"]["median"]) == (1, 180 * 60)
    assert bands["50-90%"]["count"] == bands["200% and over"]["count"] == 0
    assert bands["50-90%"]["median"] is None

    body = week_page(history)
    chart = figure(body, "fig-ratio-waits")
    assert chart["data"][0]["x"] == ["under 50% (3)", "50-90% (0)", "90-110% (1)",
                                     "110-200% (1)", "200% and over (0)"]
    assert chart["data"][0]["y"] == [30, None, 120, 180, None]  # medians, minutes
    assert "Budget ratio: the fair-share ratio" in body  # the definition, on the page


def test_the_ratio_follows_the_scheduler_definition(history):
    """One budget at one moment, by hand: proj-a1 on Fri 7 March 00:00 used 10 GPU-h in the
    7 days before; its fraction was 0.35 until Thu 12:00 and 0.525 after (150 of 200 shares
    of prog-a's 0.7): entitlement (6.5 x 0.35 + 0.5 x 0.525) x 240 GPU-h = 609."""
    tree = accounting.Tree()
    history_ = budget_history.History.load(history.cluster, tree, at(3), at(10), now=at(20))
    ratios = queue_statistics.BucketRatios(history_, tree)
    assert ratios.at(history.proj_a1.pk, at(7, 15).timestamp()) == pytest.approx(10 / 609)
    # a program's ratio counts its subtree: prog-a used 10 + 4 of 0.7 x 1680
    assert ratios.at(history.prog_a.pk, at(7).timestamp()) == pytest.approx(14 / 1176)


def test_pending_gpus_per_leaf_budget_with_the_rest_as_others(history, monkeypatch):
    queue = queue_statistics.queue_figures(
        history.cluster, accounting.Tree(), at(3), at(10), now=at(20)
    )
    pending = queue["pending"]
    # most pending GPU-time first: proj-b1 21 GPU-h, proj-a2 16, proj-a1 2 + 2 x 70 min
    assert list(pending) == ["prog-b/proj-b1", "prog-a/proj-a2", "prog-a/proj-a1"]
    assert pending["prog-b/proj-b1"] == pytest.approx([1 / 24, 0, 0, 0, 0, 0, 20 / 24])
    assert pending["prog-a/proj-a2"] == pytest.approx([0, 0, 0, 16 / 24, 0, 0, 0])
    assert pending["prog-a/proj-a1"] == pytest.approx([2 / 24, 0, 2 * 70 / 60 / 24, 0, 0, 0, 0])
    monkeypatch.setattr(queue_statistics, "PENDING_TOP", 1)
    body = week_page(history)
    chart = {t["name"]: t["y"] for t in figure(body, "fig-pending")["data"]}
    assert list(chart) == ["prog-b/proj-b1", "others (2)"]
    assert chart["others (2)"] == pytest.approx(
        [round(2 / 24, 2), 0, round(2 * 70 / 60 / 24, 2), round(16 / 24, 2), 0, 0, 0], abs=0.01)


def test_host_states_over_time_replay_the_host_events(history):
    """h100-0 fails Sat 8 March 00:00, is repaired from 08:00, back at 20:00; h100-1 was
    drained before the range and is returned Tue 4 March 06:00."""
    h0, h1 = history.cluster.hosts.order_by("name")
    for host, when, kind in [
        (h1, at(2, 12), "drain_requested"), (h1, at(2, 13), "drained"),
        (h1, at(4, 6), "returned"),
        (h0, at(8), "failed"), (h0, at(8, 8), "repair_started"),
        (h0, at(8, 20), "repair_succeeded"), (h0, at(8, 20), "returned"),
    ]:
        HostEvent.objects.create(host=host, at=when, kind=kind)
    fleet = fleet_statistics.fleet_figures(history.cluster, at(3), at(10), now=at(20))
    states = fleet["over_time"]
    assert states["AVAILABLE"] == pytest.approx([1, 1 + 18 / 24, 2, 2, 2, 1 + 4 / 24, 2])
    assert states["DRAINED"] == pytest.approx([1, 6 / 24, 0, 0, 0, 0, 0])
    assert states["DOWN"] == pytest.approx([0, 0, 0, 0, 0, 8 / 24, 0])
    assert states["REPAIRING"] == pytest.approx([0, 0, 0, 0, 0, 12 / 24, 0])
    assert sum(states["ESCALATED"]) == sum(states["DRAINING"]) == 0
    assert fleet["totals"]["failed"] == 1 and fleet["repairs"]["share"] == 0

    body = week_page(history)
    chart = {t["name"]: t["y"] for t in figure(body, "fig-host-states")["data"]}
    assert list(chart) == ["Available", "Draining", "Drained", "Repairing", "Down",
                           "Escalated"]
    assert chart["Down"] == [0, 0, 0, 0, 0, 0.33, 0]
    assert figure(body, "fig-host-states")["data"][0]["stackgroup"] == "hosts"


def test_preemptions_and_requeues_per_day(history):
    queue = queue_statistics.queue_figures(
        history.cluster, accounting.Tree(), at(3), at(10), now=at(20)
    )
    assert queue["preemptions"] == [0, 0, 1, 1, 0, 0, 0]  # W2 Wed 12:05, W3 Thu 05:05
    assert queue["requeues"] == [0, 0, 1, 0, 0, 0, 0]
    assert queue["times"][0] == at(3) and queue["times"][-1] == at(10) - timedelta(days=1)
