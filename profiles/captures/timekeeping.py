"""Captures keep time: py-spy records `--format speedscope` (each thread's samples in
order), and the worker splits what it wrote into the raw text that is stored and
analysed as before (every aggregate the same) and a time track (profiles.pyspy.formats.split,
profiles.pyspy.formats.time_track) on the host's clock.

The clock comes from the host, over the record's own SSH session (runs.remote.guard):
`sampling_at`, when py-spy said it samples, and `ended_at`, when it stopped, both read
on the host; `clock_offset_s`, this machine's clock less the host's, read when the
session started, puts several hosts on one clock. A file that cannot be split (or a
host that gave no clock) is stored as py-spy wrote it, without time: the split never
costs a capture its samples.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from profiles import pyspy
from profiles.models import Capture
from profiles.pyspy.formats import chrometrace_samples, is_chrometrace, split_speedscope, track_json

log = logging.getLogger(__name__)
_WROTE = re.compile(r"Samples: (\d+) Errors: \d+")

# What the product asks py-spy for, whatever the download format: speedscope keeps the
# order of each thread's samples; the stored raw text is split from it. A record with
# `--idle` (and without `--gil`) asks for chrometrace instead (RECORD_FORMAT_TIMED): it
# stamps each change of stack with py-spy's own clock, so its rounds are placed where
# they were taken, not linearly (profiles.pyspy.formats.chrometrace;
# bench/app/bench_timeline_clock.py).
# With `--subprocesses` too (a whole job's default), measured on py-spy 0.4.3: its
# chrometrace keys a thread by its pthread handle, which a forked DataLoader worker's
# MainThread shares with the rank's, so the two are written turn about in every round
# and the rank's next sample says when a worker was gone (within one round). Read by
# (pid, tid) as before, a killed worker kept its last stack to the end and the workers'
# tokenize share was 7-12 points off the job's own clock; read so, it is within 1 on
# the same three recordings (speedscope's, taken at once, within 2), and every thread's
# samples add up to py-spy's `Samples: N` (tests/profiles/jobs/test_workers_torch.py,
# tests/profiles/captures/test_timeline_clock.py). A child whose handle no other thread
# takes (spawned, not forked) still keeps its last stack to the end.
RECORD_FORMAT = "speedscope"
RECORD_FORMAT_TIMED = "chrometrace"


def record_format(capture: Capture) -> str:
    """The `--format` a capture records with (above)."""
    timed = capture.idle and not capture.gil
    return RECORD_FORMAT_TIMED if timed else RECORD_FORMAT


def spawned_at(facts: dict[str, str]) -> float | None:
    """The host's clock right before py-spy was started (`spawned_at` from a whole-job
    session, `clock` from a single record): where a chrometrace's clock starts."""
    for key in ("spawned_at", "clock"):
        try:
            at = float(facts[key])
        except (KeyError, ValueError):
            continue
        if at > 0:
            return at
    return None


def host_clock(facts: dict[str, str]) -> tuple[float, float] | None:
    """(start, end) of the sampling on the host's clock, from a record's facts."""
    try:
        start, end = float(facts["sampling_at"]), float(facts["ended_at"])
    except (KeyError, ValueError):
        return None
    return (start, end) if 0 < start < end else None


def window_at(facts: dict[str, str]) -> float | None:
    """A whole-job window's start on the host's clock (runs.remote.many), if scheduled:
    what py-spy sampled before it is cut when its output is split."""
    try:
        at = float(facts["window_at"])
    except (KeyError, ValueError):
        return None
    return at if at > 0 else None


def timed_result(capture: Capture, result: Any) -> tuple[Any, str | None]:
    """`result` with its speedscope samples split into raw text, and the time track as
    JSON; `result` itself and None when there is nothing to split or it cannot be.
    py-spy's `--gil` keeps only the GIL holder's samples: like a record without
    `--idle`, its order says nothing of time (the track says why)."""
    raw = result.raw
    if raw and is_chrometrace(raw):
        return _chrometrace_result(capture, result)
    if not raw or not raw.lstrip()[:1] == b"{":
        return result, None
    clock = host_clock(result.facts or {})
    if clock is None:
        return result, None
    try:
        idle = bool(capture.idle and not capture.gil)
        split = split_speedscope(
            raw, start=clock[0], end=clock[1], rate=capture.rate, idle=idle,
            label=f"capture {capture.pk}", window_from=window_at(result.facts or {}),
        )  # fmt: skip
    except pyspy.ProfileError as exc:
        log.warning("capture %s: kept without time (%s)", capture.pk, exc)
        return result, None
    return dataclasses.replace(result, raw=split.raw_text.encode()), track_json(split.track)


def _chrometrace_result(capture: Capture, result: Any) -> tuple[Any, str | None]:
    """A chrometrace record: its samples as raw text, and a track whose rounds are placed
    at py-spy's own times from the moment it was started on the host. Without that
    moment, the raw text alone; a file this cannot read is kept as py-spy wrote it."""
    facts = result.facts or {}
    reported = _WROTE.search(result.log or "")
    label = f"capture {capture.pk}"
    spawned, window = spawned_at(facts), window_at(facts)
    # A scheduled window is stopped by the host at its end: py-spy writes after that.
    # What py-spy sampled before the window is cut here, where each thread's rounds are
    # known (one that ended before the window keeps none).
    stopped = window + capture.duration - spawned if spawned and window else None
    try:
        samples = chrometrace_samples(
            result.raw, rate=capture.rate, label=label, stopped_s=stopped,
            samples_reported=int(reported.group(1)) if reported else None,
            window_s=window - spawned if spawned and window else None,
        )  # fmt: skip
    except pyspy.ProfileError as exc:
        log.warning("%s: chrometrace kept as written (%s)", label, exc)
        return result, None
    first = samples.times[0]
    start = (spawned or 0.0) + first
    end = (spawned or 0.0) + max(samples.end_s, samples.times[-1] + 1 / capture.rate)
    try:
        split = split_speedscope(
            samples.speedscope, start=start or 1.0, end=end if spawned else start + 1.0,
            rate=capture.rate, idle=True, label=label,
            times=[t - first for t in samples.times],
        )  # fmt: skip
    except pyspy.ProfileError as exc:
        log.warning("%s: chrometrace kept as written (%s)", label, exc)
        return result, None
    kept = dataclasses.replace(result, raw=split.raw_text.encode())
    return kept, track_json(split.track) if spawned else None


def note_clock_offset(capture: Capture, facts: dict[str, str]) -> None:
    """Keep this host's clock offset (this machine's clock less the host's) in the
    capture's progress: a whole-job timeline puts each rank on one clock with it."""
    try:
        offset = float(facts["clock_offset_s"])
    except (KeyError, ValueError):
        return
    note_progress(capture, clock_offset_s=round(offset, 6))


def note_progress(capture: Capture, **fields: Any) -> None:
    """Merge `fields` into the capture's stored `progress`."""
    current = Capture.objects.values_list("progress", flat=True).get(pk=capture.pk) or {}
    Capture.objects.filter(pk=capture.pk).update(progress={**current, **fields})
