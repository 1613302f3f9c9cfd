"""The demo organisation: DESIGN.md's example (program A 70/100, project A1 50/100 -> 35%)
inside an institute large enough to look real. Seeding is idempotent and never overwrites
shares that somebody changed since."""

from django.contrib.auth.models import Group, Permission, User
from django.db import transaction

from budgets import services
from budgets.models import Allocation, BudgetNode
from scheduler.models import Cluster, Host

DEMO_PASSWORD = "timeshare-demo"

# username: (full name, description shown at start-up)
PEOPLE = {
    "ceo": ("Casey Chen", "CEO, manages the institute"),
    "pi": ("Priya Iyer", "PI of Language models (program A)"),
    "lead": ("Leo Alvarez", "lead researcher of Pretraining (project A1)"),
    "researcher": ("Rosa Martins", "researcher, member of Pretraining"),
    "operator": ("Omar Nasser", "site operator"),
    "outsider": ("Otto Berg", "no role"),
    "pi-robotics": ("Rui Kato", "PI of Robotics"),
    "pi-science": ("Sara Lind", "PI of Science agents"),
    "lead-posttrain": ("Pat Okafor", "lead of Post-training"),
    "lead-rl": ("Remy Dubois", "lead of RL simulation"),
}

CLUSTERS = [
    # name, GPU type, hosts, GPUs per host, network groups
    ("h100", "H100", 32, 8, 4),
    ("b200", "B200", 8, 8, 2),
]

# path below the root: (name, kind, managers, members, {cluster: shares})
TREE = {
    "prog-a": ("Language models", "program", ["pi"], [], {"h100": 70, "b200": 50}),
    "prog-a/proj-a1": ("Pretraining", "project", ["lead"], ["researcher", "lead"],
                       {"h100": 50, "b200": 60}),
    "prog-a/proj-a2": ("Post-training", "project", ["lead-posttrain"], ["lead-posttrain"],
                       {"h100": 30, "b200": 40}),
    "prog-a/proj-a3": ("Evaluation", "project", [], ["researcher"], {"h100": 20}),
    "prog-b": ("Robotics", "program", ["pi-robotics"], [], {"h100": 20, "b200": 30}),
    "prog-b/proj-b1": ("RL simulation", "project", ["lead-rl"], [], {"h100": 60, "b200": 100}),
    "prog-b/proj-b1/dana": ("Dana's experiments", "researcher", [], ["lead-rl"], {"h100": 50}),
    "prog-b/proj-b1/erik": ("Erik's experiments", "researcher", [], [], {"h100": 50}),
    "prog-b/proj-b2": ("Manipulation", "project", [], ["pi-robotics"], {"h100": 40}),
    "prog-c": ("Science agents", "program", ["pi-science"], [], {"h100": 10, "b200": 20}),
    "prog-c/proj-c1": ("Chemistry agents", "project", [], ["pi-science"], {"h100": 50, "b200": 1}),
    "prog-c/proj-c2": ("Climate models", "project", [], [], {"h100": 50}),
}


@transaction.atomic
def seed() -> dict[str, str]:
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
        cluster, _ = Cluster.objects.get_or_create(name=name, defaults={"gpu_type": gpu_type})
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
                services.set_shares(
                    users["ceo"], node, clusters[cluster_name], value, reason="initial budget"
                )
    return {username: description for username, (_, description) in PEOPLE.items()}
