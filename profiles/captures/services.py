"""Writes for captures: create, cancel, import, re-analyse, comment, reap.

The capture path reads one way: views/API -> services (this module, and `jobs` for
whole-job captures) -> `enqueue` (tasks sent on commit) -> `tasks` -> `pipeline` ->
`runs.remote`. The state machine's writes live in `states` (re-exported here).
"""

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.utils import timezone

from config.params import PID_MAX
from profiles.captures import pipeline
from profiles.captures.enqueue import (
    analysis_backlog,
    analysis_enqueue_on_commit,
    capture_enqueue_on_commit,
)
from profiles.captures.lifecycle import (  # noqa: F401 — re-exported: the state machine's public names
    CaptureConflict,
    IllegalTransition,
    Status,
    capture_busy_with,
    capture_claim,
    capture_mark_failed,
    capture_transition,
    captures_busy_with,
)
from profiles.models import Capture, CaptureGroup, Comment, KeywordSet
from profiles.storage.files import capture_delete_files, capture_store_upload
from profiles.storage.uploads import PreparedUpload, UploadTooLarge, upload_prepare
from runs import capture_fields, remote
from runs.capture_settings import own_process_settings
from runs.models import Host, Run, RunProcess, Tag
from runs.permissions import can_remove_any_comment, own_process_of, refuse_own_process
from runs.services import LOCAL_OFF, host_target

log = logging.getLogger(__name__)


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
    `capture` management command). `py_spy_settings` not given take their defaults;
    on one of flamedeck's own processes (runs.own_processes) only a host admin may
    capture, and a record is non-blocking unless asked otherwise (OwnProcessRefused,
    a PermissionDenied naming the reason, for anyone else).
    """
    capture = capture_prepare(
        user=user, host=host, pid=pid, kind=kind, run=run, process=process, group=group,
        scheduled=scheduled, keyword_set=KeywordSet.objects.filter(is_default=True).first(),
        **py_spy_settings,
    )  # fmt: skip
    busy = capture_busy_with(host=host, pid=pid)
    if busy is not None:
        raise CaptureConflict(busy)
    capture.save()
    if _host_refused(host, [capture]):
        capture.refresh_from_db()
        return capture
    if enqueue:
        capture_enqueue_on_commit(capture=capture)
    return capture


def captures_create_for_group(
    *,
    user: AbstractBaseUser | None,
    processes: list[RunProcess],
    group: CaptureGroup,
    kind: str = Capture.Kind.RECORD,
    scheduled: bool = False,
    **py_spy_settings: Any,
) -> list[Capture]:
    """One queued capture per process of a whole-job capture, as capture_create makes
    them (the same checks and refusals), in a handful of queries whatever the number of
    processes: 1,024 ranks took 3,077 queries and 8-15 s one by one. The caller
    enqueues the group."""
    keyword_set = KeywordSet.objects.filter(is_default=True).first()
    captures = [
        capture_prepare(
            user=user,
            host=p.host,
            pid=p.pid,
            kind=kind,
            run=group.run,
            process=p,
            group=group,
            scheduled=scheduled,
            keyword_set=keyword_set,
            **py_spy_settings,
        )  # fmt: skip
        for p in processes
    ]
    busy = captures_busy_with(pairs=[(c.host_id, c.pid) for c in captures])
    if busy is not None:
        raise CaptureConflict(busy)
    Capture.objects.bulk_create(captures)
    by_host: dict[int, list[Capture]] = {}
    for capture in captures:
        by_host.setdefault(capture.host_id, []).append(capture)
    for ranks in by_host.values():
        _host_refused(ranks[0].host, ranks)
    return captures


def capture_prepare(
    *,
    user: AbstractBaseUser | None,
    host: Host,
    pid: int,
    kind: str,
    run: Run | None,
    process: RunProcess | None,
    group: CaptureGroup | None,
    scheduled: bool,
    keyword_set: KeywordSet | None,
    **py_spy_settings: Any,
) -> Capture:
    """A checked, unsaved capture (capture_create's refusals, without queries)."""
    from django.conf import settings

    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= PID_MAX:
        raise ValidationError({"pid": f"pid must be a whole number in 1..{PID_MAX}"})
    if host.is_local and not settings.FLAMEDECK_LOCAL_HOST:
        raise ValidationError({"host": LOCAL_OFF})
    if kind not in (Capture.Kind.RECORD, Capture.Kind.DUMP):
        raise ValidationError({"kind": "kind must be record or dump"})
    own = own_process_of(host=host, pid=pid)
    if own is not None:
        refuse_own_process(user=user, host=host, pid=pid, what=own, scheduled=scheduled)
        if kind == Capture.Kind.RECORD:
            py_spy_settings = own_process_settings(py_spy_settings)
    py_spy_settings = capture_fields.clean(py_spy_settings, kind=kind)
    return Capture(
        host=host,
        pid=pid,
        kind=kind,
        run=run or (process.run if process else None),
        process=process,
        group=group,
        scheduled=scheduled,
        requested_by=user,
        keyword_set=keyword_set,
        **py_spy_settings,
    )


def _host_refused(host: Host, captures: list[Capture]) -> bool:
    """Fail `captures` now, with the field to fix, when the command builder refuses
    their host (instead of crashing a task later)."""
    try:
        remote.check_target(host_target(host))
    except remote.RemoteError as exc:
        for capture in captures:
            capture_mark_failed(capture_id=capture.pk, cause=exc.cause, message=exc.message)
        return True
    return False


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
    enqueue: bool = False,
) -> Capture:
    """Store an uploaded raw/speedscope file (plain or gzip) and py-spy's log, then
    analyse it: on the analysis worker with `enqueue=True` (the web page and the API),
    else here (the CLI, tests). Uploads stream from disk into storage, never whole into
    memory, and are kept even when parsing fails, so nothing uploaded is lost. One
    that inflates past FLAMEDECK_MAX_UPLOAD_MB raises UploadTooLarge before any row
    or file is written.
    """
    samples = _prepared(file, "the samples")
    try:
        prepared_log = _prepared(log, "the log") if log is not None else None
    except UploadTooLarge:
        samples.file.close()
        raise
    capture = Capture.objects.create(
        kind=Capture.Kind.IMPORT,
        run=run,
        requested_by=user,
        status=Status.PARSING,
        heartbeat_at=timezone.now(),
        original_name=(file.name or "upload")[:255],
        duration=0,
        rate=0,
        keyword_set=KeywordSet.objects.filter(is_default=True).first(),
    )
    capture_store_upload(capture=capture, samples=samples, log=prepared_log)
    return _analyze(capture=capture, enqueue=enqueue)


def _prepared(upload: UploadedFile, label: str) -> PreparedUpload:
    from django.conf import settings

    upload.seek(0)
    name = f"{label} ({(upload.name or 'upload')[:100]})"
    limit = settings.FLAMEDECK_MAX_UPLOAD_MB * 1024 * 1024
    return upload_prepare(upload, limit_bytes=limit, label=name)


def _analyze(*, capture: Capture, enqueue: bool) -> Capture:
    if enqueue:
        analysis_enqueue_on_commit(capture_id=capture.pk)
        return capture
    pipeline.capture_analyze(capture=capture)
    capture.refresh_from_db()
    return capture


def capture_set_tags(*, capture: Capture, tags: list[Tag]) -> None:
    capture.tags.set(tags)


def capture_reanalyze(
    *, capture: Capture, keyword_set: KeywordSet, enqueue: bool = False
) -> Capture:
    """Parse the kept raw samples again with another keyword set (queued with
    `enqueue=True`, as the page does)."""
    if not capture.raw_file or capture.raw_pruned_at:
        raise ValidationError("The raw samples of this capture are gone; it cannot be re-analysed.")
    # The heartbeat dates the hand-over: a parsing capture whose analysis message got
    # lost is sent to the analysis queue again by the reaper (never failed as lost).
    if not capture_transition(
        capture_id=capture.pk, to=Status.PARSING, keyword_set=keyword_set,
        heartbeat_at=timezone.now(),
    ):  # fmt: skip
        raise ValidationError(f"A {capture.status} capture cannot be re-analysed.")
    capture.refresh_from_db()
    return _analyze(capture=capture, enqueue=enqueue)


def comment_create(
    *, capture: Capture, author: AbstractBaseUser, body: str, frame: str = ""
) -> Comment:
    body = body.strip()
    if not body:
        raise ValidationError({"body": "A comment needs some text."})
    return Comment.objects.create(capture=capture, author=author, body=body, frame=frame[:1000])


def reap_lost_captures(*, timeout_s: int) -> int:
    """Mark running captures whose worker stopped sending heartbeats as failed.

    A parsing capture with an old heartbeat has its samples stored and may only be
    waiting in the analysis queue (or its analysis worker died): it is sent to the
    analysis queue again, not failed. Returns how many captures were marked lost.
    """
    cutoff = timezone.now() - timezone.timedelta(seconds=timeout_s)
    capture_analysis_resend(cutoff=cutoff)
    lost = Capture.objects.filter(status=Status.RUNNING, heartbeat_at__lt=cutoff)
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


def capture_delete_failed(*, capture: Capture) -> None:
    """Delete a failed capture with its stored files (nothing else may be deleted here:
    a done capture is evidence the team annotates)."""
    if capture.status != Status.FAILED:
        raise ValidationError("Only a failed capture can be deleted.")
    capture_delete_files(capture=capture)
    capture.delete()


def comment_update(*, comment: Comment, editor: AbstractBaseUser, body: str) -> Comment:
    """Change one's own comment's text (nobody edits another's words)."""
    if comment.author_id != editor.pk:
        raise PermissionDenied("You can edit only your own comments.")
    body = body.strip()
    if not body:
        raise ValidationError({"body": "A comment needs some text."})
    comment.body = body
    comment.save(update_fields=["body"])
    return comment


def comment_delete(*, comment: Comment, user: AbstractBaseUser) -> None:
    """Its author, a host admin or staff removes a comment."""
    if comment.author_id != user.pk and not can_remove_any_comment(user):
        raise PermissionDenied(
            "You can delete only your own comments (host admins and staff remove any)."
        )
    comment.delete()


MAX_ANALYSIS_ATTEMPTS = 3


def capture_analysis_resend(*, cutoff: Any) -> int:
    """Send stale parsing captures to the analysis queue again (each once per timeout).

    Analyses heartbeat while they run, so a stale one was claimed by a worker that died
    (killed, e.g. by the kernel for memory) or was never claimed (its message lost, or
    waiting behind a backlog: then nothing is sent while the queue holds messages).
    One whose analysis was started MAX_ANALYSIS_ATTEMPTS times fails instead, so a
    file that kills workers occupies them a few times, not forever. A capture that
    failed on an analysis limit is failed already and never comes back here.
    """
    stale = Capture.objects.filter(status=Status.PARSING, heartbeat_at__lt=cutoff)
    rows = list(stale.values_list("pk", "analysis_started_at", "analysis_attempts"))
    backlog = any(claim is None for _, claim, _ in rows) and analysis_backlog()
    resent = 0
    for capture_id, claim, attempts in rows:
        if claim is not None and attempts >= MAX_ANALYSIS_ATTEMPTS:
            _analysis_lost(capture_id, attempts, cutoff)
        elif claim is not None or not backlog:
            resent += _analysis_resend_one(capture_id, cutoff)
    if resent:
        log.warning("sent %d parsing capture(s) to the analysis queue again", resent)
    return resent


def _analysis_resend_one(capture_id: int, cutoff: Any) -> int:
    # The heartbeat bump claims the re-send, so two reapers never both send it; the
    # cleared claim lets the new message's analysis take the capture.
    claimed = Capture.objects.filter(
        pk=capture_id, status=Status.PARSING, heartbeat_at__lt=cutoff
    ).update(heartbeat_at=timezone.now(), analysis_started_at=None)
    if claimed:
        analysis_enqueue_on_commit(capture_id=capture_id)
    return claimed


def _analysis_lost(capture_id: int, attempts: int, cutoff: Any) -> None:
    message = (
        f"Analysis lost: it was started {attempts} times and its worker stopped each time "
        "without a word (killed, e.g. by the kernel for memory, or its machine went down). "
        "The raw file and log are kept; re-analyse it once the workers are healthy."
    )
    failed = Capture.objects.filter(pk=capture_id, status=Status.PARSING, heartbeat_at__lt=cutoff)
    if failed.update(
        status=Status.FAILED, error=message, error_cause="analysis_lost", finished_at=timezone.now()
    ):
        log.warning("capture %s: %s", capture_id, message)
