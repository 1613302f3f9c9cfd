"""A cluster created mid-period: its budgets' shares in force are those it had, not diluted by
the days before the cluster existed."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from budgets.models import AllocationChange, BudgetNode
from fleet.models import Cluster, Host
from reports.review_report import budget_report

WEEK_START = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.mark.django_db
def test_shares_in_force_count_only_the_time_the_cluster_existed():
    created = WEEK_START + timedelta(days=3)
    cluster = Cluster.objects.create(name="new", gpu_type="H100", created=created)
    Host.objects.create(cluster=cluster, name="n1", gpus=8)
    ceo = User.objects.create_user("ceo")
    root = BudgetNode.objects.create(slug="org", name="Org", kind="organisation")
    program = BudgetNode.objects.create(parent=root, slug="p", name="P", kind="program")
    other = BudgetNode.objects.create(parent=root, slug="q", name="Q", kind="program")
    for node, shares in [(program, 70), (other, 30)]:
        AllocationChange.objects.create(node=node, cluster=cluster, changed_by=ceo,
                                        changed_by_name="ceo", at=created, new_shares=shares)

    report = budget_report(cluster, WEEK_START, WEEK_START + timedelta(days=7),
                           now=WEEK_START + timedelta(days=7))

    row = next(r for r in report.rows if r.node == program)
    assert row.shares == pytest.approx(70)
    assert row.fraction == pytest.approx(0.7)
