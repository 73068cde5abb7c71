"""The worker side of a whole-job capture, one host at a time.

One task per host runs one session (`runs.remote.record_many`). The group was given
one instant ahead (`CaptureGroup.start_by`, profiles.jobs.schedule): each session
measures its host's clock offset, starts that host's py-spy at once so that their
attach is over before the instant, and the host samples from the instant, on its
own clock, for the capture's duration; no host waits for another. Each host counts
itself in `CaptureGroup.hosts_settled` once its session is up (or has failed). Each
capture records when its first kept sample was taken (`sampling_started_at`, the
instant, or py-spy's start if that came later), from which the group's start skew is
measured, and how long after the request it could sample (`progress.lead_s`), from
which the next group of these hosts is scheduled.

A whole-job record samples each rank's child processes too (`--subprocesses`, the
default: DataLoader workers). A rank's capture keeps its own samples only, so its
states, the straggler rule and the Processes table count the rank and nothing else;
what its workers did is kept beside them, in `progress["workers"]`
(profiles.pyspy.job.loader_workers), which the job report reads. A rank whose record one setting
spoilt (`--native` failed, or py-spy crashed under `--subprocesses`) is recorded again
without it right after the job's window (record_notes.record_again).
"""

import contextlib
import dataclasses
import json
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from profiles import pyspy
from profiles.captures.lifecycle import (
    Status,
    capture_mark_failed,
    captures_claim,
    captures_claimed_before,
)
from profiles.captures.pipeline import (
    HEARTBEAT_EVERY_S,
    again_failed,
    capture_record_finish,
    capture_refusal,
    capture_store_outputs,
    live_progress,
    record_again,
    record_settings_of,
    worker_name,
)
from profiles.captures.timekeeping import timed_result, window_at
from profiles.jobs import dumps as group_dumps
from profiles.models import Capture, CaptureGroup
from profiles.pyspy.formats import load_track, track_json
from profiles.pyspy.job import (
    own_track,
    split_processes,
    worker_summary,
)
from runs import gpu, remote
from runs.services import host_target

log = logging.getLogger(__name__)
GROUP_BEAT_S = 2 * HEARTBEAT_EVERY_S
"""A host session beats (and reads cancels) this often: a worker holds one per host of
a job, each beat a query, all under one interpreter lock."""
STORING_AT_ONCE = 4
STORING = threading.BoundedSemaphore(STORING_AT_ONCE)
"""Host sessions of this worker process whose results are read and stored at once:
every host of a whole-job capture ends at the same instant, and the others' samples
wait in their spool files (runs.remote.record_many), not in memory."""


class _Rank:
    """Live state of one capture in a host session: its log so far and its lag."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.lines: list[str] = []
        self.behind_s = 0.0
        self.sampling_since: float | None = None

    def progress(self, now: float) -> dict[str, Any]:
        # Attached before the instant: 0 s sampled until the window starts.
        since = None if self.sampling_since is None else min(self.sampling_since, now)
        return live_progress(self.capture, since, self.behind_s, now)


class _HostSession:
    """The scheduled instant, heartbeats, progress and cancels of one host's session."""

    def __init__(
        self, group_id: int, captures: list[Capture], start_at: float | None = None
    ) -> None:
        self.group_id = group_id
        self.ranks = {c.pid: _Rank(c) for c in captures}
        self.settled = False
        self.last_beat = 0.0
        self.t0 = time.monotonic()
        self.start_at = start_at  # the window's instant, epoch seconds (None: at once)

    def settle(self) -> None:
        """Count this host as settled (once): connected, or failed before it could."""
        if not self.settled:
            self.settled = True
            CaptureGroup.objects.filter(pk=self.group_id).update(
                hosts_settled=F("hosts_settled") + 1
            )

    def on_ready(self) -> None:
        log.info("group %s: session ready after %.2f s", self.group_id, time.monotonic() - self.t0)
        self.settle()

    def may_start(self) -> bool:
        """No barrier: a session without a scheduled instant (a rank recorded again
        after the window) starts at once."""
        return True

    def on_line(self, pid: int, line: str, elapsed_s: float) -> None:
        rank = self.ranks[pid]
        rank.lines.append(line)
        if rank.sampling_since is None and line.startswith(remote.SAMPLING_LINE):
            # Its window starts at the instant: py-spy starts before it, to attach.
            early_s = max(0.0, (self.start_at or 0.0) - time.time())
            rank.sampling_since = time.monotonic() + early_s
            # Stored with the next beat (a query a rank here, with a thousand ranks,
            # held up the other sessions), and replaced by the host's clock at the end.
            rank.capture.sampling_started_at = timezone.now() + timezone.timedelta(seconds=early_s)
        elif "behind in sampling" in line:
            lag = pyspy.analyze_lag("\n".join(rank.lines))
            rank.behind_s = lag["max_behind_s"] if lag else rank.behind_s

    def pids_to_stop(self) -> Iterable[int]:
        if not self.beat():
            return []
        ids = [rank.capture.pk for rank in self.ranks.values()]
        cancelled = Capture.objects.filter(pk__in=ids, cancel_requested=True)
        return list(cancelled.values_list("pid", flat=True))

    def beat(self) -> bool:
        """Heartbeat and progress of every capture, every GROUP_BEAT_S: one UPDATE per
        distinct progress (the ranks of one window mostly share theirs; a bulk_update's
        CASE of 8 rows cost more interpreter time than all else a session does)."""
        now = time.monotonic()
        if now - self.last_beat < GROUP_BEAT_S:
            return False
        self.last_beat = now
        stamp = timezone.now()
        alike: dict[tuple, list[int]] = {}
        for rank in self.ranks.values():
            capture = rank.capture
            capture.heartbeat_at, capture.progress = stamp, rank.progress(now)
            key = (json.dumps(capture.progress, sort_keys=True), capture.sampling_started_at)
            alike.setdefault(key, []).append(capture.pk)
        for (progress, started), ids in alike.items():
            Capture.objects.filter(pk__in=ids).update(
                heartbeat_at=stamp, progress=json.loads(progress), sampling_started_at=started
            )
        return True


def _claimed(capture_ids: list[int]) -> list[Capture]:
    """Claim the host's captures; one whose PID another capture claimed first (a
    single capture that raced past the request's 409 check) fails as pid_busy
    instead of starting a second py-spy on that process."""
    ids = captures_claim(capture_ids=capture_ids, worker=worker_name())
    claimed = list(Capture.objects.filter(pk__in=ids).select_related("host").order_by("pid"))
    earlier = captures_claimed_before(captures=[c for c in claimed if c.host_id])
    kept = []
    for capture in claimed:
        refusal = capture_refusal(capture, earlier) if capture.host_id else None
        if refusal is None:
            kept.append(capture)
        else:
            capture_mark_failed(capture_id=capture.pk, cause=refusal[0], message=refusal[1])
    return kept


def host_captures_execute(*, group_id: int, host_id: int, capture_ids: list[int]) -> list[int]:
    """Record the captures of one host of a group in one session.

    Returns the ids of the captures whose samples are stored and wait for analysis.
    A failure of the host fails its captures (only them) with the cause; it is not
    retried, since a later try would sample another window than the other hosts.
    """
    captures = _claimed(capture_ids)
    group = CaptureGroup.objects.filter(pk=group_id).first()
    if group is not None and group.kind == "dump" and captures:
        return group_dumps.host_dumps_execute(group, captures)
    start_at = group.start_by.timestamp() if group is not None and group.start_by else None
    session = _HostSession(group_id, captures, start_at)
    try:
        if not captures or group is None:
            return []
        return _record_host(captures, session, group.created_at)
    finally:
        session.settle()


def _record_host(
    captures: list[Capture], session: _HostSession, requested_at: datetime
) -> list[int]:
    host = captures[0].host
    if host is None:
        return _fail_all(captures, session, "host", "The host was deleted.")

    def store(outcome: remote.ManyResult) -> list[int]:
        return _store_host(host, captures, session, outcome, requested_at)

    try:
        remote.check_target(host_target(host))  # host_config: the field to fix, at once
        return remote.record_many(
            host_target(host),
            [c.pid for c in captures],
            record_settings_of(captures[0]),
            session,
            margin_s=settings.FLAMEDECK_CAPTURE_MARGIN_S,
            start_at=session.start_at,
            gate=STORING,
            finish=store,
        )
    except remote.RemoteError as exc:
        return _fail_all(captures, session, exc.cause, exc.message, detail=exc.detail)
    except ValueError as exc:  # a stored host field the command builder refuses
        return _fail_all(captures, session, "host", f"The host's settings are unusable: {exc}")


def _store_host(
    host: Any,
    captures: list[Capture],
    session: _HostSession,
    outcome: remote.ManyResult,
    requested_at: datetime,
) -> list[int]:
    """Store what one host's session brought back; the ids of the ranks to analyse."""
    log.info("group %s: recorded after %.2f s", session.group_id, time.monotonic() - session.t0)
    gpu_report = gpu.parse_report(outcome.gpu_csv) if outcome.gpu_csv else None
    again = _records_to_take_again(captures, outcome)
    if again:
        _record_again(host, [c for c in captures if c.pid in again], outcome, again)
    _sampling_starts_from_the_host(session, outcome, requested_at)
    parsing = []
    for capture in captures:
        result, said = outcome.results[capture.pid], outcome.logs.get(capture.pid, "")
        span = outcome.spans.get(capture.pid) or {}
        why = again[capture.pid][1] if capture.pid in again else None
        # Each rank keeps its own GPUs' series (runs.gpu.rank_devices), not the host's.
        gpu_samples = gpu.rank_devices(gpu_report, capture.pid) if gpu_report else None
        if _finish(capture, result, said, gpu_samples, span, why) == Status.PARSING:
            parsing.append(capture.pk)
    return parsing


def _sampling_starts_from_the_host(
    session: _HostSession, outcome: Any, requested_at: datetime
) -> None:
    """Each rank's `sampling_started_at`: when its first kept sample was taken on the
    host's clock, the scheduled instant or py-spy's sampling line if that came later
    (the worker's reading, set live, also holds ssh's delay and the worker's
    scheduling); across hosts this trusts their clocks to agree, as NTP keeps them.
    And `progress.lead_s`: how long after the request the rank could sample, on this
    machine's clock (profiles.jobs.schedule learns the next instant from it). A host
    whose clock gave nothing keeps the worker's reading. One UPDATE a rank: only this
    session has written its progress since the claim (the beat keeps it in memory)."""
    for rank in session.ranks.values():
        capture = rank.capture
        result = outcome.results[capture.pid]
        facts = result.facts if isinstance(result, remote.RecordResult) else {}
        fields: dict[str, Any] = {"sampling_started_at": capture.sampling_started_at}
        if (at := remote.guard.sampling_at(facts)) is not None:
            window = window_at(facts) or at
            fields["sampling_started_at"] = datetime.fromtimestamp(max(at, window), tz=UTC)
            with contextlib.suppress(KeyError, ValueError):
                ready = at + float(facts["clock_offset_s"]) - requested_at.timestamp()
                fields["progress"] = {**(capture.progress or {}), "lead_s": round(ready, 3)}
        if fields["sampling_started_at"] is not None:
            Capture.objects.filter(pk=capture.pk).update(**fields)


def _records_to_take_again(
    captures: list[Capture], outcome: Any
) -> dict[int, tuple[dict[str, bool], dict[str, Any]]]:
    """PID -> (the setting to change, why) of each rank whose record one setting spoilt
    (record_notes.record_again): `--native` failed on the rank's own samples, or py-spy
    crashed sampling its children."""
    found = {}
    for capture in captures:
        result = outcome.results[capture.pid]
        span = outcome.spans.get(capture.pid) or {}
        if isinstance(result, remote.RecordResult):
            result = rank_errors_only(result, capture.pid)
        if (again := record_again(capture, result, span)) is not None:
            found[capture.pid] = again
    return found


_FAILED_SAMPLE = re.compile(r"Failed to get stack trace from (\d+):")
_WROTE = re.compile(r"Samples: (\d+) Errors: (\d+)")


def rank_errors_only(result: Any, pid: int) -> Any:
    """`result` whose py-spy log counts only the rank's own failed samples, to judge
    whether `--native` failed on the rank: with `--subprocesses` py-spy's count holds
    its workers' too (each named with its PID on stderr, runs.remote.many), and a
    worker's failures must not send the rank to a Python-only record. `result` itself
    when stderr names no failed sample."""
    failed = Counter(int(p) for p in _FAILED_SAMPLE.findall(result.stderr or ""))
    if not failed or not _WROTE.search(result.log or ""):
        return result
    log = _WROTE.sub(lambda m: f"Samples: {m.group(1)} Errors: {failed[pid]}", result.log)
    return dataclasses.replace(result, log=log)


def _record_again(
    host: Any,
    captures: list[Capture],
    outcome: Any,
    again: dict[int, tuple[dict[str, bool], dict[str, Any]]],
) -> None:
    """Record the ranks of `again` again with their setting changed, in one more session
    per change right after the job's window; a result that came replaces the first one,
    a failure is kept in the rank's why (`retry_error`)."""
    by_change: dict[tuple, list[Capture]] = {}
    for capture in captures:
        by_change.setdefault(tuple(again[capture.pid][0].items()), []).append(capture)
    for change, ranks in by_change.items():
        session = _HostSession(ranks[0].group_id, ranks)  # at once: the window is over
        try:
            taken = remote.record_many(
                host_target(host),
                [c.pid for c in ranks],
                record_settings_of(ranks[0], **dict(change)),
                session,
                margin_s=settings.FLAMEDECK_CAPTURE_MARGIN_S,
                start_within_s=0.0,
            )
        except remote.RemoteError as exc:
            taken = remote.ManyResult(results={c.pid: exc for c in ranks})
        for pid, result in taken.results.items():
            if isinstance(result, remote.RemoteError):
                again[pid][1]["retry_error"] = result.message
                continue
            outcome.results[pid], outcome.logs[pid] = result, taken.logs.get(pid, "")
            outcome.spans[pid] = taken.spans.get(pid, {})


def _finish(
    capture: Capture,
    result: Any,
    said: str,
    gpu_samples: Any,
    span: dict[str, float],
    again: dict[str, Any] | None = None,
) -> str:
    if isinstance(result, remote.RemoteError):
        result = again_failed(result, again) if again and "retry_error" in again else result
        text = "\n".join(part for part in (said, result.detail) if part)
        capture_store_outputs(capture=capture, raw=None, log=text or None)
        capture_mark_failed(
            capture_id=capture.pk,
            cause=result.cause,
            message=result.message,
            error_detail=result.detail,
        )
        return Status.FAILED
    if gpu_samples:
        Capture.objects.filter(pk=capture.pk).update(gpu_samples=gpu_samples)
    result, track = rank_samples_apart(capture, result)
    # This rank's own sampling span: the session's time would say a rank whose
    # process exited early covered (nearly) the whole window.
    return capture_record_finish(
        capture=capture, result=result, span=span, again=again, track=track
    )


def rank_samples_apart(capture: Capture, result: Any) -> tuple[Any, str | None]:
    """`result` with only the rank's own samples in its raw text, and their time track
    (JSON, or None without one); its children's samples (a `--subprocesses` record:
    DataLoader workers) summarised in `progress["workers"]`, with how many the host saw
    at once. py-spy's speedscope is split into raw text and track first (timekeeping);
    one that could not be (no host clock) is read as collapsed stacks, without time.
    As for the time split, keeping the workers apart never costs the rank its samples:
    a file this cannot read is kept as it is."""
    result, track = timed_result(capture, result)
    raw = result.raw or b""
    speedscope = raw.lstrip()[:1] == b"{"
    if not (_PROCESS_IN_JSON if speedscope else _PROCESS_IN_RAW).search(raw):
        return result, track
    try:
        text = _collapsed(raw) if speedscope else raw.decode("utf-8", "surrogateescape")
        split = split_processes(text.splitlines(), capture.pid)
        library = capture.run.library_entries if capture.run_id else ()
        alive = remote.guard.children(result.facts)
        found = worker_summary(split.children, rounds=split.rounds, alive=alive, library=library)
        if track is not None:
            track = track_json(own_track(load_track(track), split.kept, capture.pid))
    except (pyspy.ProfileError, ValueError) as exc:
        log.warning("capture %s: workers not kept apart (%s)", capture.pk, exc)
        return result, track
    if found is not None:
        current = Capture.objects.values_list("progress", flat=True).get(pk=capture.pk) or {}
        Capture.objects.filter(pk=capture.pk).update(progress={**current, "workers": found})
    own = "".join(f"{line}\n" for line in split.own).encode("utf-8", "surrogateescape")
    return dataclasses.replace(result, raw=own), track


_PROCESS_IN_RAW = re.compile(rb"(?:\A|\n)process \d+:")
_PROCESS_IN_JSON = re.compile(rb'"process \d+:\\"')  # a frame name, its quote escaped


def _collapsed(speedscope: bytes) -> str:
    profile = pyspy.parse_profile_text(speedscope.decode("utf-8", "replace"))
    return "\n".join(pyspy.to_folded(profile))


def _fail_all(
    captures: list[Capture], session: _HostSession, cause: str, message: str, detail: str = ""
) -> list:
    for capture in captures:
        lines = session.ranks[capture.pid].lines
        if lines:  # what py-spy said before the host failed is evidence too
            capture_store_outputs(capture=capture, raw=None, log="\n".join(lines))
        capture_mark_failed(
            capture_id=capture.pk, cause=cause, message=message, error_detail=detail or ""
        )
    return []
