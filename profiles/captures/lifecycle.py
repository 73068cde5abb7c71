"""The capture state machine's writes: conditional UPDATEs that move one capture.

The lowest layer of the capture path (models only), so the worker side (tasks,
pipeline) and the request side (services) both move captures without importing
each other. `profiles.captures.services` re-exports these names.
"""

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import F, Q
from django.utils import timezone

from profiles.models import Capture
from profiles.signals import capture_ended
from runs import remote

Status = Capture.Status


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
    if to == Status.PARSING:  # a hand-over: its analysis is yet to be claimed
        fields.update(analysis_started_at=None, analysis_attempts=0)
    moved = bool(
        Capture.objects.filter(pk=capture_id, status__in=sources).update(status=to, **fields)
    )
    if moved and to in Capture.FINAL:
        capture_ended.send_robust(sender=Capture, capture_id=capture_id, status=to)
    return moved


def capture_claim(*, capture_id: int, worker: str) -> bool:
    """Claim a queued capture for this worker; False means someone else has it."""
    return bool(_claim(Capture.objects.filter(pk=capture_id), worker, timezone.now()))


def _claim(captures: Any, worker: str, now: Any) -> int:
    """The conditional UPDATE of a claim: only queued, uncancelled rows move."""
    return captures.filter(status=Status.QUEUED, cancel_requested=False).update(
        status=Status.RUNNING, started_at=now, heartbeat_at=now, worker=worker,
        attempts=F("attempts") + 1,
    )  # fmt: skip


def captures_claim(*, capture_ids: list[int], worker: str) -> list[int]:
    """Claim queued captures for this worker in one UPDATE; the ids it got (each row is
    claimed by one UPDATE only, so two workers never both get one)."""
    now = timezone.now()
    _claim(Capture.objects.filter(pk__in=capture_ids), worker, now)
    mine = Capture.objects.filter(pk__in=capture_ids, worker=worker, started_at=now)
    return list(mine.values_list("pk", flat=True))


def capture_claim_analysis(*, capture_id: int, stale_before: Any) -> Any:
    """Claim a parsing capture's analysis; the claim's token (its time), or None when
    another analysis holds it (claimed, with a heartbeat newer than `stale_before`)
    or it is not parsing any more. A second delivery of one capture is thus a no-op."""
    now = timezone.now()
    unclaimed = Q(analysis_started_at__isnull=True) | Q(heartbeat_at__lt=stale_before)
    claimed = Capture.objects.filter(unclaimed, pk=capture_id, status=Status.PARSING).update(
        analysis_started_at=now, heartbeat_at=now, analysis_attempts=F("analysis_attempts") + 1
    )
    return now if claimed else None


def capture_analysis_beat(*, capture_id: int, claim: Any) -> bool:
    """The running analysis's heartbeat; False once its claim is no longer the capture's."""
    return bool(
        Capture.objects.filter(
            pk=capture_id, status=Status.PARSING, analysis_started_at=claim
        ).update(heartbeat_at=timezone.now())
    )


def capture_analysis_finish(*, capture_id: int, claim: Any, to: str, **fields: Any) -> bool:
    """End a claimed analysis in `to` (done, failed, cancelled); only its claim's holder
    may. Done clears the error of an earlier failure (the capture is fine now)."""
    if to == Status.DONE:
        fields.update(error="", error_cause="", error_detail="")
    fields.setdefault("finished_at", timezone.now())
    moved = bool(
        Capture.objects.filter(
            pk=capture_id, status=Status.PARSING, analysis_started_at=claim
        ).update(status=to, **fields)
    )
    if moved:  # every final status goes out as capture_transition sends it
        capture_ended.send_robust(sender=Capture, capture_id=capture_id, status=to)
    return moved


def capture_mark_failed(*, capture_id: int, cause: str, message: str, **fields: Any) -> bool:
    """Fail a capture with a cause and a one-line message; `error_detail` (the
    command's own words) and other fields may ride along."""
    return capture_transition(
        capture_id=capture_id, to=Status.FAILED, error=message, error_cause=cause, **fields
    )


# --- one py-spy per process ---------------------------------------------------------
ACTIVE = (Status.QUEUED, Status.RUNNING)


class CaptureConflict(ValidationError):
    """Another capture holds (or is about to hold) py-spy on the same process."""

    def __init__(self, busy: Capture) -> None:
        self.busy = busy
        super().__init__(
            f"capture #{busy.pk} ({busy.kind}, {busy.status}) is already on {busy.target_label}; "
            "py-spy cannot attach to one process twice: wait for it or cancel it"
        )


def capture_busy_with(*, host: Any, pid: int) -> Capture | None:
    """The queued or running capture of host+pid, if any (py-spy attaches once)."""
    return (
        Capture.objects.filter(host=host, pid=pid, status__in=ACTIVE)
        .select_related("host")
        .order_by("pk")
        .first()
    )


def captures_busy_with(*, pairs: list[tuple[int, int]]) -> Capture | None:
    """The first queued or running capture of any (host id, pid) of `pairs` (one query)."""
    wanted = set(pairs)
    if not wanted:
        return None
    active = Capture.objects.filter(
        status__in=ACTIVE,
        host_id__in={host for host, _ in wanted},
        pid__in={pid for _, pid in wanted},
    )
    for capture in active.select_related("host").order_by("pk"):
        if (capture.host_id, capture.pid) in wanted:
            return capture
    return None


def captures_claimed_before(*, captures: list[Capture]) -> dict[int, Capture]:
    """capture_claimed_before for several captures of one host, in one query: capture
    id -> the running capture of its PID claimed before it."""
    if not captures:
        return {}
    running = Capture.objects.filter(
        host_id=captures[0].host_id, pid__in={c.pid for c in captures}, status=Status.RUNNING
    ).select_related("host")
    found = {}
    for capture in captures:
        for other in running:
            mine = (capture.started_at, capture.pk)
            if (
                other.pid == capture.pid
                and other.pk != capture.pk
                and (other.started_at, other.pk) < mine
            ):
                found[capture.pk] = other
                break
    return found


def capture_claimed_before(*, capture: Capture) -> Capture | None:
    """A running capture of the same host+pid claimed before this one.

    Both claims happen before either check, so of two racing captures exactly one
    sees the other as earlier and steps back."""
    earlier = Capture.objects.filter(
        host_id=capture.host_id, pid=capture.pid, status=Status.RUNNING
    ).exclude(pk=capture.pk)
    for other in earlier.select_related("host"):
        if (other.started_at, other.pk) < (capture.started_at, capture.pk):
            return other
    return None


# --- retries that say so --------------------------------------------------------------
def _attempt_logged(capture_id: int, error: remote.RemoteError) -> list[dict]:
    """The capture's attempt log with this failed attempt appended (only the task that
    holds the capture writes it, so read-then-write is safe)."""
    row = Capture.objects.filter(pk=capture_id).values("attempt_log", "attempts").first()
    if row is None:
        return []
    said = [line for line in error.detail.splitlines() if line.strip()]
    entry = {
        "attempt": row["attempts"],
        "cause": error.cause,
        "label": remote.CAUSE_LABELS.get(error.cause, error.cause),
        # The command's own last line for this try; the friendly message is not repeated.
        "said": said[-1][:300] if said else "",
        "at": timezone.now().isoformat(),
    }
    return [*row["attempt_log"], entry]


def capture_retry_noted(
    *, capture_id: int, error: remote.RemoteError, attempt: int, of: int, countdown: float
) -> bool:
    """Say on a queued capture that a transient failure is being retried."""
    label = remote.CAUSE_LABELS.get(error.cause, error.cause)
    line = f"retrying, attempt {attempt} of {of} in {countdown:.0f} s: {label}"
    due = timezone.now() + timezone.timedelta(seconds=countdown)
    retry = {"attempt": attempt, "of": of, "cause": error.cause, "message": line}
    return bool(
        Capture.objects.filter(pk=capture_id, status=Status.QUEUED).update(
            progress={"retry": {**retry, "due_at": due.isoformat()}},
            error=f"{line} ({error.message})",
            error_cause=error.cause,
            error_detail=error.detail,
            enqueued_at=due,
            attempt_log=_attempt_logged(capture_id, error),
        )
    )


def capture_fail_retried(*, capture_id: int, error: remote.RemoteError, attempts: int) -> bool:
    """The last attempt of a transient failure failed too: fail with its cause."""
    message = (
        f"failed after {attempts} attempts: {error.message}" if attempts > 1 else error.message
    )
    return capture_mark_failed(
        capture_id=capture_id,
        cause=error.cause,
        message=message,
        error_detail=error.detail,
        progress={},
        attempt_log=_attempt_logged(capture_id, error),
    )
