"""The `timeshare` command line end to end: a real subprocess talking HTTP to a live test
server with an API token; human tables, --json, and exit codes scripts can trust
(0 ok, 1 refused by the API, 2 bad usage, 3 unreachable)."""

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.urls import reverse

from budgets.models import ChangeRequest
from fleet.models import Host
from scheduler.models import Workload

ROOT = Path(__file__).resolve().parent.parent



@pytest.fixture
def ticks(monkeypatch):
    """Submit and cancel ask the Celery loop for a tick after commit: record, do not send."""
    sent = []
    monkeypatch.setattr("scheduler.tasks.send_tick", sent.append)
    return sent


@pytest.fixture
def timeshare(live_server, fleet, ticks, tmp_path, token_for):
    tokens = {}

    def run(persona, *args, url=None, token=None, config_file=False):
        if persona not in tokens:
            tokens[persona] = token_for(fleet.org.users[persona])
        env = {
            **os.environ,
            "TIMESHARE_URL": url or live_server.url,
            "TIMESHARE_TOKEN": token or tokens[persona],
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "PYTHONPATH": str(ROOT),
        }
        env.pop("TIMESHARE_CONFIG", None)
        if config_file:  # ~/.config/timeshare/config instead of the environment
            path = tmp_path / "config" / "timeshare" / "config"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"[timeshare]\nurl = {env.pop('TIMESHARE_URL')}\n"
                            f"token = {env.pop('TIMESHARE_TOKEN')}\n")
        return subprocess.run(
            [sys.executable, "-m", "cli", *args], env=env, capture_output=True, text=True,
            timeout=60, cwd=tmp_path,
        )

    return run


def ok(result):
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def refused(result, words):
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert words in result.stderr
    return result.stderr


SUBMIT = ["submit", "--budget", "org/prog-a/proj-a1/exp-1", "--cluster", "h100", "--gpus", "2",
          "--min-runtime", "1:30", "--resumable", "--"]


def test_submit_show_and_cancel(timeshare, fleet, ticks):
    out = ok(timeshare("researcher", *SUBMIT, "python", "train.py", "--lr", "3e-4"))
    assert out.startswith("Submitted workload ")
    workload = Workload.objects.get(name="python")
    assert workload.command == "python train.py --lr 3e-4"
    assert (workload.min_runtime, workload.resumable, workload.gpus) == (5400, True, 2)
    assert ticks == [fleet.org.cluster.pk]
    shown = ok(timeshare("researcher", "show", str(workload.pk)))
    assert "State:       PENDING" in shown and "Timeline:" in shown
    assert "protected for 90 min once started" in shown
    ok(timeshare("researcher", "cancel", str(workload.pk)))
    assert Workload.objects.get(pk=workload.pk).state == "CANCELLED"
    refused(timeshare("researcher", "cancel", str(workload.pk)), "is already cancelled")


def test_submit_json_for_scripts(timeshare):
    out = ok(timeshare("researcher", "--json", *SUBMIT[0:], "run.sh"))
    body = json.loads(out)
    assert body["state"] == "PENDING" and body["name"] == "run.sh"
    assert Workload.objects.filter(pk=body["id"]).exists()


def test_show_running_workload_with_its_gpus(timeshare, fleet):
    out = ok(timeshare("researcher", "show", str(fleet.run_w.pk)))
    assert "h100-0[0,1]" in out
    assert "proj-a1 is at 20% of its entitlement, first in rank" in out


def test_ls_is_like_squeue(timeshare):
    out = ok(timeshare("lead", "ls"))
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["ID", "NAME", "USER", "BUDGET"]
    assert sorted(line.split()[1] for line in lines[1:]) == ["a2", "run", "wait"]
    assert "needs 4 GPUs, 3 free on one host" in out
    rows = json.loads(ok(timeshare("lead", "ls", "--json", "--state", "any", "--mine")))
    assert sorted(w["name"] for w in rows) == ["a2", "wait"]
    assert json.loads(ok(timeshare("outsider", "ls", "--json"))) == []


def test_ls_searches_sorts_and_filters_by_class_like_the_portal(timeshare):
    rows = json.loads(ok(timeshare("ceo", "ls", "--json", "--state", "any", "--search",
                                   "lead", "--sort=-name")))
    assert [w["name"] for w in rows] == ["wait", "a2"]
    rows = json.loads(ok(timeshare("ceo", "ls", "--json", "--state", "any", "--class",
                                   "unallocated")))
    assert [w["name"] for w in rows] == ["a2"]


def test_ls_with_an_unknown_sort_says_so_in_one_line(timeshare):
    refused(timeshare("ceo", "ls", "--sort", "password"), "password is not one of")


def test_bad_submission_is_one_line_and_exit_1(timeshare, fleet, nothing_written):
    args = [a if a != "2" else "11" for a in SUBMIT]
    with nothing_written():
        err = refused(timeshare("researcher", *args, "x"), "11 GPUs can never be placed")
    assert err.startswith("timeshare: refused [gpus]: ")
    with nothing_written():
        refused(timeshare("bob", *SUBMIT, "x"), "You are not a member of")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["submit", "--budget", "b", "--cluster", "h100", "--gpus", "1", "--min-runtime",
          "soon", "--", "x"], "'soon' is not a duration"),
        (["submit", "--budget", "b", "--cluster", "h100", "--gpus", "1", "--min-runtime",
          "0"], "give the command to run"),
        (["submit", "--gpus", "1"], "the following arguments are required"),
        (["show", "abc"], "invalid int value"),
        (["frobnicate"], "invalid choice"),
        (["requests", "approve"], "give the request's number"),
        ([], "usage: timeshare"),
    ],
)
def test_bad_usage_is_exit_2(timeshare, args, words):
    result = timeshare("researcher", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert words in result.stderr


def researchers_env(fleet, token_for, live_server, tmp_path):
    return {**os.environ, "TIMESHARE_URL": live_server.url,
            "TIMESHARE_TOKEN": token_for(fleet.org.users["researcher"]),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": str(ROOT)}


def test_a_closed_pipe_ends_ls_quietly(timeshare, fleet, token_for, live_server, tmp_path):
    """`timeshare ls | head -0`: a real pipe whose reader is gone before anything is written."""
    env = researchers_env(fleet, token_for, live_server, tmp_path)
    reader, writer = os.pipe()
    os.close(reader)
    with os.fdopen(writer, "wb") as closed_pipe:
        result = subprocess.run([sys.executable, "-m", "cli", "ls"], env=env, cwd=tmp_path,
                                stdout=closed_pipe, stderr=subprocess.PIPE, text=True,
                                timeout=60)
    assert result.stderr == ""
    assert result.returncode == 141


def test_ls_into_head_prints_its_first_lines(timeshare, fleet, token_for, live_server,
                                            tmp_path):
    env = researchers_env(fleet, token_for, live_server, tmp_path)
    result = subprocess.run(f"'{sys.executable}' -m cli ls | head -1", shell=True, env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.stdout.split()[:2] == ["ID", "NAME"]
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_the_config_file(timeshare):
    assert "wait" in ok(timeshare("lead", "ls", config_file=True))


def test_missing_configuration_is_exit_2(timeshare):
    result = timeshare("researcher", "ls", token=" ")
    assert result.returncode == 2
    assert "no API token" in result.stderr


def test_unreachable_portal_is_exit_3(timeshare):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = timeshare("researcher", "ls", url=f"http://127.0.0.1:{port}")
    assert result.returncode == 3
    assert "cannot reach" in result.stderr


def test_bad_token_is_refused(timeshare):
    refused(timeshare("researcher", "ls", token="ts_forged"), "not authenticated")


def test_usage_is_like_sshare(timeshare):
    out = ok(timeshare("pi", "usage", "--cluster", "h100"))
    lines = out.splitlines()
    assert lines[0].startswith("h100: 10 GPUs")
    assert lines[1].split() == ["BUDGET", "SHARES", "%PARENT", "%CLUSTER", "USAGE_GPUH",
                                "ENTITLED_GPUH", "RATIO", "RANK"]
    proj_a1 = next(line for line in lines if line.strip().startswith("proj-a1"))
    assert proj_a1.split()[1:4] == ["50", "50.0", "35.0"]
    refused(timeshare("outsider", "usage"), "You have no role in this organisation.")


def test_usage_shows_what_the_web_report_shows(timeshare, client_for):
    tree = json.loads(ok(timeshare("researcher", "usage", "--json")))
    report = client_for("researcher").get(reverse("reports:review", args=["h100"]))
    assert {n["path"] for n in tree["nodes"]} == {row.node.path
                                                 for row, *_ in report.context["lines"]}
    assert {n["path"] for n in tree["nodes"]} == {"org/prog-a/proj-a1",
                                                 "org/prog-a/proj-a1/exp-1"}


def test_a_managers_usage_is_their_subtree(timeshare):
    tree = json.loads(ok(timeshare("pi", "usage", "--json")))
    assert {n["path"] for n in tree["nodes"]} == {
        "org/prog-a", "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1", "org/prog-a/proj-a2",
    }


def test_budgets_and_setting_shares(timeshare, shares_of, fleet):
    out = ok(timeshare("researcher", "budgets"))
    assert "GPUH/WEEK" in out and "588" in out
    ok(timeshare("pi", "budgets", "set", "org/prog-a/proj-a1", "60", "--reason", "hiring"))
    assert shares_of(fleet.org.proj_a1) == 60
    refused(timeshare("lead", "budgets", "set", "org/prog-a/proj-a1", "99"),
            "You do not manage a budget above org/prog-a/proj-a1.")


def test_requests_from_ask_to_approval(timeshare, fleet, shares_of):
    out = ok(timeshare("lead", "requests", "create", "org/prog-a/proj-a1", "--shares", "75",
                       "--reason", "new hires"))
    assert "waiting for a decision" in out
    request = ChangeRequest.objects.get()
    listed = ok(timeshare("pi", "requests", "--to-decide"))
    assert "org/prog-a/proj-a1" in listed and "yes" in listed
    refused(timeshare("lead", "requests", "approve", str(request.pk)),
            "Nobody approves their own request.")
    refused(timeshare("pi", "requests", "reject", str(request.pk)),
            "Say why the request is rejected.")
    ok(timeshare("pi", "requests", "approve", str(request.pk), "--comment", "ok"))
    assert shares_of(fleet.org.proj_a1) == 75
    refused(timeshare("pi", "requests", "approve", str(request.pk)), "already approved")


def test_operators_drain_hosts(timeshare, fleet):
    out = ok(timeshare("operator", "hosts", "drain", "h100-1", "--reason", "ECC errors"))
    assert out.startswith("h100-1: DRAINING")
    assert Host.objects.get(pk=fleet.h100_1.pk).state == "DRAINING"
    refused(timeshare("researcher", "hosts", "return", "h100-1"), "Only operators")
    ok(timeshare("operator", "hosts", "return", str(fleet.h100_1.pk)))
    assert "AVAILABLE" in ok(timeshare("researcher", "hosts", "--cluster", "h100"))


def test_the_installed_console_script():
    script = Path(sys.executable).parent / "timeshare"
    if not script.exists():
        pytest.skip("the package is not installed in this environment (pip install -e .)")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert "Exit codes: 0 ok, 1 refused by the API, 2 bad usage, 3 unreachable." in result.stdout


def test_members_add_list_and_remove(timeshare, fleet):
    org = fleet.org
    out = ok(timeshare("pi", "members", "add", "org/prog-a/proj-a2", "outsider",
                       "--role", "reviewer", "--reason", "finance"))
    assert out.strip() == "outsider is now a reviewer of org/prog-a/proj-a2."
    listed = ok(timeshare("pi", "members", "list", "org/prog-a/proj-a2")).splitlines()
    assert listed[0].split() == ["USERNAME", "ROLE", "NAME", "EMAIL"]
    assert sorted(line.split()[:2] for line in listed[1:]) == [
        ["lead", "member"], ["outsider", "reviewer"]
    ]
    out = ok(timeshare("pi", "members", "remove", "org/prog-a/proj-a1/exp-1", "lead",
                       "--reason", "left"))
    assert out.strip() == (
        "lead is no longer a member of org/prog-a/proj-a1/exp-1 "
        "(1 pending workload(s) cancelled)."
    )
    assert not org.exp_1.members.filter(username="lead").exists()


def test_members_refusals_are_one_line(timeshare, fleet):
    refused(timeshare("pi", "members", "add", "org/prog-a/proj-a1", "ghost"),
            "Nobody has the username or email 'ghost'.")
    refused(timeshare("lead", "members", "add", "org/prog-b/proj-b1", "outsider"),
            "You do not manage org/prog-b/proj-b1")
    refused(timeshare("pi", "members", "remove", "org/prog-a", "pi", "--role", "manager"),
            "pi is the last manager of Program A")


# A POST whose answer is lost (the portal committed, the connection broke before the answer
# came back) is retried with the same Idempotency-Key: one workload, exit 0. A real proxy
# between the CLI and the live server forwards each request and, for the first POSTs only,
# closes the CLI's connection instead of passing the answer on.


def read_request(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += connection.recv(65536)
    return head + b"\r\n\r\n" + body


def forward(request: bytes, upstream: tuple[str, int]) -> bytes:
    head, _, body = request.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    request = b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body
    with socket.create_connection(upstream) as server:
        server.sendall(request)
        answer = b""
        while chunk := server.recv(65536):
            answer += chunk
    return answer


class LosingProxy:
    """Forwards everything; swallows the answer of the first `lose` POSTs."""

    def __init__(self, upstream_url: str, lose: int):
        parsed = urlparse(upstream_url)
        self.upstream = (parsed.hostname, parsed.port)
        self.lose = lose
        self.keys: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with client:
                request = read_request(client)
                answer = forward(request, self.upstream)
                if request.startswith(b"POST"):
                    self.keys.extend(
                        line for line in request.split(b"\r\n")
                        if line.lower().startswith(b"idempotency-key:")
                    )
                    if self.lose > 0:
                        self.lose -= 1
                        client.shutdown(socket.SHUT_RDWR)  # committed, but no answer
                        continue
                client.sendall(answer)

    def close(self):
        self.listener.close()


@pytest.fixture
def losing_proxy(live_server):
    proxies = []

    def make(lose):
        proxies.append(LosingProxy(live_server.url, lose))
        return proxies[-1]

    yield make
    for proxy in proxies:
        proxy.close()


def test_a_lost_answer_is_retried_and_the_workload_exists_once(timeshare, losing_proxy):
    proxy = losing_proxy(lose=2)
    out = ok(timeshare("researcher", "--json", *SUBMIT, "python", "lost.py", url=proxy.url))
    assert Workload.objects.filter(command="python lost.py").count() == 1
    assert json.loads(out)["id"] == Workload.objects.get(command="python lost.py").pk
    assert len(proxy.keys) == 3
    assert len(set(proxy.keys)) == 1


def test_two_submissions_carry_two_keys(timeshare, losing_proxy):
    proxy = losing_proxy(lose=0)
    for name in ("one.py", "two.py"):
        ok(timeshare("researcher", *SUBMIT, "python", name, url=proxy.url))
    assert len(set(proxy.keys)) == 2


def test_reviews_list_show_and_decide(timeshare, fleet, shares_of):
    from datetime import timedelta

    from django.utils import timezone

    from budgets import reviews
    from budgets.models import ReviewItem

    org = fleet.org
    now = timezone.now()
    cycle = reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=now,
                                   due_at=now + timedelta(days=14))
    listed = ok(timeshare("pi", "reviews")).splitlines()
    assert listed[0].split() == ["ID", "NAME", "ORGANISATION", "OPENS", "DEADLINE", "STATE",
                                 "DECIDED", "FLAGGED"]
    assert "0/4" in listed[1]  # the four allocations of Program A's subtree
    shown = ok(timeshare("pi", "reviews", "show", str(cycle.pk), "--to-decide")).splitlines()
    assert sorted(line.split()[1] for line in shown[1:]) == [
        "org/prog-a/proj-a1", "org/prog-a/proj-a1/exp-1", "org/prog-a/proj-a2"
    ]
    a2 = ReviewItem.objects.get(cycle=cycle, node=org.proj_a2)
    out = ok(timeshare("pi", "reviews", "change", str(a2.pk), "20", "--comment", "winding down"))
    assert out.strip() == "org/prog-a/proj-a2 on h100: changed to 20 shares."
    assert shares_of(org.proj_a2) == 20
    refused(timeshare("pi", "reviews", "confirm", str(a2.pk)), "already changed by pi")


def test_reviews_refusals_are_one_line(timeshare, fleet):
    from datetime import timedelta

    from django.utils import timezone

    from budgets import reviews
    from budgets.models import ReviewItem

    org = fleet.org
    now = timezone.now()
    cycle = reviews.schedule_cycle(org.ceo, org.root, name="2027 Q1", opens_at=now,
                                   due_at=now + timedelta(days=14))
    a1 = ReviewItem.objects.get(cycle=cycle, node=org.proj_a1)
    refused(timeshare("lead", "reviews", "confirm", str(a1.pk)),
            "Only the managers above org/prog-a/proj-a1")
    refused(timeshare("researcher", "reviews"), "followed by managers and reviewers")
    assert ReviewItem.objects.get(pk=a1.pk).decision == "pending"
