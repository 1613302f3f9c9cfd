"""Celery tasks of the reports: the what-if replay (alone, or the sets of a comparison as one
group) and the weekly review report mail."""

from __future__ import annotations

import logging

from celery import group, shared_task
from django.utils import timezone

from reports import whatif
from reports.models import WhatIf

log = logging.getLogger(__name__)


@shared_task(name="reports.run_what_if", ignore_result=True)
def run_what_if(what_if_id: int) -> str:
    """Claim the queued what-if (a conditional UPDATE: two workers never both run it), replay
    it, writing its progress as it goes, and store the result or the error."""
    rows = WhatIf.objects.filter(pk=what_if_id, state=WhatIf.State.QUEUED)
    if not rows.update(state=WhatIf.State.RUNNING, progress=0.0):
        return "not queued"
    what_if = WhatIf.objects.select_related("cluster", "comparison").get(pk=what_if_id)
    # the sets of a comparison replay the same days, whenever their workers get to them
    now = what_if.comparison.created if what_if.comparison else None

    def progress(value: float) -> None:
        WhatIf.objects.filter(pk=what_if_id).update(progress=max(0.0, min(1.0, value)))

    try:
        result = whatif.run(what_if, progress, now=now)
    except Exception as error:  # any failure ends the row, visibly, instead of a stuck bar
        log.exception("what-if %s failed", what_if_id)
        WhatIf.objects.filter(pk=what_if_id).update(
            state=WhatIf.State.FAILED, error=f"{type(error).__name__}: {error}"[:2000],
            finished=timezone.now(),
        )
        return "failed"
    WhatIf.objects.filter(pk=what_if_id).update(
        state=WhatIf.State.DONE, progress=1.0, result=result, finished=timezone.now()
    )
    return "done"


def queue_comparison(what_if_ids: list[int]) -> None:
    """The parameter sets of a comparison as one group, a task per set: as many replay at once
    as the running workers have processes, each writing its own progress."""
    group(run_what_if.si(pk) for pk in what_if_ids).apply_async()


@shared_task(name="reports.send_review_reports", ignore_result=True)
def send_review_reports() -> int:
    """The beat's weekly review report mail (reports.delivery)."""
    from reports.delivery import send_review_reports as send

    return send()
