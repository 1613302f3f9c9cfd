"""The warm what-if: "replayed as is" starts from the cluster as it really was at the start of
the period, so it reproduces what actually happened (reports/whatif.py, the simulator's
``InitialState``)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from fleet.models import Cluster
from portal import demo
from reports import tasks
from reports.models import WhatIf


@pytest.fixture
def seeded_week(db):
    """The demo institute with its seeded week of history (scheduler/history.py)."""
    now = timezone.now().replace(microsecond=0)
    since = now - timedelta(days=7)
    demo.seed(since=since, now=now)
    demo.seed_history(since, now)
    return now


def test_as_is_delivers_what_was_delivered_per_budget_on_the_seeded_history(seeded_week):
    ceo = User.objects.get(username="ceo")
    off = {}
    for cluster in Cluster.objects.order_by("name"):
        what_if = WhatIf.objects.create(cluster=cluster, requested_by=ceo, params={"days": 3})
        assert tasks.run_what_if(what_if.pk) == "done"
        what_if.refresh_from_db()
        result = what_if.result
        assert result["at_start"]["running"] > 0  # the week before left work running
        actual, as_is = result["actual"]["budgets"], result["as_is"]["budgets"]
        for path, figures in actual.items():
            replayed = as_is[path]["delivered_h"]
            if replayed != pytest.approx(figures["delivered_h"], rel=0.02):
                off[cluster.name, path] = (figures["delivered_h"], replayed)
    assert off == {}
