"""Percentages, GPU-hours, percent->shares and effect_of, each checked against arithmetic done
by hand on the fixture organisation (10 GPUs; A 70 : B 30; A1 50 : A2 50; B1 alone)."""

from decimal import Decimal

import pytest

from budgets import services
from budgets.models import ChangeRequest


def rows_by_slug(org):
    return {row.node.slug: row for row in services.tree_rows(org.cluster)}


def test_tree_rows_come_parents_first_siblings_by_name(org):
    assert [row.node.slug for row in services.tree_rows(org.cluster)] == [
        "org", "prog-a", "proj-a1", "exp-1", "proj-a2", "prog-b", "proj-b1"
    ]


@pytest.mark.parametrize(
    ("slug", "of_parent", "of_cluster", "gpu_hours"),
    [
        ("org", 100.0, 100.0, 1680.0),  # 10 GPUs x 168 h
        ("prog-a", 70.0, 70.0, 1176.0),
        ("proj-a1", 50.0, 35.0, 588.0),  # DESIGN.md's example
        ("exp-1", 100.0, 35.0, 588.0),
        ("proj-a2", 50.0, 35.0, 588.0),
        ("prog-b", 30.0, 30.0, 504.0),
        ("proj-b1", 100.0, 30.0, 504.0),
    ],
)
def test_percentages_and_gpu_hours(org, slug, of_parent, of_cluster, gpu_hours):
    row = rows_by_slug(org)[slug]
    assert row.percent_of_parent == pytest.approx(of_parent)
    assert row.percent_of_cluster == pytest.approx(of_cluster)
    assert row.gpu_hours_per_week == pytest.approx(gpu_hours)


def test_a_node_without_shares_holds_nothing_and_shows_no_percent(org):
    services.add_child(org.pi, org.prog_a, name="A3", slug="proj-a3", kind="project")
    row = rows_by_slug(org)["proj-a3"]
    assert (row.shares, row.percent_of_parent, row.percent_of_cluster) == (None, None, 0.0)
    # ...and does not dilute its siblings: A1 still 35%.
    assert rows_by_slug(org)["proj-a1"].percent_of_cluster == pytest.approx(35.0)


def test_a_new_sibling_dilutes_everybody_under_the_same_parent(org):
    child = services.add_child(org.pi, org.prog_a, name="A3", slug="proj-a3", kind="project")
    services.set_shares(org.pi, child, org.cluster, 100)
    rows = rows_by_slug(org)
    # A1 50 of 200 -> 0.7 x 0.25 = 17.5%; A3 100 of 200 -> 35%; Program B untouched at 30%.
    assert rows["proj-a1"].percent_of_cluster == pytest.approx(17.5)
    assert rows["proj-a3"].percent_of_cluster == pytest.approx(35.0)
    assert rows["prog-b"].percent_of_cluster == pytest.approx(30.0)


@pytest.mark.parametrize(
    ("percent", "shares"),
    [
        ("60", 75),  # s / (s + 50) = 0.60 -> s = 75
        ("50", 50),  # as many as the sibling
        ("75", 150),  # 75 x 50 / 25
        ("20", 12),  # 20 x 50 / 80 = 12.5, rounded to even
        ("0.01", 1),  # 0.005 rounds to 0 but a budget keeps at least 1 share
        ("99.99", 499950),  # 99.99 x 50 / 0.01
    ],
)
def test_percent_of_parent_becomes_shares(org, percent, shares):
    assert services.shares_for_percent(org.proj_a1, org.cluster, Decimal(percent)) == shares


@pytest.mark.parametrize("percent", ["0", "100", "-1", "150"])
def test_percent_outside_0_to_100_is_refused(org, percent):
    with pytest.raises(services.BudgetError) as error:
        services.shares_for_percent(org.proj_a1, org.cluster, Decimal(percent))
    assert error.value.field == "percent"


def test_percent_that_needs_absurd_shares_is_refused(org):
    services.set_shares(org.pi, org.proj_a2, org.cluster, 1_000_000)
    # 99.99% of A next to 1,000,000 shares would take about 10 billion shares.
    with pytest.raises(services.BudgetError, match="between 1 and 1,000,000"):
        services.shares_for_percent(org.proj_a1, org.cluster, Decimal("99.99"))


def test_effect_of_a_project_request(org):
    change_request = services.request_change(org.lead, org.proj_a1, org.cluster, shares=75,
                                              reason="x")
    effects = {e.node.slug: (e.before, e.after, e.delta)
               for e in services.effect_of(change_request)}
    # A1 50 -> 75 of 125: 35% -> 0.7 x 0.6 = 42%; A2 50 of 125: 35% -> 0.7 x 0.4 = 28%.
    assert effects == {
        "proj-a1": pytest.approx((35.0, 42.0, 7.0)),
        "proj-a2": pytest.approx((35.0, 28.0, -7.0)),
    }


def test_effect_of_a_request_asked_in_percent(org):
    change_request = services.request_change(org.lead, org.proj_a1, org.cluster,
                                              percent=Decimal("60"), reason="x")
    assert change_request.requested_shares == 75
    after = {e.node.slug: e.after for e in services.effect_of(change_request)}
    assert after["proj-a1"] == pytest.approx(42.0)  # 60% of Program A's 70%


def test_effect_of_a_program_request(org):
    change_request = services.request_change(org.pi, org.prog_a, org.cluster, shares=90,
                                              reason="x")
    effects = {e.node.slug: (e.before, e.after) for e in services.effect_of(change_request)}
    # A 70 -> 90 of 120: 75%; B 30 of 120: 25%.
    assert effects == {"prog-a": pytest.approx((70.0, 75.0)),
                       "prog-b": pytest.approx((30.0, 25.0))}


def test_effect_of_a_first_allocation(org):
    child = services.add_child(org.pi, org.prog_a, name="A3", slug="proj-a3", kind="project")
    child.managers.add(org.researcher)
    change_request = ChangeRequest.objects.create(
        node=child, cluster=org.cluster, requested_by=org.researcher, requested_shares=100,
        reason="start", deciding_node=org.prog_a,
    )
    effects = {e.node.slug: (e.before, e.after) for e in services.effect_of(change_request)}
    # A3 0 -> 100 of 200: 35%; A1 and A2 50 of 200: 35% -> 17.5%.
    assert effects == {
        "proj-a1": pytest.approx((35.0, 17.5)),
        "proj-a2": pytest.approx((35.0, 17.5)),
        "proj-a3": pytest.approx((0.0, 35.0)),
    }


@pytest.mark.parametrize("value", [1.5, "1.5", "x", None, "", 0, -1, 1_000_001])
def test_validate_shares_refuses_what_is_not_a_sane_whole_number(value):
    with pytest.raises(services.BudgetError) as error:
        services.validate_shares(value)
    assert error.value.field == "shares"


@pytest.mark.parametrize(("value", "shares"), [(1, 1), ("42", 42), (" 7 ", 7), (1_000_000,
                                                                                1_000_000)])
def test_validate_shares_accepts_whole_numbers(value, shares):
    assert services.validate_shares(value) == shares
