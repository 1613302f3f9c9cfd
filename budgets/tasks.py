"""The budget tree's periodic work, run by Celery beat (portal.settings.CELERY_BEAT_SCHEDULE)."""

from celery import shared_task

from budgets.reviews import run_due_cycles
from budgets.services import apply_due_share_changes, expire_due_allocations


@shared_task(name="budgets.apply_share_changes", ignore_result=True)
def apply_share_changes() -> int:
    """Scheduled share changes whose moment has come (an effective date, the end of a boost)
    take effect, then allocations whose expiry has come go."""
    return apply_due_share_changes() + expire_due_allocations()


@shared_task(name="budgets.run_review_cycles", ignore_result=True)
def run_review_cycles() -> int:
    """Review cycles open at their moment, remind before their deadline, close at it."""
    return run_due_cycles()
