"""/metrics: Prometheus text read from the database at scrape time; operators (session or
token) and the scraper token in METRICS_TOKEN may read it, nobody else."""

from datetime import timedelta

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from fleet.models import HostEvent
from scheduler.models import Event, Run
from scheduler.tick_metrics import record_tick

URL = "/metrics"


def samples(response) -> dict:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(found, name, **labels):
    return found[(name, tuple(sorted(labels.items())))]


@pytest.mark.parametrize("persona", [None, "outsider", "researcher", "lead", "pi", "ceo"])
def test_only_operators_read_metrics(fleet, api_for, client_for, persona):
    assert api_for(persona).get(URL).status_code == 403
    assert client_for(persona).get(URL).status_code == 403


def test_operator_by_session_or_token(fleet, api_for, client_for):
    assert client_for("operator").get(URL).status_code == 200
    assert api_for("operator").get(URL).status_code == 200


def test_scraper_token(fleet, monkeypatch):
    monkeypatch.setenv("METRICS_TOKEN", "s3cret-scraper")
    assert Client().get(URL, HTTP_AUTHORIZATION="Bearer s3cret-scraper").status_code == 200
    assert Client().get(URL, HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    monkeypatch.setenv("METRICS_TOKEN", "")
    assert Client().get(URL, HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_a_bad_user_token_is_403_not_an_error(fleet):
    assert Client().get(URL, HTTP_AUTHORIZATION="Bearer ts_nope").status_code == 403


def test_fleet_and_queue_figures(fleet, api_for):
    found = samples(api_for("operator").get(URL))
    assert value(found, "timeshare_gpus", cluster="h100", state="allocated") == 2
    assert value(found, "timeshare_gpus", cluster="h100", state="free") == 8
    assert value(found, "timeshare_gpus", cluster="b200", state="free") == 8
    assert value(found, "timeshare_hosts", cluster="h100", state="AVAILABLE") == 2
    assert value(found, "timeshare_hosts", cluster="h100", state="ESCALATED") == 0
    exp_1 = {"cluster": "h100", "budget": "org/prog-a/proj-a1/exp-1"}
    assert value(found, "timeshare_pending_workloads", **exp_1) == 1
    assert value(found, "timeshare_pending_gpus", **exp_1) == 4
    assert value(found, "timeshare_workloads", cluster="h100", state="PENDING") == 3
    # `run` waited 10 minutes for its start: a small allocated workload (2 GPUs, 1 h).
    wait = {"cluster": "h100", "class": "small"}
    assert value(found, "timeshare_queue_wait_seconds_count", **wait) == 1
    assert value(found, "timeshare_queue_wait_seconds_sum", **wait) == 600
    assert value(found, "timeshare_queue_wait_seconds_bucket", le="300.0", **wait) == 0
    assert value(found, "timeshare_queue_wait_seconds_bucket", le="600.0", **wait) == 1
    assert value(found, "timeshare_budget_fraction", cluster="h100",
                 budget="org/prog-a/proj-a1") == pytest.approx(0.35)


def test_preemptions_requeues_repairs_and_ticks(fleet, api_for):
    run = fleet.run
    run.ended = run.started + timedelta(hours=2)
    run.end_reason = Run.EndReason.PREEMPTED
    run.save()
    Event.objects.create(workload=fleet.run_w, kind=Event.Kind.REQUEUED, reason="preempted")
    HostEvent.objects.create(host=fleet.h100_1, kind="repair_succeeded", needed_human=True)
    HostEvent.objects.create(host=fleet.h100_1, kind="repair_succeeded")
    HostEvent.objects.create(host=fleet.h100_1, kind="escalated", needed_human=True)
    record_tick(fleet.org.cluster.pk, 0.25)
    found = samples(api_for("operator").get(URL))
    assert value(found, "timeshare_preemptions_total", cluster="h100") == 1
    assert value(found, "timeshare_requeues_total", cluster="h100") == 1
    assert value(found, "timeshare_repairs_total", cluster="h100", needed_human="true") == 1
    assert value(found, "timeshare_repairs_total", cluster="h100", needed_human="false") == 1
    assert value(found, "timeshare_host_events_total", cluster="h100", kind="escalated") == 1
    assert value(found, "timeshare_tick_duration_seconds", cluster="h100") == 0.25


def test_the_human_repair_share_is_the_hosts_pages_figure(fleet, api_for):
    # 4 repairs that brought h100-1 back, 1 by a human: 1/4; an escalation is not a repair
    for human in (True, False, False, False):
        HostEvent.objects.create(host=fleet.h100_1, kind="repair_succeeded", needed_human=human)
    HostEvent.objects.create(host=fleet.h100_1, kind="escalated", needed_human=True)
    found = samples(api_for("operator").get(URL))
    assert value(found, "timeshare_human_repair_share", cluster="h100") == 0.25
    b200 = ("timeshare_human_repair_share", (("cluster", "b200"),))
    assert b200 not in found  # no repair yet: no figure, rather than 0


def test_scrape_query_count_does_not_grow_with_workloads(fleet, api_for,
                                                         django_assert_max_num_queries):
    from scheduler.models import Workload

    client = api_for("operator")
    client.get(URL)
    template = fleet.wait
    Workload.objects.bulk_create([
        Workload(name=f"bulk-{i}", owner=template.owner, budget=template.budget,
                 cluster=template.cluster, gpus=1, min_runtime=0, command="x")
        for i in range(50)
    ])
    with django_assert_max_num_queries(60):
        client.get(URL)


