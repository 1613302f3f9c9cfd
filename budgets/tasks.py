"""The budget tree's periodic work, run by Celery beat (portal.settings.CELERY_BEAT_SCHEDULE)."""

from celery import shared_task

from budgets.services import apply_due_share_changes, expire_due_allocations


@shared_task(name="budgets.apply_share_changes", ignore_result=True)
def apply_share_changes() -> int:
    """Scheduled share changes whose moment has come (an effective date, the end of a boost)
    take effect, then allocations whose expiry has come go."""
    return apply_due_share_changes() + expire_due_allocations()
