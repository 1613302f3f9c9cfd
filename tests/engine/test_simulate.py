"""The simulator on small scenarios worked out by hand, its output files and its CLI."""

from __future__ import annotations

import csv
import json

import pytest

from scheduler.engine.model import Params
from scheduler.engine.simulate import (
    JOBS_COLUMNS,
    RUNS_COLUMNS,
    Ledger,
    SimConfig,
    main,
    simulate,
)
from scheduler.engine.traces import CHRONUS_MIX, TraceJob, parse_cluster


def job(jid, t, dur, gpus, budget, min_rt, resumable=True, user="u"):
    return TraceJob(jid, t, dur, gpus, budget, user, min_rt, resumable)


def rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def by_id(res):
    return {r.job.job_id: r for r in res.jobs}


def test_protected_work_is_waited_for_and_files_have_the_design_columns(tmp_path):
    # one host of 4 GPUs; a1 fills it for 100 s (protected the whole time); b1 arrives at 10 s
    jobs = [job("a1", 0, 100, 4, "a", 100), job("b1", 10, 50, 2, "b", 50)]
    res = simulate(jobs, {"a": 1, "b": 1}, parse_cluster("1x4"), SimConfig())
    res.write(tmp_path, html=False)
    with open(tmp_path / "jobs.csv") as fh:
        assert next(csv.reader(fh)) == list(JOBS_COLUMNS)
    with open(tmp_path / "runs.csv") as fh:
        assert next(csv.reader(fh)) == list(RUNS_COLUMNS)
    assert list(JOBS_COLUMNS) == [
        "job_id", "budget", "user", "gpus", "min_runtime", "resumable", "submit_time",
        "first_start", "end_time", "state", "wait_s", "run_s", "preemptions",
        "allocated_gpu_s", "unallocated_gpu_s"]
    assert list(RUNS_COLUMNS) == [
        "job_id", "run", "start", "end", "gpus", "hosts", "placement", "allocated",
        "protected_until", "end_reason"]
    j = {r["job_id"]: r for r in rows(tmp_path / "jobs.csv")}
    assert (j["a1"]["first_start"], j["a1"]["end_time"], j["a1"]["state"]) == ("0", "100",
                                                                                "completed")
    assert (j["a1"]["wait_s"], j["a1"]["allocated_gpu_s"]) == ("0", "400")  # 4 GPUs x 100 s
    # b1 waits 10 -> 100 (90 s), runs 100 -> 150 on 2 GPUs
    assert (j["b1"]["first_start"], j["b1"]["end_time"], j["b1"]["wait_s"]) == ("100", "150",
                                                                                "90")
    assert (j["b1"]["run_s"], j["b1"]["allocated_gpu_s"], j["b1"]["unallocated_gpu_s"]) == (
        "50", "100", "0")
    r = rows(tmp_path / "runs.csv")
    assert [(x["job_id"], x["run"], x["start"], x["end"], x["hosts"], x["allocated"],
             x["protected_until"], x["end_reason"]) for x in r] == [
        ("a1", "1", "0", "100", "h0000", "1", "100", "completed"),
        ("b1", "1", "100", "150", "h0000", "1", "150", "completed")]


def test_unallocated_work_is_preempted_after_grace_and_requeued(tmp_path):
    # u (unallocated, resumable) fills the host at 0; allocated a arrives at 10: u is signalled
    # at 10, keeps its GPUs for the 30 s grace, stops at 40; a runs 40 -> 140; u had done 10 s
    # of its 1000 s before the signal, so it restarts at 140 with 990 s left -> ends 1130.
    jobs = [job("u", 0, 1000, 4, "b", 0, True), job("a", 10, 100, 4, "a", 100)]
    cfg = SimConfig(params=Params(grace=30))
    res = simulate(jobs, {"a": 1, "b": 1}, parse_cluster("1x4"), cfg)
    runs = [(r.job_id, r.run, r.start, r.end, r.end_reason) for r in res.runs]
    assert runs == [("u", 1, 0, 40, "preempted"), ("a", 1, 40, 140, "completed"),
                    ("u", 2, 140, 1130, "completed")]
    u = by_id(res)["u"]
    assert u.wait_s == 100  # queued again 40 -> 140
    assert u.preemptions == 1 and u.requeues == 1
    assert u.allocated_gpu_s == 0 and u.unallocated_gpu_s == 4 * 40 + 4 * 990  # never charged
    assert by_id(res)["a"].wait_s == 30
    # the grace period's GPU-time is the loss of a checkpointing workload: 4 GPUs x 30 s
    assert res.summary["gpu_hours_lost"]["preemption"] == pytest.approx(4 * 30 / 3600)
    assert res.summary["preemptions"]["of_unallocated"] == 1


def test_non_resumable_preempted_work_ends_preempted():
    jobs = [job("u", 0, 1000, 4, "b", 0, False), job("a", 10, 100, 4, "a", 100)]
    res = simulate(jobs, {"a": 1, "b": 1}, parse_cluster("1x4"),
                   SimConfig(params=Params(grace=30)))
    u = by_id(res)["u"]
    assert (u.state, u.end_time, u.run_s) == ("preempted", 40, 40)
    assert res.summary["gpu_hours_lost"]["preemption"] == pytest.approx(4 * 40 / 3600)


def test_budget_without_allocation_is_refused_not_downgraded():
    jobs = [job("x", 0, 10, 1, "nobody", 60), job("y", 0, 10, 1, "nobody", 0)]
    res = simulate(jobs, {"a": 1, "nobody": 0}, parse_cluster("1x4"), SimConfig())
    x, y = by_id(res)["x"], by_id(res)["y"]
    assert x.state == "refused" and "no allocation" in x.reason
    assert y.state == "completed"  # unallocated work may run there


def test_until_leaves_work_running_and_queued():
    jobs = [job("a", 0, 1000, 4, "a", 100), job("b", 5, 10, 4, "a", 10)]
    res = simulate(jobs, {"a": 1}, parse_cluster("1x4"), SimConfig(until=500))
    a, b = by_id(res)["a"], by_id(res)["b"]
    assert (a.state, b.state) == ("running", "queued")
    assert res.runs[-1].end_reason == "still_running" and res.runs[-1].end == 500
    assert b.wait_s == 495


def test_ledger_hard_window_and_half_life():
    led = Ledger(window=100)  # queries come in time order, as in a simulation
    led.set_rate("a", 0, 2)  # 2 GPUs from 0
    led.set_rate("a", 50, -2)  # stop at 50: 100 GPU-s
    assert led.window_value("a", 50) == 100
    assert led.window_value("a", 110) == 2 * 40  # window [10, 110]
    led.set_rate("a", 120, 1)  # 1 GPU from 120
    assert led.window_value("a", 130) == 2 * 20 + 10  # window [30, 130]
    assert led.window_value("a", 300) == 100  # window [200, 300], 1 GPU
    assert led.cum("a", 130) == 110
    hl = Ledger(window=100, half_life=10)
    hl.set_rate("a", 0, 1)
    hl.set_rate("a", 10, -1)
    # integral of 2^-((10-t)/10) over [0, 10] = 10/ln2 * (1 - 1/2)
    assert hl.window_value("a", 10) == pytest.approx(10 / 0.6931471805599453 * 0.5)
    assert hl.window_value("a", 20) == pytest.approx(10 / 0.6931471805599453 * 0.25)


def test_same_seed_same_files_with_host_failures(tmp_path):
    jobs = [job(f"j{i}", i * 300, 3600 + 97 * i, 1 + i % 4, "ab"[i % 2], (i % 3) * 1800,
                i % 5 != 0) for i in range(40)]
    cfg = SimConfig(seed=7, failure_rate=3.0, repair_time=1800)
    outs = []
    for k in range(2):
        res = simulate(jobs, {"a": 2, "b": 1}, parse_cluster("4x4/2"), cfg)
        res.write(tmp_path / str(k), html=False)
        outs.append(((tmp_path / str(k) / "jobs.csv").read_text(),
                     (tmp_path / str(k) / "runs.csv").read_text()))
    assert outs[0] == outs[1]
    assert "host_failure" in outs[0][1] or res.summary["hosts"]["failures"].get("soft")
    other = simulate(jobs, {"a": 2, "b": 1}, parse_cluster("4x4/2"),
                     SimConfig(seed=8, failure_rate=3.0, repair_time=1800))
    other.write(tmp_path / "x", html=False)
    assert (tmp_path / "x" / "runs.csv").read_text() != outs[0][1]


def test_policies_share_the_same_driver():
    jobs = [job(f"j{i}", i * 10, 600, 2, "ab"[i % 2], 300 * (i % 2)) for i in range(12)]
    for policy in ("fairshare", "fifo", "fifo-backfill", "sjf", "quota"):
        res = simulate(jobs, {"a": 1, "b": 1}, parse_cluster("2x4"),
                       SimConfig(params=Params(policy=policy)))
        assert all(r.state == "completed" for r in res.jobs), policy
        if policy != "fairshare":
            assert res.summary["preemptions"]["total"] == 0


# -------------------------------------------------------------------------------- the CLI


def test_cli_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for opt in ("--trace", "--format", "--cluster", "--tree", "--policy", "--window",
                "--half-life", "--max-min-runtime", "--hysteresis", "--grace",
                "--failure-rate", "--seed", "--out", "--start", "--limit", "--time-scale",
                "--sweep", "--sweep-window", "--sweep-max-min-runtime", "--sweep-hysteresis"):
        assert opt in text


@pytest.mark.parametrize("args, message", [
    (["--trace", "/nonexistent.csv"], "cannot read"),
    (["--cluster", "lots"], "bad cluster"),
    (["--tree", "/nonexistent.yaml"], "cannot read tree"),
    (["--cluster", "/nonexistent_sizes.csv"], "cannot read /nonexistent_sizes.csv"),
    (["--tree", "/"], "cannot read tree /"),
    (["--hysteresis", "-1"], "--hysteresis must be >= 0"),
])
def test_cli_bad_input_is_one_line_and_nonzero(tmp_path, capsys, args, message):
    rc = main(["--trace", str(CHRONUS_MIX), "--limit", "5",
               "--out", str(tmp_path)] + args)
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_end_to_end_writes_everything(tmp_path, capsys):
    rc = main(["--trace", str(CHRONUS_MIX), "--end", "60",
               "--cluster", "4x8/2", "--out", str(tmp_path / "out"), "--window", "1h",
               "--seed", "3"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "conversion rule (seed 3)" in out and "queue wait" in out and "debug" in out
    assert "occupancy" in out and "GPU-hours lost to preemption" in out
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["jobs"] == len(rows(tmp_path / "out" / "jobs.csv"))
    assert s["params"]["window_s"] == 3600
    html = (tmp_path / "out" / "report.html").read_text()
    # plotly.js is inline: no script is loaded from anywhere
    assert "<script src=" not in html and 'src="http' not in html
    assert len(html) > 1_000_000
    assert "Plotly.newPlot" in html or "Plotly.react" in html


def test_cli_sweep_prints_one_table(tmp_path, capsys):
    rc = main(["--trace", str(CHRONUS_MIX), "--end", "60",
               "--cluster", "4x8", "--out", str(tmp_path), "--sweep", "--sweep-window",
               "1h,1d", "--sweep-hysteresis", "0,0.2", "--workers", "2"])
    assert rc == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["window", "max_min_rt", "hyst"]
    table = out[1:out.index(next(x for x in out if x.startswith("max |dev|")))]
    assert len(table) == 4  # 2 windows x 2 hysteresis values
    assert sorted(line.split()[2] for line in table) == ["0.00", "0.00", "0.20", "0.20"]
    assert json.loads((tmp_path / "sweep.json").read_text())[0]["window_s"] == 3600


def test_cli_sweep_of_policies_and_graces_writes_one_csv_row_per_point(tmp_path, capsys):
    rc = main(["--trace", str(CHRONUS_MIX), "--end", "60", "--cluster", "4x8",
               "--out", str(tmp_path), "--sweep", "--sweep-policy", "fairshare,fifo",
               "--sweep-grace", "1m,5m", "--workers", "1"])
    assert rc == 0
    table = rows(tmp_path / "sweep.csv")
    assert [(r["policy"], r["grace_s"]) for r in table] == [
        ("fairshare", "60.0"), ("fairshare", "300.0"), ("fifo", "60.0"), ("fifo", "300.0")]
    assert "wall_s" not in table[0]  # the machine's time would make equal sweeps differ


def test_cli_sweep_of_an_unknown_policy_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--trace", str(CHRONUS_MIX), "--out", str(tmp_path), "--sweep",
              "--sweep-policy", "fairshare,lottery"])
    assert exc.value.code == 2
    assert "unknown 'lottery'" in capsys.readouterr().err


def test_idle_gpus_while_allocated_work_waits_are_charged_to_their_cause():
    # one host of 8 GPUs: R holds 6 for 2 h; Q (from 1 s) needs 4 and waits for R, so 2 GPUs
    # sit idle for 2 h - 1 s of the 24 healthy GPU-hours. Until R's protection ends (1 h) no
    # pass runs (nothing could start or preempt): fewer idle GPUs than Q needs, nothing fits.
    # The pass at 1 h makes Q hold the host: from then on its reservation keeps them.
    hour = 3600.0
    jobs = [job("R", 0, 2 * hour, 6, "a", hour), job("Q", 1, hour, 4, "a", hour)]
    summary = simulate(jobs, {"a": 1}, parse_cluster("1x8"), SimConfig()).summary
    idle = summary["idle_while_waiting"]
    healthy = 8 * 3 * hour
    assert summary["end_s"] == 3 * hour
    assert idle["nothing_fits_share"] == pytest.approx(2 * (hour - 1) / healthy)
    assert idle["reservation_share"] == pytest.approx(2 * hour / healthy)
    assert idle["share"] == pytest.approx(2 * (2 * hour - 1) / healthy)
