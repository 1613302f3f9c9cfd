"""A host escalated to a human is told to the operators (and only to them)."""

from fixtures_loop import at

from fleet import services as host_services
from notifications.models import Notification
from scheduler import loop


def test_operators_are_told_of_an_escalated_host(lab, django_capture_on_commit_callbacks):
    lab.cluster.backend_config.update(repair_success=0.0, max_repairs=1)
    lab.cluster.save()
    host = lab.hosts[1]
    host_services.drain(lab.operator, host, "ECC errors")
    for seconds in (0, 1, 31, 61):
        with django_capture_on_commit_callbacks(execute=True):
            loop.tick(lab.cluster.pk, at(seconds))
    host.refresh_from_db()
    assert host.state == "ESCALATED"
    told = Notification.objects.get()
    assert (told.recipient, told.kind, told.title, told.link) == (
        lab.operator, "host_escalated", "Host lab-1 needs a human", f"/hosts/{host.pk}/"
    )
