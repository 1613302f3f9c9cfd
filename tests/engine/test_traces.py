"""Trace readers, the conversion rule of public traces, budget trees and cluster builders."""

from __future__ import annotations

import json

import pytest

from scheduler.engine.traces import (
    CHRONUS_MIX,
    PHILLY_TRACE,
    ConversionRule,
    TraceError,
    cluster_from_sizes,
    is_debug,
    job_class,
    load_tree,
    parse_cluster,
    read_trace,
    tree_fractions,
    write_design_trace,
)

PUBLIC_HEADER = "job_id,submit_s,duration_s,num_gpus,group,user,job_class\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_design_trace_is_read_as_declared(tmp_path):
    p = write(tmp_path, "t.csv",
              "submit_time,duration,gpus,budget,user,min_runtime,resumable\n"
              "10,3600,8,prog-a/proj-a1,alice,1800,1\n"
              "0,60,1,prog-b/proj-b1,bob,0,0\n")
    tr = read_trace(p)
    assert tr.fmt == "design"
    # sorted by submission; ids are the line numbers of the data rows
    assert [j.job_id for j in tr.jobs] == ["j2", "j1"]
    a1 = tr.jobs[1]
    assert (a1.submit_time, a1.duration, a1.gpus, a1.budget, a1.user, a1.min_runtime,
            a1.resumable) == (10, 3600, 8, "prog-a/proj-a1", "alice", 1800, True)
    assert not tr.jobs[0].allocated
    # equal shares per node by default: both programs and their projects
    assert tr.shares == {"prog-a": 1, "prog-a/proj-a1": 1, "prog-b": 1, "prog-b/proj-b1": 1}


def test_design_trace_slice_and_limit(tmp_path):
    rows = "".join(f"{t},100,1,p/q,u,60,1\n" for t in range(0, 100, 10))
    p = write(tmp_path, "t.csv", "submit_time,duration,gpus,budget,user,min_runtime,resumable\n"
              + rows)
    tr = read_trace(p, start=30, end=70)
    assert [j.submit_time for j in tr.jobs] == [0, 10, 20, 30]  # 30..60 re-based to 0
    assert len(read_trace(p, limit=3).jobs) == 3


@pytest.mark.parametrize("row, message", [
    ("x,1,1,p/q,u,0,1", "bad submit_time"),
    ("0,1,0,p/q,u,0,1", "gpus >= 1"),
    ("0,1,1,p/q,u,0,2", "resumable must be 0 or 1"),
    ("0,1,1,,u,0,1", "empty budget"),
])
def test_design_trace_rejects_bad_rows_with_a_line_number(tmp_path, row, message):
    p = write(tmp_path, "t.csv",
              "submit_time,duration,gpus,budget,user,min_runtime,resumable\n" + row + "\n")
    with pytest.raises(TraceError, match=message) as exc:
        read_trace(p)
    assert ":2:" in str(exc.value)


def test_unknown_columns_and_missing_file(tmp_path):
    with pytest.raises(TraceError, match="unknown trace columns"):
        read_trace(write(tmp_path, "t.csv", "a,b\n1,2\n"))
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "nope.csv")
    p = write(tmp_path, "t.csv", PUBLIC_HEADER + "a,0,1,1,vc,,\n")
    with pytest.raises(TraceError, match="--format design but the columns are the public"):
        read_trace(p, "design")


def test_public_conversion_rule(tmp_path):
    p = write(tmp_path, "t.csv", PUBLIC_HEADER
              + "dbg,0,600,2,vc_aaa,,strict\n"     # <= 2 GPUs, <= 15 min: debug, 15 min
              + "big,5,36000,8,vc_aaa,,strict\n"   # 10 h: declares the 8 h maximum
              + "mid,6,7200,4,bbb,,\n"            # 2 h: declares its duration
              + "bst,7,600,1,bbb,,best\n"         # best effort: unallocated
              + "usr,8,100,1,bbb,carol,\n")       # a trace user is kept
    rule = ConversionRule(seed=3, programs=2, unallocated_fraction=0.0)
    tr = read_trace(p, rule=rule, sizes={"aaa": 3, "bbb": 1})
    by = {j.job_id: j for j in tr.jobs}
    assert by["dbg"].min_runtime == 900
    assert by["big"].min_runtime == 8 * 3600
    assert by["mid"].min_runtime == 7200
    assert by["bst"].min_runtime == 0
    assert by["usr"].user == "carol"
    assert by["dbg"].user.startswith("aaa-u")
    # one project per VC ("vc_aaa" and "aaa" are the same VC); shares from the sizes
    leaves = {j.budget for j in tr.jobs}
    assert {b.split("/")[1] for b in leaves} == {"vc-aaa", "vc-bbb"}
    fr = tree_fractions(tr.shares)
    a = next(b for b in leaves if b.endswith("vc-aaa"))
    b = next(x for x in leaves if x.endswith("vc-bbb"))
    # two programs, one VC each: program shares 3 and 1 -> 75% / 25%
    assert fr[a] == pytest.approx(0.75)
    assert fr[b] == pytest.approx(0.25)
    # the rule is printed, seed included
    assert "seed 3" in rule.describe() and "8 h" in rule.describe()


def test_public_conversion_is_seeded(tmp_path):
    rows = "".join(f"job{i},{i},{3600 * 2},1,vc{i % 3},,\n" for i in range(300))
    p = write(tmp_path, "t.csv", PUBLIC_HEADER + rows)
    rule = ConversionRule(seed=1, unallocated_fraction=0.25, resumable_fraction=0.5)
    a, b = read_trace(p, rule=rule, sizes={}), read_trace(p, rule=rule, sizes={})
    assert [(j.user, j.min_runtime, j.resumable, j.budget) for j in a.jobs] == [
        (j.user, j.min_runtime, j.resumable, j.budget) for j in b.jobs]
    c = read_trace(p, rule=ConversionRule(seed=2, unallocated_fraction=0.25,
                                          resumable_fraction=0.5), sizes={})
    assert [j.resumable for j in a.jobs] != [j.resumable for j in c.jobs]
    # the seeded fractions are about right (300 draws: well within +-10 points)
    unalloc = sum(1 for j in a.jobs if j.min_runtime == 0) / 300
    resumable = sum(j.resumable for j in a.jobs) / 300
    assert 0.15 < unalloc < 0.35 and 0.4 < resumable < 0.6
    # 4 synthetic users per VC at most
    assert len({j.user for j in a.jobs if j.budget.endswith("vc-vc0")}) <= 4


def test_real_public_traces_slices():
    tr = read_trace(PHILLY_TRACE, limit=500)
    assert len(tr.jobs) == 500 and tr.fmt == "public"
    tr = read_trace(CHRONUS_MIX, end=600)
    assert tr.jobs and all(j.submit_time < 600 for j in tr.jobs)
    # every 'best' job of chronus is unallocated
    assert any(j.min_runtime == 0 for j in tr.jobs)


def test_round_trip_design_writer(tmp_path):
    tr = read_trace(CHRONUS_MIX, limit=50)
    write_design_trace(tmp_path / "d.csv", tr.jobs)
    back = read_trace(tmp_path / "d.csv")
    assert [(j.job_id, j.gpus, j.budget, j.min_runtime, j.resumable) for j in back.jobs] == [
        (j.job_id, j.gpus, j.budget, j.min_runtime, j.resumable) for j in tr.jobs]


def test_debug_class():
    assert is_debug(2, 900) and is_debug(1, 60)
    assert not is_debug(3, 900) and not is_debug(1, 901) and not is_debug(1, 0)
    assert job_class(1, 0) == "unallocated"
    assert job_class(8, 3600) == "allocated"


def test_tree_yaml_json_and_the_35_percent_rule(tmp_path):
    y = write(tmp_path, "t.yaml", "prog-a: 70\nprog-b: 30\nprog-a/proj-a1: 50\n"
              "prog-a/proj-a2: 50\n")
    shares = load_tree(y)
    assert tree_fractions(shares)["prog-a/proj-a1"] == pytest.approx(0.35)
    j = write(tmp_path, "t.json", json.dumps({"prog-a": {"shares": 70, "proj-a1": 50,
                                                         "proj-a2": 50}, "prog-b": 30}))
    assert load_tree(j) == shares
    with pytest.raises(TraceError, match="no parent"):
        load_tree(write(tmp_path, "bad.yaml", "a/b: 1\n"))
    with pytest.raises(TraceError, match="must be >= 0"):
        load_tree(write(tmp_path, "neg.json", '{"a": -1}'))
    with pytest.raises(TraceError, match="cannot parse"):
        load_tree(write(tmp_path, "x.json", "{"))


def test_clusters():
    philly = parse_cluster("philly")
    assert len(philly.hosts) == 352 and philly.total_gpus == 2816
    assert len({h.group for h in philly.hosts}) == 11
    c = parse_cluster("10x4/3")
    assert c.total_gpus == 40 and len({h.group for h in c.hosts}) == 3
    with pytest.raises(TraceError, match="bad cluster"):
        parse_cluster("lots")


def test_a_fraction_of_each_vc_keeps_every_vc_with_a_share_of_its_nodes(tmp_path):
    sizes = write(tmp_path, "sizes.csv", "vc,nodes\na,16\nb,9\nc,1\n")
    cluster = cluster_from_sizes(sizes, fraction=8)
    per_vc = {g: sum(h.group == g for h in cluster.hosts) for g in ("vc-a", "vc-b", "vc-c")}
    assert per_vc == {"vc-a": 2, "vc-b": 2, "vc-c": 1}  # 16/8, 9/8 and 1/8 rounded up
    assert {h.gpus for h in cluster.hosts} == {8}
