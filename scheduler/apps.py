from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self):
        # What the fleet, below, asks of the scheduler: the work a workload's earlier runs
        # did, and a tick when an operator changes a host (the receiver in tasks). What the
        # budgets ask: a leaving member's pending work settled (the receiver in services).
        from fleet.backends import register_earlier_work
        from scheduler import (  # noqa: F401 - connect tick_on_host_change, settle_leavers_work
            engine_views,
            services,
            tasks,
        )

        register_earlier_work(engine_views.earlier_work)
