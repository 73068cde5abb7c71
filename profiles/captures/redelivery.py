"""Queued captures whose task message never reached a worker (lost in a broker
restart, a publish that failed during a retry, a process that died between commit
and send): beat's reaper re-sends them, or fails them with a named cause.

A re-sent message is harmless even when the first one turns up after all: the
claim is a conditional UPDATE, so the second message finds the capture taken.
"""

import logging

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from profiles.captures import broker
from profiles.captures.enqueue import capture_enqueue
from profiles.captures.lifecycle import Status, capture_mark_failed
from profiles.models import Capture

log = logging.getLogger(__name__)
MAX_RESENDS = 3


def capture_queue() -> str:
    """The queue run_capture messages go to (a capture queue of its own, when set)."""
    return getattr(settings, "FLAMEDECK_CAPTURE_QUEUE", settings.CELERY_TASK_DEFAULT_QUEUE)


def stale_queued(*, timeout_s: int) -> QuerySet[Capture]:
    """Queued captures no worker claimed within `timeout_s` of their last send."""
    cutoff = timezone.now() - timezone.timedelta(seconds=timeout_s)
    never_sent = Q(enqueued_at__isnull=True, queued_at__lt=cutoff)
    return Capture.objects.filter(
        Q(enqueued_at__lt=cutoff) | never_sent,
        status=Status.QUEUED,
        cancel_requested=False,
        host__isnull=False,
    ).order_by("pk")


def captures_resend_lost(*, timeout_s: int) -> int:
    """Re-send (or fail) stale queued captures; returns how many it acted on.

    Messages still waiting in the queue mean a busy queue, not a lost message: then
    only captures past FLAMEDECK_QUEUE_TIMEOUT_S are failed. An empty queue with a
    stale capture means its message is gone: it is re-sent, at most MAX_RESENDS times.
    """
    stale = list(stale_queued(timeout_s=timeout_s))
    if not stale:
        return 0
    try:
        waiting = broker.waiting(capture_queue())
    except broker.QueueUnavailable as exc:
        return sum(_fail(c, "queue_unavailable", str(exc)) for c in stale)
    acted = sum(_fail_if_too_old(c) for c in stale)
    if waiting:
        return acted
    for capture in stale:
        acted += _resend(capture)
    return acted


def _fail(capture: Capture, cause: str, message: str) -> int:
    log.warning("capture %s: %s", capture.pk, message)
    return int(capture_mark_failed(capture_id=capture.pk, cause=cause, message=message))


def _fail_if_too_old(capture: Capture) -> int:
    limit = settings.FLAMEDECK_QUEUE_TIMEOUT_S
    if timezone.now() - capture.queued_at < timezone.timedelta(seconds=limit):
        return 0
    message = (
        f"queue unavailable: no worker took this capture within {limit} s; start one "
        f"consuming queue {capture_queue()!r} (`make worker`)"
    )
    return _fail(capture, "queue_unavailable", message)


def _resend(capture: Capture) -> int:
    capture.refresh_from_db(fields=["status", "resends"])
    if capture.status != Status.QUEUED:
        return 0
    if capture.group_id is not None:
        # Sent alone it would sample another window than the rest of its job.
        message = (
            "queue unavailable: the whole-job task for this process never reached a worker; "
            f"check the workers consuming queue {capture_queue()!r} and capture the job again"
        )
        return _fail(capture, "queue_unavailable", message)
    if capture.resends >= MAX_RESENDS:
        message = (
            f"queue unavailable: the task was sent {capture.resends + 1} times and no worker "
            f"took it; check the workers consuming queue {capture_queue()!r}"
        )
        return _fail(capture, "queue_unavailable", message)
    Capture.objects.filter(pk=capture.pk).update(resends=capture.resends + 1)
    log.warning("capture %s: its task never reached a worker; sending it again", capture.pk)
    capture_enqueue(capture=capture)
    return 1
