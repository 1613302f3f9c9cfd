"""Usage per budget and period: the review report's figures (reports.review_report), restricted to
the rows reports.permissions lets each persona read."""

import pytest

USAGE = "/api/usage/"

ROWS = {
    "ceo": ["org", "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1",
            "org/prog-a/proj-a2", "org/prog-b", "org/prog-b/proj-b1"],
    "pi": ["org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1",
           "org/prog-a/proj-a2"],
    "lead": ["org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1"],
    "researcher": ["org/prog-a/proj-a1"],
}


@pytest.mark.parametrize("persona", sorted(ROWS))
def test_rows_each_persona_may_read(org, api_for, persona):
    response = api_for(persona).get(USAGE, {"cluster": "h100", "period": "week"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert [row["path"] for row in body["rows"]] == ROWS[persona]
    assert body["period"] == "week"
    assert "Attainment" in body["definitions"]


@pytest.mark.parametrize("persona", ["outsider", "operator"])
def test_no_budget_no_figures(org, api_for, persona):
    response = api_for(persona).get(USAGE)
    assert response.status_code == 403
    assert response.json()["detail"] == "You neither manage nor belong to a budget."


def test_figures_of_an_idle_organisation(org, api_for):
    rows = {r["path"]: r for r in api_for("ceo").get(USAGE).json()["rows"]}
    assert rows["org"]["percent_of_cluster"] == pytest.approx(100)
    a1 = rows["org/prog-a/proj-a1"]
    assert (a1["delivered_gpu_hours"], a1["demand_gpu_hours"], a1["starts"]) == (0, 0, 0)
    assert a1["attainment"] is None
    assert rows["org/prog-a/proj-a1/exp-1"]["leaf"] is True


def test_one_subtree(org, api_for):
    rows = api_for("ceo").get(USAGE, {"node": org.prog_b.pk}).json()["rows"]
    assert [r["path"] for r in rows] == ["org/prog-b", "org/prog-b/proj-b1"]
    response = api_for("lead").get(USAGE, {"node": org.prog_b.pk})
    assert response.status_code == 400 and response.json()["field"] == "node"


@pytest.mark.parametrize(
    "query",
    [{"period": "decade"}, {"date": "yesterday"}, {"period": "custom"},
     {"period": "custom", "start": "2026-02-01", "end": "2026-01-01"}],
)
def test_bad_period_is_a_400(org, api_for, query):
    response = api_for("ceo").get(USAGE, query)
    assert response.status_code == 400
    assert response.json()["detail"]
