"""The demo organisation: DESIGN.md's example (program A 70/100, project A1 50/100 -> 35%)
inside an institute large enough to look real. Seeding is idempotent and never overwrites
shares that somebody changed since.

``seed(since=...)`` dates the initial budgets back to ``since`` and adds the budget history of
those days (one approved change request, one waiting for the CEO); every seed opens the
quarter's budget review if the institute has none (the PI has confirmed Program A's projects,
the rest waits). ``seed_history`` then gives
the demo clusters that past: the Philly trace's days before the live load's start, replayed
in real time with the demo load's rule (``scheduler.replay``) through the simulator and
written like the live loop writes (``scheduler.history``)."""

from datetime import timedelta

from django.contrib.auth.models import Group, Permission, User
from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from budgets import reviews, services
from budgets.models import Allocation, AllocationChange, BudgetNode, ChangeRequest, ReviewCycle
from fleet.models import CapacityRollup, Cluster, Host
from scheduler.models import OccupancySample, Workload

DEMO_PASSWORD = "timeshare-demo"

# username: (full name, description shown at start-up)
PEOPLE = {
    "ceo": ("Casey Chen", "CEO, manages the institute"),
    "pi": ("Priya Iyer", "PI of Language models (program A)"),
    "lead": ("Leo Alvarez", "lead researcher of Pretraining (project A1)"),
    "researcher": ("Rosa Martins", "researcher in Pretraining and Evaluation"),
    "operator": ("Omar Nasser", "site operator"),
    "outsider": ("Otto Berg", "no role"),
    "pi-robotics": ("Rui Kato", "PI of Robotics"),
    "pi-science": ("Sara Lind", "PI of Science agents"),
    "lead-posttrain": ("Pat Okafor", "lead of Post-training"),
    "lead-rl": ("Remy Dubois", "lead of RL simulation"),
    # researchers: the demo load submits as the members of each leaf, so "Mine" means mine
    "mei": ("Mei Tanaka", "researcher in Pretraining"),
    "tom": ("Tom Weber", "researcher in Pretraining"),
    "ines": ("Ines Costa", "researcher in Post-training"),
    "sam": ("Sam Rivera", "researcher in Post-training"),
    "kofi": ("Kofi Mensah", "researcher in Evaluation"),
    "dana": ("Dana Novak", "researcher, Dana's experiments in RL simulation"),
    "erik": ("Erik Holm", "researcher, Erik's experiments in RL simulation"),
    "noor": ("Noor Haddad", "researcher in Manipulation"),
    "wei": ("Wei Chen", "researcher in Chemistry agents"),
    "ola": ("Ola Nilsen", "researcher in Climate models"),
}

CLUSTERS = [
    # name, GPU type, hosts, GPUs per host, network groups
    ("h100", "H100", 32, 8, 4),
    ("b200", "B200", 8, 8, 2),
]

# path below the root: (name, kind, managers, members, {cluster: shares})
TREE = {
    "prog-a": ("Language models", "program", ["pi"], [], {"h100": 70, "b200": 50}),
    "prog-a/proj-a1": ("Pretraining", "project", ["lead"], ["researcher", "lead", "mei", "tom"],
                       {"h100": 50, "b200": 60}),
    "prog-a/proj-a2": ("Post-training", "project", ["lead-posttrain"],
                       ["lead-posttrain", "ines", "sam"], {"h100": 30, "b200": 40}),
    "prog-a/proj-a3": ("Evaluation", "project", [], ["researcher", "kofi"], {"h100": 20}),
    "prog-b": ("Robotics", "program", ["pi-robotics"], [], {"h100": 20, "b200": 30}),
    "prog-b/proj-b1": ("RL simulation", "project", ["lead-rl"], [], {"h100": 60, "b200": 100}),
    "prog-b/proj-b1/dana": ("Dana's experiments", "researcher", [], ["dana", "lead-rl"],
                            {"h100": 50}),
    "prog-b/proj-b1/erik": ("Erik's experiments", "researcher", [], ["erik"], {"h100": 50}),
    "prog-b/proj-b2": ("Manipulation", "project", [], ["pi-robotics", "noor"], {"h100": 40}),
    "prog-c": ("Science agents", "program", ["pi-science"], [], {"h100": 10, "b200": 20}),
    "prog-c/proj-c1": ("Chemistry agents", "project", [], ["pi-science", "wei"],
                       {"h100": 50, "b200": 1}),
    "prog-c/proj-c2": ("Climate models", "project", [], ["ola"], {"h100": 50}),
}


# The budget history of a seeded past (fractions of it: 0 = since, 1 = now). Approved: project
# A2 asked program A for more H100 shares (24 -> 30, today's figure) and the PI said yes. Pending:
# Robotics asks the CEO for more H100 (20 -> 30).
APPROVED = {"path": "prog-a/proj-a2", "cluster": "h100", "before": 24, "by": "lead-posttrain",
            "decider": "pi", "asked": 0.45, "decided": 0.55,
            "reason": "RLHF runs for the spring release need more H100 time for six weeks.",
            "comment": "Approved for the release; we review it at the next budget meeting."}
PENDING = {"path": "prog-b", "cluster": "h100", "shares": 30, "by": "pi-robotics", "asked": 0.9,
           "reason": "The manipulation benchmark moves to H100: 20 shares leave our queue "
                     "waits at hours."}


def _allocate(ceo, node, cluster, path, value, since, now, users):
    """The initial budget of ``node`` on ``cluster``: now (through the budget service), or,
    with ``since``, dated back to it with the requests of those days."""
    if since is None:
        services.set_shares(ceo, node, cluster, value, reason="initial budget")
        return
    span = now - since
    approved = APPROVED["path"] == path and APPROVED["cluster"] == cluster.name
    first = APPROVED["before"] if approved else value
    allocation = Allocation.objects.create(node=node, cluster=cluster, shares=first)
    AllocationChange.objects.create(node=node, cluster=cluster, changed_by=ceo,
                                    changed_by_name=ceo.username, at=since, old_shares=None,
                                    new_shares=first, reason="initial budget")
    if approved:
        decider = users[APPROVED["decider"]]
        decided = since + span * APPROVED["decided"]
        request = ChangeRequest.objects.create(
            node=node, cluster=cluster, deciding_node=node.parent,
            requested_by=users[APPROVED["by"]], shares_before=first,
            requested_shares=value, reason=APPROVED["reason"],
            state=ChangeRequest.State.APPROVED, created=since + span * APPROVED["asked"],
            decided_by=decider, decided_at=decided, decision_comment=APPROVED["comment"])
        AllocationChange.objects.create(
            node=node, cluster=cluster, changed_by=decider, changed_by_name=decider.username,
            at=decided, old_shares=first, new_shares=value, request=request,
            reason=f"request #{request.pk} approved: {request.reason}")
        allocation.shares, allocation.version = value, 2
        allocation.save(update_fields=["shares", "version", "updated"])
    if PENDING["path"] == path and PENDING["cluster"] == cluster.name:
        ChangeRequest.objects.create(
            node=node, cluster=cluster, deciding_node=node.parent,
            requested_by=users[PENDING["by"]], shares_before=value,
            requested_shares=PENDING["shares"], reason=PENDING["reason"],
            created=since + span * PENDING["asked"])


@transaction.atomic
def seed(since=None, now=None) -> dict[str, str]:
    """Create what is missing. ``since``: date new budgets back to it (see the module)."""
    now = now or timezone.now()
    users = {}
    for username, (full_name, _) in PEOPLE.items():
        first, last = full_name.split(" ", 1)
        user, created = User.objects.get_or_create(
            username=username, defaults={"first_name": first, "last_name": last}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        users[username] = user

    operators, _ = Group.objects.get_or_create(name="Operators")
    operators.permissions.add(Permission.objects.get(codename="operate_fleet"))
    users["operator"].groups.add(operators)

    clusters = {}
    for name, gpu_type, host_count, gpus, groups in CLUSTERS:
        cluster, _ = Cluster.objects.get_or_create(
            name=name, defaults={"gpu_type": gpu_type, "telemetry": "simulated"}
        )
        for index in range(host_count):
            Host.objects.get_or_create(
                cluster=cluster,
                name=f"{name}-{index + 1:03d}",
                defaults={"gpus": gpus, "group": f"rail-{index % groups + 1}"},
            )
        clusters[name] = cluster

    root, _ = BudgetNode.objects.get_or_create(
        parent=None, slug="institute",
        defaults={"name": "Institute", "kind": BudgetNode.Kind.ORGANISATION},
    )
    root.managers.add(users["ceo"])
    nodes = {"": root}
    for path, (name, kind, managers, members, shares) in TREE.items():
        parent_path, _, slug = path.rpartition("/")
        node, _ = BudgetNode.objects.get_or_create(
            parent=nodes[parent_path], slug=slug, defaults={"name": name, "kind": kind}
        )
        node.managers.add(*(users[u] for u in managers))
        node.members.add(*(users[u] for u in members))
        nodes[path] = node
        for cluster_name, value in shares.items():
            if not Allocation.objects.filter(node=node, cluster=clusters[cluster_name]).exists():
                _allocate(users["ceo"], node, clusters[cluster_name], path, value, since, now,
                          users)
    _open_review(root, nodes, users, now)
    return {username: description for username, (_, description) in PEOPLE.items()}


# The quarter's review opened three days ago, due in eleven days, repeated quarterly; the PI
# has confirmed Program A's projects already.
REVIEW = {"opened_days_ago": 3, "days": 14, "confirmed_by": "pi",
          "confirmed": ["prog-a/proj-a1", "prog-a/proj-a2"],
          "comment": "On track with the plan for the quarter."}


def _open_review(root, nodes, users, now) -> None:
    if ReviewCycle.objects.filter(organisation=root).exists():
        return
    opens = now - timedelta(days=REVIEW["opened_days_ago"])
    cycle = reviews.schedule_cycle(
        users["ceo"], root, name=f"{opens:%Y} Q{(opens.month - 1) // 3 + 1}", opens_at=opens,
        due_at=opens + timedelta(days=REVIEW["days"]), repeat_months=3, now=now,
    )
    for item in cycle.items.filter(node__in=[nodes[p] for p in REVIEW["confirmed"]]):
        reviews.confirm(users[REVIEW["confirmed_by"]], item, comment=REVIEW["comment"])


HISTORY_FAILURES = 0.03  # host failures per host-day (real days): a few a week on h100
HISTORY_SEED = 8  # the seed of the replay's host failures: with it h100 sees one escalation


def _fresh(cluster, since) -> bool:
    """No past on ``cluster`` yet (no workload, sample or rollup), and budgets since ``since``."""
    if (Workload.objects.filter(cluster=cluster).exists()
            or OccupancySample.objects.filter(cluster=cluster).exists()
            or CapacityRollup.objects.filter(cluster=cluster).exists()):
        return False
    first = AllocationChange.objects.filter(cluster=cluster).aggregate(at=Min("at"))["at"]
    return first is not None and first <= since


@transaction.atomic
def seed_history(since, now, seed: int = 0, fraction: float = 0.5) -> dict[str, dict]:
    """Give each demo cluster without a past the days ``[since, now)``: the Philly trace's days
    before the live load's start (``scheduler.replay.START_DAY``), in real time, with the
    demo load's rule. A cluster that has any workload, sample or rollup is left alone (so
    running it twice adds nothing), and nothing is written after ``now``."""
    from scheduler.engine.simulate import SimConfig
    from scheduler.history import Past, write_simulated
    from scheduler.replay import START_DAY, Rule, read_jobs

    clusters = {c.name: c for c in Cluster.objects.filter(name__in=[n for n, *_ in CLUSTERS])}
    todo = {name: c for name, c in clusters.items() if _fresh(c, since)}
    if not todo:
        return {}
    end = START_DAY * 86400
    start = end - (now - since).total_seconds()
    rule = Rule(clusters, seed)
    allocated = set(Allocation.objects.values_list("node_id", "cluster__name"))
    past = {name: [] for name in todo}
    for job in read_jobs(start, end, seed, fraction):
        sub = rule.submission(job, allocated)
        if sub.cluster not in todo:
            continue
        limit = todo[sub.cluster].max_min_runtime
        min_runtime = 0 if sub.min_runtime == 0 else max(1, min(round(sub.min_runtime), limit))
        past[sub.cluster].append(Past(
            at=since + timedelta(seconds=job.submit - start), name=sub.name, node=sub.node,
            user=sub.user, gpus=sub.gpus, min_runtime=min_runtime, resumable=sub.resumable,
            duration=job.duration, command=sub.command))
    operator = User.objects.filter(username="operator").first()
    return {
        name: write_simulated(
            cluster, past[name], since, now, operator=operator,
            config=SimConfig(seed=HISTORY_SEED, failure_rate=HISTORY_FAILURES,
                             repair_time=3600.0, repair_fail=0.4, repair_attempts=3,
                             escalation_time=8 * 3600.0),
        )
        for name, cluster in todo.items()
    }
