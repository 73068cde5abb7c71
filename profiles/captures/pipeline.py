"""The worker side of a capture: run py-spy through the remote seam, keep its raw
output and log, then analyse them with the engine.

Raw output and log are stored before parsing, so a parse failure loses nothing; the
analysis itself is in profiles.captures.analysis.
"""

import logging
import socket
import time
from typing import Any

from django.conf import settings
from django.utils import timezone

from profiles import pyspy

# Re-exported: the worker side and tests analyse as `pipeline.capture_analyze*`.
from profiles.captures.analysis import StateRulesError as StateRulesError
from profiles.captures.analysis import capture_analyze as capture_analyze
from profiles.captures.analysis import capture_analyze_stored as capture_analyze_stored
from profiles.captures.analysis import keywords_for as keywords_for
from profiles.captures.analysis import state_rules_configured as state_rules_configured
from profiles.captures.lifecycle import (
    Status,
    capture_claim,
    capture_claimed_before,
    capture_mark_failed,
    capture_transition,
)
from profiles.captures.record_notes import again_failed, record_again, record_note
from profiles.captures.timekeeping import note_clock_offset, record_format, timed_result
from profiles.models import Capture
from profiles.storage.files import capture_store_outputs
from runs import gpu, remote
from runs.permissions import OwnProcessRefused, own_process_of, refuse_own_process
from runs.services import host_target

log = logging.getLogger(__name__)
HEARTBEAT_EVERY_S = 1.0


def worker_name() -> str:
    return socket.gethostname()


def live_progress(
    capture: Capture, sampling_since: float | None, behind_s: float, now: float
) -> dict[str, Any]:
    """A running capture's `progress`: seconds sampled so far, counted from py-spy's
    sampling line (`sampling_since`, monotonic), not from the worker's start: the SSH
    connection and py-spy's attach come first and can take seconds on a busy host.
    `sampling` is False until that line, so a page says "starting py-spy" meanwhile."""
    elapsed = now - sampling_since if sampling_since is not None else 0.0
    duration, rate = capture.duration, capture.rate
    return {
        "sampling": sampling_since is not None,
        "elapsed_s": round(elapsed, 1),
        "duration_s": duration,
        "behind_s": behind_s,
        # py-spy reports its count only at the end; a sampler that is `behind_s`
        # late has taken about that much time's worth of samples fewer.
        "expected_samples": int(max(0.0, min(elapsed, duration) - behind_s) * rate),
    }


class _Progress:
    """Heartbeat, live progress and cancel polling for one running capture."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.last_beat = 0.0
        self.behind_s = 0.0
        self.cancelled = False
        self.lines: list[str] = []
        self.sampling_started_at: Any = None
        self.sampling_since: float | None = None  # monotonic, at py-spy's sampling line
        self.span: dict[str, float] = {}  # when py-spy started and stopped sampling

    def on_line(self, line: str, elapsed_s: float | None = None) -> None:
        self.lines.append(line)
        if self.sampling_started_at is None and line.startswith(remote.SAMPLING_LINE):
            self.sampling_started_at = timezone.now()
            self.sampling_since = time.monotonic()
            self.beat(force=True)  # the page says "sampling" from now, not a beat later
        for key, text in (("start", "Sampling process"), ("stop", "Stopped sampling")):
            if text in line and elapsed_s is not None:
                self.span.setdefault(key, elapsed_s)
        if "behind in sampling" in line:
            lag = pyspy.analyze_lag("\n".join(self.lines))
            self.behind_s = lag["max_behind_s"] if lag else self.behind_s
            self.beat(force=True)

    def should_cancel(self) -> bool:
        return self.beat()

    def beat(self, force: bool = False) -> bool:
        now = time.monotonic()
        if not force and now - self.last_beat < HEARTBEAT_EVERY_S:
            return self.cancelled
        self.last_beat = now
        progress = live_progress(self.capture, self.sampling_since, self.behind_s, now)
        Capture.objects.filter(pk=self.capture.pk).update(
            heartbeat_at=timezone.now(), progress=progress
        )
        self.cancelled = Capture.objects.filter(pk=self.capture.pk, cancel_requested=True).exists()
        return self.cancelled


def capture_execute(*, capture_id: int, analyze: bool = True) -> str:
    """Claim, run and analyse one capture. Returns the final status (or "skipped").

    `analyze=False` stops once the samples are stored (status parsing): the task then
    hands the parsing to the analysis queue (`capture_analyze_stored`).
    """
    if not capture_claim(capture_id=capture_id, worker=worker_name()):
        log.info("capture %s already claimed or cancelled; skipping", capture_id)
        return "skipped"
    capture = Capture.objects.select_related("host").get(pk=capture_id)
    refusal = capture_refusal(capture)
    if refusal is not None:
        capture_mark_failed(capture_id=capture_id, cause=refusal[0], message=refusal[1])
        return Status.FAILED
    try:
        remote.check_target(host_target(capture.host))
        if capture.kind == Capture.Kind.DUMP:
            status = _execute_dump(capture)
        else:
            status = _execute_record(capture)
    except remote.RemoteError as exc:
        if exc.transient:
            # Back to queued so the retried task can claim it again.
            capture_transition(
                capture_id=capture_id, to=Status.QUEUED, error=exc.message, error_detail=exc.detail
            )
            raise
        capture_mark_failed(
            capture_id=capture_id, cause=exc.cause, message=exc.message, error_detail=exc.detail
        )
        return Status.FAILED
    if status == Status.PARSING and analyze:
        return capture_analyze_stored(capture_id=capture_id)
    return status


def capture_refusal(
    capture: Capture, earlier: dict[int, Capture] | None = None
) -> tuple[str, str] | None:
    """Why a claimed capture must not start py-spy: (cause, message), or None.
    `earlier`: the running captures claimed before each capture of its host, found at
    once (captures_claimed_before); else asked for this one."""
    if capture.host is None:
        return "host", "The host was deleted."
    own = _own_process_refusal(capture)
    if own is not None:
        return "own_process", own
    if earlier is None:
        other = capture_claimed_before(capture=capture)
    else:
        other = earlier.get(capture.pk)
    if other is not None:
        return "pid_busy", (
            f"capture #{other.pk} ({other.kind}) was already running py-spy on "
            f"{other.target_label}; py-spy cannot attach to one process twice: capture "
            "again when it is done"
        )
    return None


def _own_process_refusal(capture: Capture) -> str | None:
    """Checked again where py-spy runs (the worker's machine is the local host, and the
    pid may have been reused since the request): flamedeck's own processes are for
    host admins (runs.permissions)."""
    what = own_process_of(host=capture.host, pid=capture.pid) if capture.pid else None
    if what is None:
        return None
    try:
        refuse_own_process(
            user=capture.requested_by,
            host=capture.host,
            pid=capture.pid,
            what=what,
            scheduled=capture.scheduled,
        )
    except OwnProcessRefused as exc:
        return str(exc)
    return None


def record_settings_of(capture: Capture, **changes: bool) -> "remote.RecordSettings":
    """py-spy's settings for `capture`: its own, in the format that keeps time, with
    `changes` (a record taken again: `native=False`, `subprocesses=False`)."""
    return remote.RecordSettings.of(
        capture.pyspy_settings, format=record_format(capture), **changes
    )


def _execute_record(capture: Capture) -> str:
    try:
        result, progress = _record_once(capture, record_settings_of(capture))
    except remote.RemoteError as exc:
        result, progress = exc, _Progress(capture)
    change, why = record_again(capture, result, progress.span) or ({}, None)
    if why is not None:
        # One setting spoilt the record (`--native` failed on most rounds, or py-spy
        # crashed sampling the children): record the same span again without it rather
        # than keep an empty or gutted capture, or none.
        try:
            result, progress = _record_once(capture, record_settings_of(capture, **change))
        except remote.RemoteError as exc:
            why["retry_error"] = exc.message
    if isinstance(result, remote.RemoteError):
        raise again_failed(result, why) if why else result
    if progress.sampling_started_at is not None:
        Capture.objects.filter(pk=capture.pk).update(
            sampling_started_at=progress.sampling_started_at
        )
    return capture_record_finish(capture=capture, result=result, span=progress.span, again=why)


def _record_once(
    capture: Capture, record_settings: "remote.RecordSettings"
) -> tuple["remote.RecordResult", "_Progress"]:
    progress = _Progress(capture)
    try:
        result = remote.record(
            host_target(capture.host),
            capture.pid,
            record_settings,
            margin_s=settings.FLAMEDECK_CAPTURE_MARGIN_S,
            on_progress=progress.on_line,
            should_cancel=progress.should_cancel,
        )
    except remote.RemoteError:
        # What py-spy said before the failure (a lost connection, say) is evidence too.
        if progress.lines:
            capture_store_outputs(capture=capture, raw=None, log="\n".join(progress.lines))
        raise
    return result, progress


def capture_record_finish(
    *,
    capture: Capture,
    result: "remote.RecordResult",
    span: dict[str, float] | None = None,
    again: dict[str, Any] | None = None,
    track: str | None = None,
) -> str:
    """Store a finished record's samples, log, time track and GPU series, then move it
    to parsing (or failed with the cause when py-spy wrote nothing). Returns the new
    status. `again`: the record was taken again with one setting changed, and why
    (record_notes.record_again: `--native` failed, py-spy crashed with
    `--subprocesses`). `track`: the time track of samples already split (a whole-job rank's);
    else speedscope samples are split here (profiles.captures.timekeeping)."""
    if track is None:
        result, track = timed_result(capture, result)
    capture_store_outputs(capture=capture, raw=result.raw, log=result.log, track=track)
    note_clock_offset(capture, result.facts or {})
    if result.gpu_csv:
        capture.gpu_samples = gpu.rank_devices(gpu.parse_report(result.gpu_csv), capture.pid)
        capture.save(update_fields=["gpu_samples"])
    if result.stopped_by == "cancel" and not (result.raw or b"").strip():
        capture_transition(
            capture_id=capture.pk,
            to=Status.CANCELLED,
            error="Cancelled before py-spy had written any samples.",
        )
        return Status.CANCELLED
    if result.raw is None:
        failure = remote.classify(result.exit_code, result.stderr, result.log)
        cause = failure.cause if failure else "no_output"
        message = failure.message if failure else _no_output_message(result)
        detail = failure.detail if failure else (result.stderr or "")[-2000:]
        capture_mark_failed(
            capture_id=capture.pk, cause=cause, message=message, error_detail=detail
        )
        return Status.FAILED
    # The analysis ends a record stopped by a cancel as cancelled (samples kept).
    cancelled = {"cancel_requested": True} if result.stopped_by == "cancel" else {}
    moved = capture_transition(
        capture_id=capture.pk,
        to=Status.PARSING,
        note=record_note(result, capture, span or {}, again),
        **cancelled,
    )
    if not moved:
        return Capture.objects.get(pk=capture.pk).status
    return Status.PARSING


def _no_output_message(result: Any) -> str:
    tail = (result.stderr or result.log or "").strip().splitlines()[-1:] or ["no output"]
    return f"py-spy exited with code {result.exit_code} and wrote no samples: {tail[0]}"


def _execute_dump(capture: Capture) -> str:
    result = remote.dump(
        host_target(capture.host), capture.pid, native=capture.native, locals=capture.dump_locals
    )
    if not result.text.strip():
        failure = remote.classify(1, result.stderr, "")
        capture_store_outputs(capture=capture, raw=None, log=result.stderr)
        cause = failure.cause if failure else "no_output"
        message = failure.message if failure else f"py-spy dump printed nothing: {result.stderr}"
        capture_mark_failed(
            capture_id=capture.pk, cause=cause, message=message, error_detail=result.stderr
        )
        return Status.FAILED
    capture_store_outputs(capture=capture, raw=result.text.encode(), log=result.stderr)
    if not capture_transition(capture_id=capture.pk, to=Status.PARSING):
        return Capture.objects.get(pk=capture.pk).status
    return Status.PARSING
