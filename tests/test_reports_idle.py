"""The idle allocations dashboard: live allocated runs flagged idle, per budget the persona
may see, with hand-computed idle GPU-hours (GPUs x time since idle)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from query_counts import count_queries

from scheduler.models import Run, UtilizationRollup, Workload

URL = reverse("reports:idle")
# session, user, the roles behind the budgets the persona sees, the flagged runs, the memory
# they hold (the CEO manages the root: the operator permission is never asked)
IDLE_PAGE_QUERIES = 8


def running(history, name, budget, gpus, *, allocated=True, ended=None):
    now = history.now
    w = Workload.objects.create(
        name=name, owner=history.users["researcher"], budget=budget, cluster=history.cluster,
        gpus=gpus, min_runtime=3600 if allocated else 0, command="x",
        submitted=now - timedelta(hours=3), state="RUNNING",
    )
    return Run.objects.create(
        workload=w, number=1, allocated=allocated, gpus=gpus, started=now - timedelta(hours=2),
        protected_until=now - timedelta(hours=1), accounted_until=now, ended=ended,
    )


def flag(run, minutes_idle):
    since = run.accounted_until - timedelta(minutes=minutes_idle)  # accounted_until: now
    Run.objects.filter(pk=run.pk).update(idle_since=since,
                                         idle_flagged_at=since + timedelta(minutes=30))


@pytest.fixture
def squatting(recent):
    """proj-a1's recent run (2 GPUs) idle for 90 min: 3 GPU-h; proj-b1's 4-GPU run idle for
    30 min: 2 GPU-h. Not listed: an unallocated idle run and an ended one."""
    flag(Run.objects.get(workload__name="recent"), 90)
    flag(running(recent, "b-notebook", recent.proj_b1, 4), 30)
    flag(running(recent, "free", recent.proj_a1, 1, allocated=False), 60)
    flag(running(recent, "over", recent.proj_a1, 1, ended=recent.now), 60)
    return recent


def budgets(response):
    return {b.budget.path: (b.gpus, round(b.idle_gpu_hours, 1), [i.run.workload.name
                                                                 for i in b.runs])
            for b in response.context["budgets"]}


def test_the_ceo_sees_every_budget_s_idle_allocations(squatting):
    response = squatting.client_for("ceo").get(URL)
    assert budgets(response) == {
        "org/prog-a/proj-a1": (2, 3.0, ["recent"]),
        "org/prog-b/proj-b1": (4, 2.0, ["b-notebook"]),
    }
    assert "6 GPUs" in response.content.decode()


def test_a_pi_sees_only_their_program(squatting):
    response = squatting.client_for("pi").get(URL)
    assert list(budgets(response)) == ["org/prog-a/proj-a1"]


def test_a_researcher_sees_the_budgets_they_belong_to(squatting):
    response = squatting.client_for("researcher").get(URL)
    assert list(budgets(response)) == ["org/prog-a/proj-a1"]


def test_an_outsider_is_refused(squatting):
    assert squatting.client_for("outsider").get(URL).status_code == 403


def test_busy_again_leaves_the_list(squatting):
    Run.objects.filter(workload__name="recent").update(idle_since=None, idle_flagged_at=None)
    response = squatting.client_for("pi").get(URL)
    assert budgets(response) == {}
    assert "No idle allocation" in response.content.decode()


def test_query_count_does_not_grow_with_idle_runs(squatting):
    client = squatting.client_for("ceo")
    before = count_queries(client, URL)
    assert before == IDLE_PAGE_QUERIES
    for k in range(5):
        flag(running(squatting, f"more-{k}", squatting.proj_a2, 1), 45)
    assert count_queries(client, URL) == before


def measure(run, hour, memory_mib):
    UtilizationRollup.objects.create(
        run=run, cluster=run.workload.cluster, budget=run.workload.budget,
        owner=run.workload.owner, allocated=run.allocated, hour=hour, gpu_seconds=3600,
        busy_gpu_seconds=36, memory_mib_max=memory_mib,
    )


def test_the_memory_an_idle_run_holds_is_its_peak_since_it_went_idle(squatting):
    """"recent" went idle 90 min ago: the hour it went idle and the next count (30 and 20
    GiB: 30 GiB); the hour before, busier with 70 GiB, does not."""
    run = Run.objects.get(workload__name="recent")
    idle_hour = run.idle_since.replace(minute=0, second=0, microsecond=0)
    for hours, mib in [(-1, 70 * 1024), (0, 30 * 1024), (1, 20 * 1024)]:
        measure(run, idle_hour + timedelta(hours=hours), mib)
    response = squatting.client_for("pi").get(URL)
    [budget] = response.context["budgets"]
    assert budget.runs[0].memory_gib == pytest.approx(30.0)
    assert "30.0 GiB" in response.content.decode()


def test_without_memory_telemetry_the_memory_held_is_unknown(squatting):
    response = squatting.client_for("pi").get(URL)
    [budget] = response.context["budgets"]
    assert budget.runs[0].memory_gib is None
    assert "unknown" in response.content.decode()
