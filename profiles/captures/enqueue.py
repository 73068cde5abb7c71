"""The one seam where work is handed to Celery: by the request side once the rows
commit, and by a capture task handing its samples to the analysis queue.

Services and tasks call these; nothing here imports either (tasks are found by name
in the app's registry), so the capture path reads one way (services -> enqueue ->
tasks). Sending after commit means a worker never looks for a row that is not there
yet.
"""

import logging
from collections import defaultdict

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from profiles.captures import broker
from profiles.captures.lifecycle import capture_mark_failed
from profiles.models import Capture, CaptureGroup

log = logging.getLogger(__name__)
RUN_CAPTURE = "profiles.tasks.run_capture"
RUN_HOST_CAPTURES = "profiles.tasks.run_host_captures"
ANALYZE_CAPTURE = "profiles.tasks.analyze_capture"
JUDGE_CAPTURE = "profiles.watch_tasks.judge_capture"


def _task(name: str):
    """A task of profiles.captures.tasks, profiles.jobs.tasks or profiles.watches.tasks,
    by name (as routed in CELERY_TASK_ROUTES)."""
    return current_app.tasks[name]


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
        broker.send(_task(RUN_CAPTURE), args=[capture.pk], countdown=countdown or None, **limits)
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
        broker.send(_task(ANALYZE_CAPTURE), args=[capture_id])
    except broker.QueueUnavailable as exc:
        log.warning("capture %s stays parsing until the reaper re-sends it: %s", capture_id, exc)


def analysis_enqueue_on_commit(*, capture_id: int) -> None:
    transaction.on_commit(lambda: analysis_enqueue(capture_id=capture_id), robust=True)


def analysis_backlog() -> bool:
    """Whether analysis messages wait in their queue (True also when the broker cannot
    say: a capture is then left as it is rather than sent again)."""
    try:
        return broker.waiting(settings.FLAMEDECK_ANALYSIS_QUEUE) > 0
    except broker.QueueUnavailable:
        return True


def group_enqueue(*, group: CaptureGroup) -> None:
    """One task per host of the group: each starts all of its host's py-spy at once."""
    by_host: dict[int, list[int]] = defaultdict(list)
    for capture_id, host_id in group.captures.values_list("pk", "host_id").order_by("pk"):
        by_host[host_id].append(capture_id)
    for host_id, capture_ids in by_host.items():
        try:
            broker.send(_task(RUN_HOST_CAPTURES), args=[group.pk, host_id, capture_ids])
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
        broker.send(_task(JUDGE_CAPTURE), args=[capture_id])
    except broker.QueueUnavailable as exc:
        log.warning("capture %s is not judged against its watches: %s", capture_id, exc)


def judge_enqueue_on_commit(*, capture_id: int) -> None:
    transaction.on_commit(lambda: judge_enqueue(capture_id=capture_id), robust=True)
