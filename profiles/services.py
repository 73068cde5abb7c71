"""Writes for captures: create, claim, move through the state machine, cancel, import.

The worker-side pipeline (run py-spy, store, analyse) lives in `profiles.pipeline`.
"""

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from runs.models import Host, Run, RunProcess, Tag

from .models import Capture, CaptureGroup, Comment, KeywordSet

log = logging.getLogger(__name__)
Status = Capture.Status

RECORD_FIELDS = (
    "duration",
    "rate",
    "native",
    "threads",
    "idle",
    "gil",
    "nonblocking",
    "subprocesses",
)


class IllegalTransition(Exception):
    pass


def capture_transition(*, capture_id: int, to: str, **fields: Any) -> bool:
    """Move a capture to `to` only from a status that allows it; False if it moved on.

    A conditional UPDATE, so two workers (or a worker and a cancel) never both win.
    """
    sources = [src for src, targets in Capture.TRANSITIONS.items() if to in targets]
    if not sources:
        raise IllegalTransition(f"no status leads to {to}")
    if to in Capture.FINAL:
        fields.setdefault("finished_at", timezone.now())
    return bool(
        Capture.objects.filter(pk=capture_id, status__in=sources).update(status=to, **fields)
    )


def capture_claim(*, capture_id: int, worker: str) -> bool:
    """Claim a queued capture for this worker; False means someone else has it."""
    now = timezone.now()
    return bool(
        Capture.objects.filter(pk=capture_id, status=Status.QUEUED, cancel_requested=False).update(
            status=Status.RUNNING, started_at=now, heartbeat_at=now, worker=worker
        )
    )


def capture_validate_settings(*, kind: str, duration: int, rate: int) -> None:
    from django.conf import settings

    if kind not in (Capture.Kind.RECORD, Capture.Kind.DUMP):
        raise ValidationError({"kind": "kind must be record or dump"})
    if not 1 <= duration <= settings.FLAMEDECK_MAX_DURATION_S:
        raise ValidationError(
            {"duration": f"duration must be 1–{settings.FLAMEDECK_MAX_DURATION_S} seconds"}
        )
    if not 1 <= rate <= 2000:
        raise ValidationError({"rate": "rate must be 1–2000 samples per second"})


def capture_create(
    *,
    user: AbstractBaseUser | None,
    host: Host,
    pid: int,
    kind: str = Capture.Kind.RECORD,
    run: Run | None = None,
    process: RunProcess | None = None,
    group: CaptureGroup | None = None,
    scheduled: bool = False,
    enqueue: bool = True,
    **py_spy_settings: Any,
) -> Capture:
    """Queue a capture and enqueue its task once the row is committed.

    `enqueue=False` leaves it queued for a caller that runs it in-process (the
    `capture` management command).
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise ValidationError({"pid": "pid must be a positive integer"})
    unknown = set(py_spy_settings) - set(RECORD_FIELDS)
    if unknown:
        raise ValidationError({"settings": f"unknown settings: {', '.join(sorted(unknown))}"})
    capture = Capture(
        host=host,
        pid=pid,
        kind=kind,
        run=run or (process.run if process else None),
        process=process,
        group=group,
        scheduled=scheduled,
        requested_by=user,
        keyword_set=KeywordSet.objects.filter(is_default=True).first(),
        **py_spy_settings,
    )
    capture_validate_settings(kind=capture.kind, duration=capture.duration, rate=capture.rate)
    capture.save()
    if enqueue:
        transaction.on_commit(lambda: capture_enqueue(capture=capture))
    return capture


def capture_enqueue(*, capture: Capture) -> None:
    from django.conf import settings

    from .tasks import run_capture

    bound = capture.duration + settings.FLAMEDECK_CAPTURE_MARGIN_S
    run_capture.apply_async(args=[capture.pk], soft_time_limit=bound + 30, time_limit=bound + 60)


def capture_mark_failed(*, capture_id: int, cause: str, message: str) -> bool:
    return capture_transition(
        capture_id=capture_id, to=Status.FAILED, error=message, error_cause=cause
    )


def capture_cancel(*, capture: Capture) -> bool:
    """Cancel a queued capture at once; ask the worker to stop a running one.

    The worker sees `cancel_requested`, stops py-spy with SIGINT (samples kept) and
    ends the capture as cancelled, with whatever samples it had.
    """
    if capture.status == Status.QUEUED and capture_transition(
        capture_id=capture.pk,
        to=Status.CANCELLED,
        cancel_requested=True,
        error="Cancelled before it started.",
    ):
        return True
    return bool(
        Capture.objects.filter(pk=capture.pk, status=Status.RUNNING).update(cancel_requested=True)
    )


def capture_import(
    *,
    user: AbstractBaseUser | None,
    file: UploadedFile,
    log: UploadedFile | None = None,
    run: Run | None = None,
) -> Capture:
    """Store an uploaded raw/speedscope file (and py-spy log), then analyse it.

    The files are kept even when parsing fails, so nothing uploaded is lost.
    """
    from . import pipeline

    capture = Capture.objects.create(
        kind=Capture.Kind.IMPORT,
        run=run,
        requested_by=user,
        status=Status.PARSING,
        original_name=(file.name or "upload")[:255],
        duration=0,
        rate=0,
        keyword_set=KeywordSet.objects.filter(is_default=True).first(),
    )
    pipeline.capture_store_outputs(
        capture=capture, raw=file.read(), log=log.read().decode("utf-8", "replace") if log else None
    )
    pipeline.capture_analyze(capture=capture)
    capture.refresh_from_db()
    return capture


def capture_set_tags(*, capture: Capture, tags: list[Tag]) -> None:
    capture.tags.set(tags)


def capture_reanalyze(*, capture: Capture, keyword_set: KeywordSet) -> Capture:
    from . import pipeline

    if not capture.raw_file or capture.raw_pruned_at:
        raise ValidationError("The raw samples of this capture are gone; it cannot be re-analysed.")
    if not capture_transition(capture_id=capture.pk, to=Status.PARSING, keyword_set=keyword_set):
        raise ValidationError(f"A {capture.status} capture cannot be re-analysed.")
    capture.refresh_from_db()
    pipeline.capture_analyze(capture=capture)
    capture.refresh_from_db()
    return capture


def comment_create(
    *, capture: Capture, author: AbstractBaseUser, body: str, frame: str = ""
) -> Comment:
    body = body.strip()
    if not body:
        raise ValidationError({"body": "A comment needs some text."})
    return Comment.objects.create(capture=capture, author=author, body=body, frame=frame[:1000])


def reap_lost_captures(*, timeout_s: int) -> int:
    """Mark running captures whose worker stopped sending heartbeats as failed."""
    cutoff = timezone.now() - timezone.timedelta(seconds=timeout_s)
    lost = Capture.objects.filter(
        status__in=[Status.RUNNING, Status.PARSING], heartbeat_at__lt=cutoff
    )
    count = 0
    for capture_id in lost.values_list("pk", flat=True):
        count += capture_mark_failed(
            capture_id=capture_id,
            cause="worker_lost",
            message=(
                f"Worker lost: no heartbeat for {timeout_s} s (the worker was killed or its "
                "machine went down). Its py-spy stopped when the connection dropped; "
                "capture again."
            ),
        )
    if count:
        log.warning("marked %d capture(s) as worker lost", count)
    return count
