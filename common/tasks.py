"""Periodic upkeep of the shared tables, run by Celery beat (CELERY_BEAT_SCHEDULE)."""

from celery import shared_task
from django.utils import timezone

from common.idempotency import purge_expired


@shared_task(name="common.purge_idempotency_keys", ignore_result=True)
def purge_idempotency_keys() -> int:
    return purge_expired(timezone.now())
