"""The review report's figures against the hand-computed week of tests/fixtures_reports.py."""

import csv
import io
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from reports import review_report

WEEK = "?period=week&date=2025-03-05"
WEEK_START = datetime(2025, 3, 3, tzinfo=UTC)
WEEK_END = datetime(2025, 3, 10, tzinfo=UTC)


def rows_by_path(history):
    report = review_report.budget_report(history.cluster, WEEK_START, WEEK_END)
    return report, {row.node.path: row for row in report.rows}


def test_rows_in_tree_order(history):
    report, _ = rows_by_path(history)
    assert [row.node.path for row in report.rows] == [
        "org", "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a2", "org/prog-b",
        "org/prog-b/proj-b1",
    ]
    assert report.capacity_h == pytest.approx(1560)


def test_shares_time_weighted_across_mid_week_change(history):
    _, row = rows_by_path(history)
    assert row["org"].shares is None and row["org"].fraction == pytest.approx(1)
    assert row["org/prog-a/proj-a1"].shares == pytest.approx(100)  # 50 for 84 h, 150 for 84 h
    assert row["org/prog-a/proj-a1"].fraction == pytest.approx((0.35 + 0.525) / 2)
    assert row["org/prog-a/proj-a2"].fraction == pytest.approx((0.35 + 0.175) / 2)
    assert row["org/prog-b"].shares == pytest.approx(30)  # the change to 60 came after the week
    assert row["org/prog-b"].fraction == pytest.approx(0.3)


def test_entitlement(history):
    _, row = rows_by_path(history)
    expected = {
        "org": 1560, "org/prog-a": 1092, "org/prog-a/proj-a1": 294 + 378,
        "org/prog-a/proj-a2": 294 + 126, "org/prog-b": 468, "org/prog-b/proj-b1": 468,
    }
    assert {p: pytest.approx(r.entitlement_h) for p, r in row.items()} == expected


def test_delivered_counts_only_hours_inside_the_week(history):
    _, row = rows_by_path(history)
    assert {p: r.delivered_h for p, r in row.items()} == pytest.approx({
        "org": 39, "org/prog-a": 34, "org/prog-a/proj-a1": 30, "org/prog-a/proj-a2": 4,
        "org/prog-b": 5, "org/prog-b/proj-b1": 5,
    })


def test_unallocated_clipped_to_the_week(history):
    _, row = rows_by_path(history)
    assert {p: r.unallocated_h for p, r in row.items()} == pytest.approx({
        "org": 10, "org/prog-a": 4, "org/prog-a/proj-a1": 0, "org/prog-a/proj-a2": 4,
        "org/prog-b": 6, "org/prog-b/proj-b1": 6,
    })


def test_demand_and_attainment(history):
    _, row = rows_by_path(history)
    a1 = 30 + 4 * 0.5 + 2 * (10 / 60) + 2 * 1  # W1 30 min, W2 10 min and 60 min after requeue
    a2 = 4 + 8 * 2
    b1 = 5 + 5 * 4 + 1 * 1  # W4 pending Sun 20:00-24:00, W7 Mon 00:00-01:00 of its 3 h
    assert {p: r.demand_h for p, r in row.items()} == pytest.approx({
        "org": a1 + a2 + b1, "org/prog-a": a1 + a2, "org/prog-a/proj-a1": a1,
        "org/prog-a/proj-a2": a2, "org/prog-b": b1, "org/prog-b/proj-b1": b1,
    })
    assert row["org/prog-a/proj-a1"].attainment == pytest.approx(30 / a1)
    assert row["org/prog-a/proj-a2"].attainment == pytest.approx(4 / 20)
    assert row["org/prog-b/proj-b1"].attainment == pytest.approx(5 / 26)
    assert row["org"].attainment == pytest.approx(39 / (a1 + a2 + b1))


def test_waits_median_and_p95(history):
    _, row = rows_by_path(history)
    minutes = {p: sorted(w / 60 for w in r.waits) for p, r in row.items()}
    assert minutes["org/prog-a/proj-a1"] == pytest.approx([10, 30, 60])
    assert minutes["org"] == pytest.approx([10, 30, 60, 120, 180])
    assert row["org/prog-a/proj-a1"].wait_median == pytest.approx(30 * 60)
    assert row["org/prog-a/proj-a1"].wait_p95 == pytest.approx((30 + 0.9 * 30) * 60)
    assert row["org/prog-a"].wait_median == pytest.approx(45 * 60)
    assert row["org/prog-a"].wait_p95 == pytest.approx((60 + 0.85 * 60) * 60)
    assert row["org"].wait_median == pytest.approx(60 * 60)
    assert row["org"].wait_p95 == pytest.approx((120 + 0.8 * 60) * 60)
    assert row["org/prog-b/proj-b1"].wait_median == pytest.approx(180 * 60)


def test_preemptions_and_gpu_hours_lost(history):
    _, row = rows_by_path(history)
    assert {p: r.preemptions for p, r in row.items()} == {
        "org": 2, "org/prog-a": 2, "org/prog-a/proj-a1": 1, "org/prog-a/proj-a2": 1,
        "org/prog-b": 0, "org/prog-b/proj-b1": 0,
    }
    resumable_grace = 2 * 5 / 60  # W2: 2 GPUs x 5 min of grace
    whole_run = 8 * (3 + 5 / 60)  # W3, not resumable: 8 GPUs x 3 h 05
    assert row["org/prog-a/proj-a1"].lost_h == pytest.approx(resumable_grace)
    assert row["org/prog-a/proj-a2"].lost_h == pytest.approx(whole_run)
    assert row["org"].lost_h == pytest.approx(resumable_grace + whole_run)


def test_impact_weights_capped_attainment_by_fraction(history):
    report, row = rows_by_path(history)
    a1 = row["org/prog-a/proj-a1"]
    expected = (0.4375 * min(1, a1.attainment) + 0.2625 * 0.2 + 0.3 * 5 / 26) / 1.0
    assert review_report.impact(report.rows) == pytest.approx(expected)


def test_period_in_progress_counts_only_elapsed_time(history):
    now = WEEK_START + (WEEK_END - WEEK_START) / 2  # Thursday 12:00
    report = review_report.budget_report(history.cluster, WEEK_START, WEEK_END, now=now)
    root = report.rows[0]
    assert report.capacity_h == pytest.approx(84 * 10)
    assert root.entitlement_h == pytest.approx(840)


class Table(HTMLParser):
    """The cells of <table id="review-table">, as text."""

    def __init__(self):
        super().__init__()
        self.rows, self.inside, self.cell = [], False, None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("id", "review-table") in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def test_csv_is_the_table_shown_with_paths_for_names(history):
    client = history.client_for("ceo")
    url = reverse("reports:review", args=["h100"])
    page = client.get(url + WEEK)
    assert page.status_code == 200
    parser = Table()
    parser.feed(page.content.decode())
    download = client.get(reverse("reports:review_csv", args=["h100"]) + WEEK)
    assert download["Content-Type"].startswith("text/csv")
    assert "timeshare-h100-2025-03-03-to-2025-03-09.csv" in download["Content-Disposition"]
    parsed = list(csv.reader(io.StringIO(download.content.decode())))
    # the page names each budget (the tree shows where it sits), the CSV gives its path
    assert [row[1:] for row in parsed] == [row[1:] for row in parser.rows]
    assert [row[0] for row in parser.rows] == ["Budget", "Org", "Prog A", "Proj A1", "Proj A2",
                                               "Prog B", "Proj B1"]
    assert [row[0] for row in parsed[1:]] == ["org", "org/prog-a", "org/prog-a/proj-a1",
                                             "org/prog-a/proj-a2", "org/prog-b",
                                             "org/prog-b/proj-b1"]
    assert len(parsed) == 7
    header, *body = parsed
    root = dict(zip(header, body[0], strict=True))
    assert root["Entitlement GPU-h"] == "1560.0"
    assert root["Delivered GPU-h"] == "39.0"
    assert root["Preemptions"] == "2"
    a1 = dict(zip(header, body[2], strict=True))
    assert (a1["Shares"], a1["% of cluster"]) == ("100.0", "43.75")
    assert a1["Entitlement GPU-h"] == "672.0"
    assert (a1["Median wait (min)"], a1["p95 wait (min)"]) == ("30.0", "57.0")


def test_per_project_csv_is_the_subtree(history):
    client = history.client_for("ceo")
    url = reverse("reports:node_review_csv", args=["h100", history.prog_a.pk]) + WEEK
    parsed = list(csv.reader(io.StringIO(client.get(url).content.decode())))
    assert [row[0] for row in parsed[1:]] == ["org/prog-a", "org/prog-a/proj-a1",
                                             "org/prog-a/proj-a2"]


def test_htmx_answers_the_table_fragment(history):
    client = history.client_for("ceo")
    response = client.get(reverse("reports:review", args=["h100"]) + WEEK,
                          HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and 'id="review-table"' in body


@pytest.mark.parametrize("period, first, last", [
    ("period=week&date=2025-03-05", "3 Mar 2025", "9 Mar 2025"),
    ("period=month&date=2025-03-05", "1 Mar 2025", "31 Mar 2025"),
    ("period=quarter&date=2025-05-05", "1 Apr 2025", "30 Jun 2025"),
    ("period=custom&start=2025-03-04&end=2025-03-06", "4 Mar 2025", "6 Mar 2025"),
])
def test_periods(history, period, first, last):
    body = history.client_for("ceo").get(
        reverse("reports:review", args=["h100"]) + "?" + period
    ).content.decode()
    assert f"{first} – {last}" in body


def test_custom_period_without_dates_says_so(history):
    response = history.client_for("ceo").get(
        reverse("reports:review", args=["h100"]) + "?period=custom"
    )
    assert response.status_code == 200
    assert "A custom period needs a start and an end date." in response.content.decode()
