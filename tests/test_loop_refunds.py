"""What a tick charged beyond the time a run really held its GPUs (the backend started it
later, or ended it earlier, than the ticks knew) is given back: whatever the ticks and the
hours crossed, the budget is charged exactly GPUs x (real end - real start)."""

from datetime import timedelta

from django.db.models import Sum
from fixtures_loop import T0, make_workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.loop import charge_usage, refund_usage
from scheduler.models import Run, UsageRollup

SECONDS = st.integers(min_value=1, max_value=3 * 3600)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ticks=st.lists(SECONDS, min_size=1, max_size=6),
       late_start=st.integers(min_value=0, max_value=3600),
       early_end=st.integers(min_value=0, max_value=3600))
def test_the_budget_pays_exactly_the_time_the_backend_ran_the_run(lab, ticks, late_start,
                                                                   early_end):
    UsageRollup.objects.all().delete()
    w = make_workload(lab, lab.a1, gpus=3)
    run = Run(workload=w, number=1, allocated=True, gpus=3, started=T0, protected_until=T0,
              accounted_until=T0)
    charged_until = T0
    for seconds in ticks:  # ticks charge from the decision on
        charged_until += timedelta(seconds=seconds)
        charge_usage([run], charged_until)
    real_start = T0 + timedelta(seconds=late_start)
    real_end = max(real_start, charged_until - timedelta(seconds=early_end))
    refund_usage([(run, T0, min(real_start, charged_until))])
    if real_end < charged_until:
        refund_usage([(run, max(real_end, real_start), charged_until)])
    total = UsageRollup.objects.aggregate(s=Sum("gpu_seconds"))["s"] or 0.0
    expected = 3 * max(0.0, (min(real_end, charged_until) - real_start).total_seconds())
    assert abs(total - expected) < 1e-6
