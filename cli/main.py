"""timeshare: submit and follow workloads, read budgets and usage, decide change requests.

    timeshare submit --budget org/prog-a/proj-a1 --gpus 2 --min-runtime 1:30 -- python train.py
    timeshare ls                 # like squeue: your visible active workloads
    timeshare show 42            # one workload, its runs and timeline
    timeshare cancel 42
    timeshare usage              # like sshare: shares, usage, ratio, rank down the tree
    timeshare budgets
    timeshare requests           # change requests; approve / reject / withdraw / create
    timeshare members org/prog-a # people of a budget; add / remove / find
    timeshare reviews            # budget review cycles; show ID, confirm / change ITEM
    timeshare hosts              # hosts; drain / return (operators)

The portal and token come from TIMESHARE_URL / TIMESHARE_TOKEN or ~/.config/timeshare/config:

    [timeshare]
    url = https://timeshare.example.org
    token = ts_...

Exit codes: 0 ok, 1 the API refused (its message on stderr), 2 bad usage or configuration,
3 the portal cannot be reached, 141 (as for any command SIGPIPE ends) its reader closed the
pipe, as `timeshare ls | head` does: quietly. --json prints the API's JSON for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime

from cli.client import Client, Refused, Unreachable, UsageError, settings

OK, REFUSED, USAGE, UNREACHABLE = 0, 1, 2, 3
BROKEN_PIPE = 128 + 13  # the shell's status for a writer killed by SIGPIPE

# --------------------------------------------------------------------------------------------
# Formatting


def table(rows: list[list], headers: list[str], out=None) -> None:
    out = out or sys.stdout
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line.rstrip(), file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def duration(seconds) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}" + (f":{rest % 60:02d}" if rest % 60 else "")


def when(text: str | None) -> str:
    if not text:
        return ""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def number(value, digits=1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def clip(text: str, width: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


DURATION = re.compile(r"^\s*(?:(\d+):([0-5]\d)(?::([0-5]\d))?|(\d+)\s*([smh]?))\s*$")


def parse_duration(text: str) -> int:
    """Seconds from "90" (minutes, like the portal), "1:30" (h:mm), "1:30:00", "45s", "2h"."""
    match = DURATION.match(text or "")
    if not match:
        raise UsageError(
            f"{text!r} is not a duration: give minutes (90), h:mm (1:30), or 45s / 90m / 2h"
        )
    hours, minutes, secs, amount, unit = match.groups()
    if amount is not None:
        return int(amount) * {"s": 1, "m": 60, "": 60, "h": 3600}[unit]
    return int(hours) * 3600 + int(minutes) * 60 + int(secs or 0)


# --------------------------------------------------------------------------------------------
# Commands: each takes (client, args) and returns what to print as JSON with --json, after
# printing its human form otherwise.


def cmd_submit(client: Client, args):
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("give the command to run after --, e.g. -- python train.py")
    text = " ".join(command)
    name = args.name or (command[0].rsplit("/", 1)[-1] or "workload")[:100]
    body = {
        "name": name,
        "budget": args.budget,
        "cluster": args.cluster,
        "gpus": args.gpus,
        "min_runtime": parse_duration(args.min_runtime),
        "resumable": args.resumable,
        "command": text,
    }
    if args.expected_duration:
        body["expected_duration"] = parse_duration(args.expected_duration)
    workload = client.post("workloads/", body)
    if not args.json:
        print(f"Submitted workload {workload['id']} ({workload['name']}) to "
              f"{workload['cluster']}: {workload['explanation']}")
    return workload


def cmd_ls(client: Client, args):
    state = "" if args.state == "any" else args.state
    workloads = client.pages("workloads/", limit=args.limit, scope=args.scope, state=state,
                             cluster=args.cluster, budget=args.budget, q=args.search,
                             sort=args.sort, **{"class": args.workload_class})
    if not args.json:
        rows = [
            [w["id"], clip(w["name"], 24), w["owner"], w["budget"], w["cluster"], w["gpus"],
             duration(w["min_runtime"]), w["state"], when(w["submitted"]),
             w["queue_position"] or "", clip(w["queue_reason"], 60)]
            for w in workloads
        ]
        table(rows, ["ID", "NAME", "USER", "BUDGET", "CLUSTER", "GPUS", "MIN_RT", "STATE",
                     "SUBMITTED", "POS", "REASON"])
    return workloads


def cmd_show(client: Client, args):
    w = client.get(f"workloads/{args.id}/")
    if not args.json:
        facts = [
            ("Workload", f"{w['id']} {w['name']}"),
            ("State", w["state"]),
            ("Why", w["explanation"]),
            ("Owner", w["owner"]),
            ("Budget", w["budget"]),
            ("Cluster", w["cluster"]),
            ("GPUs", w["gpus"]),
            ("Min runtime", duration(w["min_runtime"]) + (
                "" if w["allocated"] else " (unallocated: free, preemptible at any moment)")),
            ("Resumable", "yes" if w["resumable"] else "no"),
            ("Command", w["command"]),
            ("Submitted", when(w["submitted"])),
            ("Finished", when(w["finished"])),
            ("Exit code", "" if w["exit_code"] is None else w["exit_code"]),
        ]
        for label, value in facts:
            if value not in ("", None):
                print(f"{label + ':':<13}{value}")
        if w["runs"]:
            print("\nRuns:")
            table(
                [[r["number"], r["gpus"], " ".join(
                    f"{p['host']}[{','.join(map(str, p['gpus']))}]" for p in r["placement"]
                  ), when(r["started"]), when(r["protected_until"]) if r["allocated"] else "-",
                  when(r["ended"]), r["end_reason"]] for r in w["runs"]],
                ["RUN", "GPUS", "PLACEMENT", "STARTED", "PROTECTED_UNTIL", "ENDED", "END"],
            )
        print("\nTimeline:")
        for event in w["events"]:
            reason = f": {event['reason']}" if event["reason"] else ""
            print(f"  {when(event['at'])}  {event['label']}{reason}")
    return w


def cmd_cancel(client: Client, args):
    done, failed = [], []
    for workload_id in args.ids:
        try:
            w = client.post(f"workloads/{workload_id}/cancel/")
        except Refused as error:
            failed.append((workload_id, error))
            print(f"timeshare: workload {workload_id}: {error}", file=sys.stderr)
            continue
        done.append(w)
        if not args.json:
            print(f"Cancelled workload {w['id']} ({w['name']}).")
    if args.json:
        print(json.dumps(done, indent=2))
    if failed:
        raise SystemExit(REFUSED)
    return None


def _indent(node) -> str:
    return "  " * node["depth"] + node["path"].rsplit("/", 1)[-1]


def cmd_usage(client: Client, args):
    """Only the budgets whose usage the portal shows the caller, as its review report does."""
    tree = client.get("budgets/", cluster=args.cluster)
    tree["nodes"] = [n for n in tree["nodes"] if n["usage_gpu_hours"] is not None]
    if not args.json:
        print(f"{tree['cluster']}: {tree['gpus']} GPUs, window {duration(tree['window'])} h, "
              f"capacity {tree['capacity_gpu_hours']:.1f} GPU-h in the window")
        rows = [
            [_indent(n), n["shares"] if n["shares"] is not None else "",
             number(n["percent_of_parent"]), number(n["percent_of_cluster"]),
             number(n["usage_gpu_hours"]), number(n["entitlement_gpu_hours"]),
             "" if n["ratio"] is None else f"{n['ratio']:.2f}",
             f"{n['rank']}/{n['siblings']}" if n["rank"] else ""]
            for n in tree["nodes"]
        ]
        table(rows, ["BUDGET", "SHARES", "%PARENT", "%CLUSTER", "USAGE_GPUH", "ENTITLED_GPUH",
                     "RATIO", "RANK"])
    return tree


def cmd_budgets(client: Client, args):
    if args.action == "set":
        return _budgets_set(client, args)
    tree = client.get("budgets/", cluster=args.cluster)
    if not args.json:
        print(f"{tree['cluster']}: {tree['gpus']} GPUs")
        rows = [
            [_indent(n), n["kind"], n["shares"] if n["shares"] is not None else "",
             number(n["percent_of_parent"]), number(n["percent_of_cluster"]),
             number(n["gpu_hours_per_week"], 0), ",".join(n["managers"])]
            for n in tree["nodes"]
        ]
        table(rows, ["BUDGET", "KIND", "SHARES", "%PARENT", "%CLUSTER", "GPUH/WEEK",
                     "MANAGERS"])
    return tree


def _budgets_set(client, args):
    if not args.path or args.shares is None:
        raise UsageError("budgets set PATH SHARES: give the budget's path and its shares")
    tree = client.get("budgets/", cluster=args.cluster)
    node = next((n for n in tree["nodes"] if n["path"] == args.path), None)
    if node is None:
        raise Refused(404, f"no budget {args.path!r}")
    body = {"cluster": tree["cluster"], "shares": args.shares, "reason": args.reason or "",
            "version": node["version"]}
    result = client.post(f"budgets/{node['id']}/shares/", body)
    if not args.json:
        print(f"{args.path} now has {args.shares} shares on {tree['cluster']}.")
    return result


def cmd_requests(client: Client, args):
    action = args.action or "list"
    if action == "list":
        found = client.pages("requests/", state=args.state,
                             to_decide="true" if args.to_decide else None)
        if not args.json:
            table([[r["id"], r["node"], r["cluster"], r["requested_by"],
                    "" if r["shares_before"] is None else r["shares_before"],
                    r["requested_shares"], r["state"], when(r["created"]),
                    "yes" if r["can_decide"] else "", clip(r["reason"], 50)] for r in found],
                  ["ID", "BUDGET", "CLUSTER", "BY", "SHARES", "ASKED", "STATE", "CREATED",
                   "YOU_DECIDE", "REASON"])
        return found
    if action == "create":
        if not args.target:
            raise UsageError("requests create PATH (--shares N | --percent P) --reason TEXT")
        if (args.shares is None) == (args.percent is None):
            raise UsageError("give either --shares or --percent")
        body = {"node": args.target, "cluster": args.cluster, "reason": args.reason or "",
                "shares": args.shares, "percent": args.percent}
        body = {k: v for k, v in body.items() if v is not None}
        if "cluster" not in body:
            body["cluster"] = client.get("budgets/")["cluster"]
        result = client.post("requests/", body)
        if not args.json:
            print(f"Request {result['id']}: {result['node']} to {result['requested_shares']} "
                  f"shares on {result['cluster']}, waiting for a decision.")
        return result
    if not args.target or not args.target.isdigit():
        raise UsageError(f"requests {action} ID: give the request's number")
    if action == "show":
        result = client.get(f"requests/{args.target}/")
        if not args.json:
            for key in ("id", "node", "cluster", "requested_by", "shares_before",
                        "requested_shares", "state", "reason", "decided_by",
                        "decision_comment"):
                if result.get(key) not in (None, ""):
                    print(f"{key.replace('_', ' ').capitalize() + ':':<18}{result[key]}")
            for effect in result["effects"]:
                print(f"  {effect['budget']}: {effect['before']:.1f}% -> "
                      f"{effect['after']:.1f}% of the cluster")
        return result
    body = {"comment": args.comment or ""} if action in ("approve", "reject") else {}
    result = client.post(f"requests/{args.target}/{action}/", body)
    if not args.json:
        print(f"Request {result['id']} {result['state']}.")
    return result


def _node_id(client: Client, path: str) -> int:
    node = next((n for n in client.get("budgets/")["nodes"] if n["path"] == path), None)
    if node is None:
        raise Refused(404, f"no budget {path!r}")
    return node["id"]


def cmd_members(client: Client, args):
    action = args.action or "list"
    if action == "find":
        if not args.path:
            raise UsageError("members find TEXT: part of a username, email or name")
        found = client.get("people/", q=args.path)
        if not args.json:
            table([[p["username"], p["name"], p["email"]] for p in found],
                  ["USERNAME", "NAME", "EMAIL"])
        return found
    if not args.path:
        raise UsageError(f"members {action} PATH: give the budget's path")
    url = f"budgets/{_node_id(client, args.path)}/people/"
    if action == "list":
        result = client.get(url)
    else:
        if not args.person:
            raise UsageError(f"members {action} PATH PERSON: give a username or email")
        body = {"person": args.person, "role": args.role, "reason": args.reason or ""}
        if action == "remove" and args.move_to:
            body["move_to"] = args.move_to
        result = client.post(url if action == "add" else url + "remove/", body)
    if not args.json:
        if action != "list":
            change = result["changes"][0] if result["changes"] else None
            done = f" ({change['outcome']})" if change and change["outcome"] else ""
            word = "now" if action == "add" else "no longer"
            print(f"{args.person} is {word} a {args.role} of {result['node']}{done}.")
        else:
            rows = [[p["username"], role[:-1], p["name"], p["email"]]
                    for role in ("managers", "members", "reviewers") for p in result[role]]
            table(rows, ["USERNAME", "ROLE", "NAME", "EMAIL"])
    return result


def cmd_reviews(client: Client, args):
    action = args.action or "list"
    if action == "list":
        cycles = client.pages("reviews/")
        if not args.json:
            table([[c["id"], c["name"], c["organisation"], when(c["opens_at"]),
                    when(c["due_at"]), c["state"],
                    f"{c['progress']['confirmed'] + c['progress']['changed']}/"
                    f"{c['progress']['total']}", c["progress"]["flagged"]] for c in cycles],
                  ["ID", "NAME", "ORGANISATION", "OPENS", "DEADLINE", "STATE", "DECIDED",
                   "FLAGGED"])
        return cycles
    if not args.target or not args.target.isdigit():
        what = "the cycle's" if action == "show" else "the item's"
        raise UsageError(f"reviews {action} ID: give {what} number")
    if action == "show":
        items = client.pages("review-items/", cycle=args.target,
                             to_decide="true" if args.to_decide else None)
        if not args.json:
            table([[i["id"], i["budget"], i["cluster"], i["shares"],
                    i["decision"] + (f" to {i['new_shares']}" if i["new_shares"] else ""),
                    i["decided_by_name"], "yes" if i["flagged"] else "",
                    "yes" if i["can_decide"] else ""] for i in items],
                  ["ITEM", "BUDGET", "CLUSTER", "SHARES", "DECISION", "BY", "OVERDUE",
                   "YOU_DECIDE"])
        return items
    body = {"comment": args.comment or ""}
    if action == "change":
        if args.shares is None:
            raise UsageError("reviews change ITEM SHARES: give the new shares")
        body["shares"] = args.shares
    result = client.post(f"review-items/{args.target}/{action}/", body)
    if not args.json:
        print(f"{result['budget']} on {result['cluster']}: {result['decision']}"
              + (f" to {result['new_shares']} shares." if result["new_shares"] else "."))
    return result


def _host_id(client: Client, name_or_id: str) -> str:
    if name_or_id.isdigit():
        return name_or_id
    hosts = [h for h in client.pages("hosts/") if h["name"] == name_or_id]
    if len(hosts) != 1:
        raise Refused(404, f"no single host named {name_or_id!r}")
    return str(hosts[0]["id"])


def cmd_hosts(client: Client, args):
    action = args.action or "list"
    if action == "list":
        hosts = client.pages("hosts/", cluster=args.cluster, state=args.state)
        if not args.json:
            table([[h["id"], h["cluster"], h["name"], h["gpus"], h["busy_gpus"], h["state"],
                    clip(h["state_reason"], 60)] for h in hosts],
                  ["ID", "CLUSTER", "HOST", "GPUS", "BUSY", "STATE", "REASON"])
        return hosts
    if not args.target:
        raise UsageError(f"hosts {action} HOST: give the host's name or id")
    host = client.post(f"hosts/{_host_id(client, args.target)}/{action}/",
                       {"reason": args.reason or ""})
    if not args.json:
        print(f"{host['name']}: {host['state']} ({host['state_reason']})")
    return host


# --------------------------------------------------------------------------------------------
# Arguments


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2
        self.exit(USAGE, f"timeshare: error: {message} (see timeshare {self._sub()}--help)\n")

    def _sub(self):
        words = self.prog.split()[1:]
        return " ".join(words) + " " if words else ""


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the API's JSON (for scripts)")
    common.add_argument("--url", default=argparse.SUPPRESS, help="the portal (TIMESHARE_URL)")
    top = Parser(prog="timeshare", description=__doc__.split("\n\n")[0],
                 formatter_class=argparse.RawDescriptionHelpFormatter,
                 epilog="Exit codes: 0 ok, 1 refused by the API, 2 bad usage, 3 unreachable.")
    top.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")
    top.add_argument("--url", help="the portal, e.g. http://127.0.0.1:8000 (TIMESHARE_URL)")
    subs = top.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=Parser)

    def sub(name, func, help_text):
        p = subs.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = sub("submit", cmd_submit, "queue a workload")
    p.add_argument("--name", help="default: the command's program name")
    p.add_argument("--budget", required=True, help="budget leaf path, e.g. org/prog-a/proj-a1")
    p.add_argument("--cluster", required=True)
    p.add_argument("--gpus", type=int, required=True)
    p.add_argument("--min-runtime", required=True,
                   help="protected time: minutes (90), h:mm (1:30), 45s/90m/2h; 0 = "
                   "unallocated (free, preemptible at any moment)")
    p.add_argument("--resumable", action="store_true",
                   help="it checkpoints: requeued when preempted (otherwise it ends PREEMPTED)")
    p.add_argument("--expected-duration", help="how long the work takes (same formats)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the command line to run")

    p = sub("ls", cmd_ls, "list workloads (like squeue)")
    p.add_argument("--scope", choices=["all", "mine", "projects"], default="all")
    p.add_argument("--mine", dest="scope", action="store_const", const="mine",
                   help="only yours (--scope mine)")
    p.add_argument("--state", default="active",
                   help="active (default), finished, any, or PENDING, RUNNING, COMPLETED ...")
    p.add_argument("--cluster")
    p.add_argument("--budget", help="a budget path: it and everything below")
    p.add_argument("--class", dest="workload_class",
                   choices=["debug", "small", "large", "unallocated"])
    p.add_argument("--search", help="name, owner or budget contains this")
    p.add_argument("--sort", help="id, name, owner, budget, cluster, gpus, contract, state or "
                   "submitted; --sort=-gpus sorts descending (default: newest first)")
    p.add_argument("--limit", type=int, default=None, help="at most this many rows")

    p = sub("show", cmd_show, "one workload: state, why, runs, timeline")
    p.add_argument("id", type=int)

    p = sub("cancel", cmd_cancel, "cancel workloads")
    p.add_argument("ids", type=int, nargs="+", metavar="ID")

    p = sub("usage", cmd_usage, "fair share down the tree (like sshare)")
    p.add_argument("--cluster")

    p = sub("budgets", cmd_budgets, "the budget tree; `budgets set PATH SHARES` to change one")
    p.add_argument("action", nargs="?", choices=["set"])
    p.add_argument("path", nargs="?")
    p.add_argument("shares", nargs="?", type=int)
    p.add_argument("--cluster")
    p.add_argument("--reason")

    p = sub("requests", cmd_requests,
            "change requests: list (default), show ID, create PATH, approve/reject/withdraw ID")
    p.add_argument("action", nargs="?",
                   choices=["list", "show", "create", "approve", "reject", "withdraw"])
    p.add_argument("target", nargs="?", help="request ID, or the budget path for create")
    p.add_argument("--state", choices=["pending", "approved", "rejected", "withdrawn"])
    p.add_argument("--to-decide", action="store_true", help="only those you may decide")
    p.add_argument("--cluster")
    p.add_argument("--shares", type=int)
    p.add_argument("--percent", type=float, help="of the parent")
    p.add_argument("--reason")
    p.add_argument("--comment", help="your decision's comment (required to reject)")

    p = sub("members", cmd_members,
            "people of a budget: list PATH (default), add/remove PATH PERSON, find TEXT")
    p.add_argument("action", nargs="?", choices=["list", "add", "remove", "find"])
    p.add_argument("path", nargs="?", help="budget path (for find: the text to look for)")
    p.add_argument("person", nargs="?", help="username or email")
    p.add_argument("--role", choices=["member", "manager", "reviewer"], default="member")
    p.add_argument("--reason", help="why (kept in the membership log)")
    p.add_argument("--move-to", help="a leaving member's pending work moves to this leaf "
                   "budget instead of being cancelled")

    p = sub("reviews", cmd_reviews,
            "budget reviews: list (default), show CYCLE_ID, confirm ITEM, change ITEM SHARES")
    p.add_argument("action", nargs="?", choices=["list", "show", "confirm", "change"])
    p.add_argument("target", nargs="?", help="the cycle's ID (show) or the item's (decide)")
    p.add_argument("shares", nargs="?", type=int, help="the new shares (change)")
    p.add_argument("--to-decide", action="store_true", help="only the items you may decide")
    p.add_argument("--comment", help="why (kept with the decision)")

    p = sub("hosts", cmd_hosts, "hosts; `hosts drain HOST --reason ...`, `hosts return HOST`")
    p.add_argument("action", nargs="?", choices=["list", "drain", "return", "repair"])
    p.add_argument("target", nargs="?", help="host name or id")
    p.add_argument("--cluster")
    p.add_argument("--state")
    p.add_argument("--reason")
    return top


def main(argv: list[str] | None = None) -> int:
    top = parser()
    args = top.parse_args(argv)
    if not getattr(args, "cmd", None):
        top.print_help(sys.stderr)
        return USAGE
    try:
        return _run(args)
    except BrokenPipeError:
        # The reader left (`timeshare ls | head`): stop quietly, as ls does. Point stdout at
        # /dev/null so that the interpreter's last flush finds no pipe to break either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE


def _run(args) -> int:
    try:
        client = Client(*settings(url=args.url))
        result = args.func(client, args)
    except UsageError as error:
        print(f"timeshare: error: {error}", file=sys.stderr)
        return USAGE
    except Refused as error:
        field = f" [{error.field}]" if error.field else ""
        print(f"timeshare: refused{field}: {error}", file=sys.stderr)
        return REFUSED
    except Unreachable as error:
        print(f"timeshare: {error}", file=sys.stderr)
        return UNREACHABLE
    except KeyboardInterrupt:
        return 130
    if args.json and result is not None:
        print(json.dumps(result, indent=2))
    sys.stdout.flush()  # a closed pipe breaks here, inside main, not at exit
    return OK


if __name__ == "__main__":
    sys.exit(main())
