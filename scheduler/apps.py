from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self):
        # What the fleet, below, asks of the scheduler: the work a workload's earlier runs
        # did, and a tick when an operator changes a host (the receiver in tasks).
        from fleet.backends import register_earlier_work
        from scheduler import engine_views, tasks  # noqa: F401 - connects tick_on_host_change

        register_earlier_work(engine_views.earlier_work)
