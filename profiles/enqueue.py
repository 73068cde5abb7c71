"""The one seam where the request side hands work to Celery, once the rows commit.

Services call these; nothing here imports services, so the capture path reads one
way (services -> enqueue -> tasks). Sending after commit means a worker never looks
for a row that is not there yet.
"""

import logging
from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import broker, tasks, watch_tasks
from .models import Capture, CaptureGroup
from .states import capture_mark_failed

log = logging.getLogger(__name__)


def _unsent(capture_ids: list[int], exc: broker.QueueUnavailable) -> None:
    """No row waits for a task that never comes: fail them with the broker's reason."""
    log.warning("captures %s: %s", capture_ids, exc)
    for capture_id in capture_ids:
        capture_mark_failed(capture_id=capture_id, cause="queue_unavailable", message=str(exc))


def capture_enqueue(*, capture: Capture, countdown: float = 0) -> bool:
    """Send one capture's task to the capture queue (see CELERY_TASK_ROUTES); on a
    broker that cannot be reached, fail the capture with cause `queue_unavailable`."""
    bound = capture.duration + settings.FLAMEDECK_CAPTURE_MARGIN_S
    limits = {"soft_time_limit": bound + 30, "time_limit": bound + 60}
    try:
        broker.send(tasks.run_capture, args=[capture.pk], countdown=countdown or None, **limits)
    except broker.QueueUnavailable as exc:
        _unsent([capture.pk], exc)
        return False
    due = timezone.now() + timezone.timedelta(seconds=countdown)
    Capture.objects.filter(pk=capture.pk).update(enqueued_at=due)
    return True


def capture_enqueue_on_commit(*, capture: Capture) -> None:
    transaction.on_commit(lambda: capture_enqueue(capture=capture), robust=True)


def analysis_enqueue(*, capture_id: int) -> None:
    """Send a capture whose samples are stored to the analysis queue. A broker that
    cannot be reached leaves it parsing: the reaper sends it again later."""
    try:
        broker.send(tasks.analyze_capture, args=[capture_id])
    except broker.QueueUnavailable as exc:
        log.warning("capture %s stays parsing until the reaper re-sends it: %s", capture_id, exc)


def analysis_enqueue_on_commit(*, capture_id: int) -> None:
    transaction.on_commit(lambda: analysis_enqueue(capture_id=capture_id), robust=True)


def group_enqueue(*, group: CaptureGroup) -> None:
    """One task per host of the group: each starts all of its host's py-spy at once."""
    by_host: dict[int, list[int]] = defaultdict(list)
    for capture_id, host_id in group.captures.values_list("pk", "host_id").order_by("pk"):
        by_host[host_id].append(capture_id)
    for host_id, capture_ids in by_host.items():
        try:
            broker.send(tasks.run_host_captures, args=[group.pk, host_id, capture_ids])
        except broker.QueueUnavailable as exc:
            _unsent(capture_ids, exc)
            continue
        Capture.objects.filter(pk__in=capture_ids).update(enqueued_at=timezone.now())


def group_enqueue_on_commit(*, group: CaptureGroup) -> None:
    transaction.on_commit(lambda: group_enqueue(group=group), robust=True)


def judge_enqueue(*, capture_id: int) -> None:
    """Judge a done capture against the watches of its rank (analysis queue). A broker
    that cannot be reached skips it: the capture stays unjudged, nothing is lost."""
    try:
        broker.send(watch_tasks.judge_capture, args=[capture_id])
    except broker.QueueUnavailable as exc:
        log.warning("capture %s is not judged against its watches: %s", capture_id, exc)


def judge_enqueue_on_commit(*, capture_id: int) -> None:
    transaction.on_commit(lambda: judge_enqueue(capture_id=capture_id), robust=True)
