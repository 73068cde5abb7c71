"""Celery tasks: thin wrappers that load by id and call the pipeline.

Capturing is waiting on a remote sampler (capture queue, threads pool); parsing is
CPU work (analysis queue, prefork pool): a recorded capture is handed to
`analyze_capture` (through `enqueue`, like every message) once its samples are
stored. Routing is by task name (CELERY_TASK_ROUTES in config/settings.py); each task
keeps the name it had before profiles was arranged in packages (`profiles.tasks.*`),
so messages queued across an upgrade still find it. A whole-job host's task is in
profiles.jobs.tasks; beat's periodic tasks are in profiles.beat.
"""

import logging
import random

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from profiles.captures import pipeline
from profiles.captures.enqueue import analysis_enqueue
from profiles.captures.lifecycle import (
    capture_fail_retried,
    capture_mark_failed,
    capture_retry_noted,
)
from profiles.models import Capture
from runs import remote

log = logging.getLogger(__name__)


def backoff_s(retries: int) -> float:
    """Exponential backoff with jitter: between half and all of base·2^n seconds (cap 60),
    so retries spread out but never follow the failure at once."""
    ceiling = min(60, settings.FLAMEDECK_RETRY_BACKOFF_S * 2**retries)
    return random.uniform(ceiling / 2, ceiling)


# No acks_late: a redelivered message must never start a second sampler on a GPU host.
@shared_task(bind=True, acks_late=False, name="profiles.tasks.run_capture")
def run_capture(self, capture_id: int) -> str:
    if not Capture.objects.filter(pk=capture_id).exists():
        log.warning("capture %s is gone; nothing to do", capture_id)
        return "missing"
    try:
        status = pipeline.capture_execute(capture_id=capture_id, analyze=False)
    except remote.RemoteError as exc:
        # Attempts are counted on the row (claims), so a re-sent message keeps the count.
        attempts = Capture.objects.get(pk=capture_id).attempts
        total = settings.FLAMEDECK_CAPTURE_RETRIES + 1
        if attempts >= total:
            capture_fail_retried(capture_id=capture_id, error=exc, attempts=attempts)
            return Capture.Status.FAILED
        countdown = backoff_s(attempts - 1)
        capture_retry_noted(
            capture_id=capture_id, error=exc, attempt=attempts + 1, of=total, countdown=countdown
        )
        raise self.retry(exc=exc, countdown=countdown, max_retries=None) from exc
    except SoftTimeLimitExceeded:
        capture_mark_failed(
            capture_id=capture_id,
            cause="time_limit",
            message="The worker's time limit for this capture ran out; py-spy was stopped.",
        )
        return Capture.Status.FAILED
    if status == Capture.Status.PARSING:
        analysis_enqueue(capture_id=capture_id)
    return status


@shared_task(name="profiles.tasks.analyze_capture")
def analyze_capture(capture_id: int) -> str:
    return pipeline.capture_analyze_stored(capture_id=capture_id)
