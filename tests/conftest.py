"""A small organisation built by hand, with the six personas of STYLE.md item 12.

    org (organisation)            managers: ceo
    ├── prog-a  Program A  70      managers: pi
    │   ├── proj-a1  Project A1  50   managers: lead, members: researcher
    │   │   └── exp-1  Experiment 1  100
    │   └── proj-a2  Project A2  50
    └── prog-b  Program B  30
        └── proj-b1  Project B1  100

One cluster, h100, with 2 hosts of 5 GPUs = 10 GPUs. By hand: prog-a 70%, proj-a1
0.7 x 0.5 = 35% (588 GPU-h/week = 0.35 x 10 x 168), proj-a2 35%, exp-1 35%, prog-b 30%,
proj-b1 30%. The operator only holds `scheduler.operate_fleet` through a group; the outsider
has no role at all.
"""

import os
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from budgets import services
from budgets.models import (
    Allocation,
    AllocationChange,
    BudgetNode,
    ChangeRequest,
    MembershipChange,
)
from fleet.models import Cluster, Host

# Every fixture module, registered once for the whole suite:
# fixtures_scheduler (workloads and hosts for the pages), fixtures_loop (the live loop's lab
# with a controlled clock), fixtures_worker (a real Celery worker process), fixtures_api (API
# clients with real tokens), fixtures_reports (known histories for the reports),
# fixtures_browser (Chromium through Playwright, and what went wrong in its pages),
# fixtures_prometheus (a real Prometheus started by PID), fixtures_mail (a real SMTP server in
# the test process).
pytest_plugins = [
    "fixtures_scheduler",
    "fixtures_loop",
    "fixtures_worker",
    "fixtures_api",
    "fixtures_reports",
    "fixtures_browser",
    "fixtures_prometheus",
    "fixtures_mail",
]

PASSWORD = "persona-password"
PERSONAS = ("ceo", "pi", "lead", "researcher", "outsider", "operator")
REQUIRE_BROWSER = "TIMESHARE_REQUIRE_BROWSER"


@pytest.fixture(autouse=True)
def own_cache(settings, request):
    """Each test its own cache: what one test leaves there (the mark of a queued tick, a
    validation snapshot) never decides what another sees."""
    settings.CACHES = {"default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": request.node.nodeid,
    }}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With TIMESHARE_REQUIRE_BROWSER=1 (CI) a skipped browser test is a failure."""
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and item.get_closest_marker("browser") is not None
        and os.environ.get(REQUIRE_BROWSER) == "1"
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"browser test skipped but {REQUIRE_BROWSER}=1: {reason}"


@pytest.fixture
def org(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    users = {name: User.objects.create_user(name, password=PASSWORD) for name in PERSONAS}
    operators = Group.objects.create(name="Operators")
    operators.permissions.add(Permission.objects.get(codename="operate_fleet"))
    users["operator"].groups.add(operators)

    h100 = Cluster.objects.create(name="h100", gpu_type="H100")
    for index in range(2):
        Host.objects.create(cluster=h100, name=f"h100-{index}", gpus=5)

    def node(parent, slug, name, kind, managers=(), members=()):
        created = BudgetNode.objects.create(parent=parent, slug=slug, name=name, kind=kind)
        created.managers.add(*(users[u] for u in managers))
        created.members.add(*(users[u] for u in members))
        return created

    root = node(None, "org", "Organisation", "organisation", managers=["ceo"])
    prog_a = node(root, "prog-a", "Program A", "program", managers=["pi"])
    proj_a1 = node(prog_a, "proj-a1", "Project A1", "project", ["lead"], ["researcher"])
    exp_1 = node(proj_a1, "exp-1", "Experiment 1", "researcher")
    proj_a2 = node(prog_a, "proj-a2", "Project A2", "project")
    prog_b = node(root, "prog-b", "Program B", "program")
    proj_b1 = node(prog_b, "proj-b1", "Project B1", "project")
    for budget, shares in [
        (prog_a, 70), (proj_a1, 50), (exp_1, 100), (proj_a2, 50), (prog_b, 30), (proj_b1, 100)
    ]:
        services.set_shares(users["ceo"], budget, h100, shares, reason="initial budget")

    return SimpleNamespace(
        users=users,
        cluster=h100,
        root=root,
        prog_a=prog_a,
        proj_a1=proj_a1,
        exp_1=exp_1,
        proj_a2=proj_a2,
        prog_b=prog_b,
        proj_b1=proj_b1,
        **users,
    )


@pytest.fixture
def password():
    """Every persona's password, for tests that log in through the login form."""
    return PASSWORD


@pytest.fixture
def client_for(org):
    """`client_for("pi")`: a test client logged in as that persona (None: anonymous)."""
    clients = {}

    def make(persona):
        if persona not in clients:
            client = Client()
            if persona is not None:
                client.force_login(org.users[persona])
            clients[persona] = client
        return clients[persona]

    return make


@pytest.fixture
def htmx():
    """Headers of an htmx request: views answer the `#tree-body` fragment."""
    return {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def shares_of(org):
    """`shares_of(node)`: its shares on h100 now, read from the database (None: no allocation)."""

    def read(node):
        allocation = Allocation.objects.filter(node=node, cluster=org.cluster).first()
        return allocation.shares if allocation else None

    return read


def snapshot():
    """Everything a refused action must leave alone."""
    return {
        "allocations": sorted(
            Allocation.objects.values_list("node_id", "cluster_id", "shares", "version")
        ),
        "changes": AllocationChange.objects.count(),
        "requests": sorted(
            ChangeRequest.objects.values_list("pk", "state", "requested_shares", "decided_by")
        ),
        "nodes": sorted(BudgetNode.objects.values_list("pk", "parent_id", "path")),
        "people": sorted(
            (node.pk, role, user)
            for node in BudgetNode.objects.all()
            for role in ("managers", "members", "reviewers")
            for user in getattr(node, role).values_list("username", flat=True)
        ),
        "membership_changes": MembershipChange.objects.count(),
    }


@pytest.fixture
def unchanged():
    """`with unchanged(): ...` asserts the block wrote nothing to the budget tables."""

    @contextmanager
    def check():
        before = snapshot()
        yield
        assert snapshot() == before

    return check
