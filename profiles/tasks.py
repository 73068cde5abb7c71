"""Celery tasks: thin wrappers that load by id and call one service."""

import logging
import random

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from runs import remote

from . import pipeline, services
from .models import Capture

log = logging.getLogger(__name__)


def backoff_s(retries: int) -> float:
    """Exponential backoff with full jitter: 0..(base·2^n) seconds, capped at 60."""
    return random.uniform(0, min(60, settings.FLAMEDECK_RETRY_BACKOFF_S * 2**retries))


# No acks_late: a redelivered message must never start a second sampler on a GPU host.
@shared_task(bind=True, acks_late=False)
def run_capture(self, capture_id: int) -> str:
    if not Capture.objects.filter(pk=capture_id).exists():
        log.warning("capture %s is gone; nothing to do", capture_id)
        return "missing"
    try:
        return pipeline.capture_execute(capture_id=capture_id)
    except remote.RemoteError as exc:
        if self.request.retries >= settings.FLAMEDECK_CAPTURE_RETRIES:
            services.capture_mark_failed(
                capture_id=capture_id, cause=exc.cause, message=exc.message
            )
            return Capture.Status.FAILED
        raise self.retry(
            exc=exc, countdown=backoff_s(self.request.retries), max_retries=None
        ) from exc
    except SoftTimeLimitExceeded:
        services.capture_mark_failed(
            capture_id=capture_id,
            cause="time_limit",
            message="The worker's time limit for this capture ran out; py-spy was stopped.",
        )
        return Capture.Status.FAILED


@shared_task
def reap_lost_captures() -> int:
    return services.reap_lost_captures(timeout_s=settings.FLAMEDECK_HEARTBEAT_TIMEOUT_S)


@shared_task
def schedule_captures() -> int:
    from .jobs import scheduled_captures_due

    return len(scheduled_captures_due())


@shared_task
def prune_raw_files() -> int:
    from .jobs import raw_prune

    budget = settings.FLAMEDECK_RAW_BUDGET_MB * 1024 * 1024
    return raw_prune(budget_bytes=budget)["pruned"]
