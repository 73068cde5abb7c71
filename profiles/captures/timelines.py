"""Reads of a capture's time: its timeline and a window of it
(`GET /api/captures/<id>/timeline/`, `…/flamegraph/?from=&to=`, `…/window/`); a
whole-job capture's ranks on one clock (profiles.jobs.timeline) read each rank here.

They read what the analysis stored: the time track, which holds each record's state
(profiles.pyspy.timed.timed_capture.with_states), so nothing is classified again here and a timeline
reads no raw text; a window reads the raw text too, for its frames.
A window's findings and top frames are an analysis of their own: they run in the
budget's child process, bounded like every analysis (`window_analysis`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from profiles import pyspy
from profiles.captures import budget
from profiles.models import Capture
from profiles.pyspy.formats import TimeUnavailable, load_track, read_text
from profiles.pyspy.timed import (
    TimedCapture,
    device_window,
    timeline,
    timeline_device,
    window_flamegraph,
    window_states,
    window_text,
)
from profiles.storage.files import local_copy

# A window is at least this long: shorter ones hold a handful of samples per thread.
MIN_WINDOW_S = 0.05


class NoTime(Exception):
    """The capture has no time to show (the message says why)."""


def timed_capture(capture: Capture, *, text: bool = True) -> TimedCapture:
    """The capture's time track and, with `text`, its raw text, read once; NoTime with
    the reason. A timeline needs only the track, whose stored states say each sample's
    state: without `text` the raw text is read only for a track stored before states
    were kept in it."""
    if not capture.time_file:
        time_info = (capture.stats or {}).get("time") or {}
        raise NoTime(time_info.get("reason") or "this capture keeps no time")
    try:
        with capture.time_file.open("rb") as fh:
            track = load_track(fh.read(), "the time track")
        if not text and track.record_states is not None:
            return TimedCapture(None, track)
        if not capture.raw_file:
            raise NoTime("its samples were pruned (FLAMEDECK_RAW_BUDGET_MB): the time is "
                         "kept, the samples to place in it are not")  # fmt: skip
        with local_copy(capture.raw_file) as path:
            return TimedCapture(read_text(path), track)
    except TimeUnavailable as exc:
        raise NoTime(str(exc)) from None


def capture_timeline(capture: Capture, bucket_s: float | None) -> dict[str, Any]:
    """The timeline, with the rank's device on the same buckets (`device`, None when no
    GPU was sampled: profiles.pyspy.timed.device.timeline_device)."""
    line = dict(timeline(timed_capture(capture, text=False), bucket_s))
    line["device"] = timeline_device(capture.gpu_samples, line)
    return line


def _window(capture: TimedCapture, from_s: float, to_s: float) -> None:
    if not to_s - from_s >= MIN_WINDOW_S:
        raise pyspy.ProfileError(f"a window is at least {MIN_WINDOW_S} s: from < to")


def capture_window_flamegraph(
    capture: Capture, from_s: float, to_s: float, max_nodes: int
) -> dict[str, Any]:
    timed = timed_capture(capture)
    _window(timed, from_s, to_s)
    return dict(window_flamegraph(timed, from_s, to_s, max_nodes))


def _analyze_window(text: str, options: pyspy.AnalysisOptions) -> dict[str, Any]:
    """The engine on a window's raw text (in the budget's child): its stats, no tree."""
    profile = pyspy.parse_raw_lines(text.split("\n"))
    stats = dict(pyspy.analyze(profile, options))
    stats.pop("flamegraph", None)
    return {k: stats.get(k) for k in ("total_samples", "top_self", "top_total", "findings")}


def window_analysis(capture: Capture, from_s: float, to_s: float) -> dict[str, Any]:
    """A window as a capture of its own: per thread its states in the window and in the
    rest of the capture (the difference the page shows), and its findings and top
    frames, computed in a bounded child process."""
    timed = timed_capture(capture)
    _window(timed, from_s, to_s)
    library = capture.run.library_entries if capture.run_id else ()
    options = pyspy.AnalysisOptions(
        keywords=(),
        include_flamegraph=False,
        # The window's text names frames short: its installed code is known from the
        # capture's full paths (TimedCapture.installed), as the whole capture's was.
        library=(*library, *sorted(timed.installed)),
    )
    limits = {
        "time_limit_s": settings.FLAMEDECK_ANALYSIS_TIME_S,
        "memory_mb": settings.FLAMEDECK_ANALYSIS_MEMORY_MB,
    }
    text = window_text(timed, from_s, to_s)
    start = timed.track.start
    device = device_window(capture.gpu_samples, start + from_s, start + to_s)
    stats, _ = budget.run_bounded(_analyze_window, (text, options), **limits)
    return {
        "from": from_s,
        "to": to_s,
        "threads": [dict(t) for t in window_states(timed, from_s, to_s)],
        "rest": [dict(t) for t in window_states(timed, from_s, to_s, rest=True)],
        "device": device,
        **stats,
    }
