"""CSV cells that a spreadsheet would run as formulas are written as text (OWASP's rule: a
leading single quote before =, +, -, @, tab, carriage return), in every CSV the project
writes; numbers stay numbers and the simulator's trace files read back unchanged."""

import csv
import io

from django.urls import reverse

from scheduler.engine.simulate import SimConfig, simulate
from scheduler.engine.spreadsheet import SafeWriter
from scheduler.engine.traces import TraceJob, parse_cluster, read_trace, write_design_trace
from scheduler.models import Workload

FORMULAS = ["=HYPERLINK(\"http://evil\",\"x\")", "+1+2", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


def written(rows):
    out = io.StringIO()
    SafeWriter(out).writerows(rows)
    return list(csv.reader(io.StringIO(out.getvalue(), newline="")))


def test_every_formula_trigger_is_written_as_text():
    assert written([FORMULAS]) == [["'" + text for text in FORMULAS]]


def test_plain_text_and_numbers_are_written_as_they_are():
    assert written([["llama", "a=b", -3, 2.5, ""]]) == [["llama", "a=b", "-3", "2.5", ""]]


def test_workload_export_neutralises_a_formula_name(fleet, client_for):
    Workload.objects.filter(name="wait").update(name="=HYPERLINK(\"http://evil\")")
    response = client_for("lead").get(reverse("scheduler:workload_export"))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert "'=HYPERLINK(\"http://evil\")" in [row["name"] for row in rows]
    assert not any(row["name"].startswith("=") for row in rows)


def test_simulator_files_neutralise_formula_users(tmp_path):
    jobs = [TraceJob("j1", 0, 10, 1, "a", "=cmd|' /C calc'!A0", 10, True)]
    simulate(jobs, {"a": 1}, parse_cluster("1x4"), SimConfig()).write(tmp_path, html=False)
    with open(tmp_path / "jobs.csv", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["user"] == "'=cmd|' /C calc'!A0"


def test_design_trace_reads_back_what_was_written(tmp_path):
    jobs = [TraceJob("j1", 0.0, 10.0, 1, "a", "-dash", 10.0, True)]
    path = tmp_path / "trace.csv"
    write_design_trace(path, jobs)
    assert "'-dash" in path.read_text()
    assert read_trace(path).jobs[0].user == "-dash"
