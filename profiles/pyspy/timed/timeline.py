"""Timelines: each thread's states bucket by bucket, on the host's clock.

`timeline` gives, per thread sampled in every round (TimedCapture.timed), the share of
its samples in each state per bucket and the dominant state (the largest share, ties in
STATES order; None for a bucket without samples). Only the states a thread has appear in
its `states`. Bucket i covers [start + i * bucket_s, start + (i + 1) * bucket_s) and
holds the rounds placed in it (formats/time_track.py; at py-spy's own times where it stamped
them). The default bucket is the first 1-2-5 step giving at most DEFAULT_BUCKETS
buckets and at least MIN_BUCKET_SAMPLES rounds per bucket at the requested rate; a
bucket giving more than MAX_BUCKETS is refused.

`aligned_timelines` puts several ranks on one clock: each host's offset (seconds to
add to its clock) moves its samples, and every rank's buckets start at the same instant,
so bucket i is the same stretch of time on every rank.

Each bucket's states are counted with `bytes.count` on the thread's per-sample states
(one byte a sample): no Python loop runs per sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

from ..core.types import AlignedTimeline, Timeline, TimelineThread, UntimedThread
from ..errors import ProfileError
from ..rules.state_rules import STATES
from .timed_capture import NO_STATE, TimedCapture

DEFAULT_BUCKETS = 300
"""A capture's default timeline has at most this many buckets (a strip a page can draw)."""
MIN_BUCKET_SAMPLES = 5
"""The default bucket holds at least this many rounds: a share of fewer is mostly noise."""
MAX_BUCKETS = 5000
"""More buckets than this are refused (the JSON would pass a megabyte per thread)."""
SHARE_DIGITS = 3


def default_bucket(duration_s: float, rate: float) -> float:
    """The smallest 1-2-5 step (0.01 s, 0.02 s, ..., 1 s, 2 s, 5 s, ...) with at most
    DEFAULT_BUCKETS buckets over `duration_s` and MIN_BUCKET_SAMPLES rounds at `rate`."""
    wanted = max(duration_s / DEFAULT_BUCKETS, MIN_BUCKET_SAMPLES / rate, 0.01)
    power = 10.0 ** math.floor(math.log10(wanted))
    for step in (1, 2, 5, 10):
        if step * power >= wanted * (1 - 1e-9):
            return round(step * power, 10)
    return round(10 * power, 10)  # pragma: no cover - the loop always returns


def bucket_count(duration_s: float, bucket_s: float) -> int:
    """Buckets over `duration_s`; ProfileError when the bucket is no number or too small."""
    if isinstance(bucket_s, bool) or not isinstance(bucket_s, int | float):
        raise ProfileError(f"the bucket must be a number of seconds, not {bucket_s!r}")
    if not math.isfinite(bucket_s) or bucket_s <= 0:
        raise ProfileError(f"the bucket must be a positive number of seconds, not {bucket_s!r}")
    count = max(1, math.ceil(duration_s / bucket_s - 1e-9))
    if count > MAX_BUCKETS:
        smallest = duration_s / MAX_BUCKETS
        raise ProfileError(
            f"a bucket of {bucket_s:g} s gives {count} buckets over {duration_s:.1f} s, "
            f"more than {MAX_BUCKETS}: ask for {smallest:.3g} s or more"
        )
    return count


def timeline(
    capture: TimedCapture,
    bucket_s: float | None = None,
    *,
    origin: float | None = None,
    buckets: int | None = None,
) -> Timeline:
    """The capture's timeline (module doc). `origin`: the epoch, on the host's clock, where
    bucket 0 starts (default: the first sample); `buckets`: how many (default: to the end)."""
    track = capture.track
    origin = track.start if origin is None else origin
    span = track.end - origin
    if bucket_s is None:
        bucket_s = default_bucket(span, track.rate)
    count = bucket_count(span, bucket_s) if buckets is None else buckets
    edges = _edges(capture, origin, bucket_s, count)
    threads = [_thread(capture, t, edges) for t in capture.timed()]
    return {
        "start": origin,
        "bucket_s": bucket_s,
        "threads": threads,
        "untimed": untimed_threads(capture),
    }


def untimed_threads(capture: TimedCapture) -> list[UntimedThread]:
    """Threads with fewer samples than rounds: born or ended during the capture."""
    rounds = capture.track.rounds
    return [
        {
            "name": t.name,
            "tid": t.tid,
            "samples": t.samples,
            "reason": f"sampled in {t.samples} of {rounds} rounds (it started or ended "
            "during the capture), so its samples cannot be placed in time",
        }
        for t in sorted(capture.track.untimed(), key=lambda t: (t.name, str(t.tid)))
    ]


def _edges(capture: TimedCapture, origin: float, bucket_s: float, count: int) -> list[int]:
    """The first round of each bucket, and the end: round k lies in bucket i when
    edges[i] <= k < edges[i + 1]."""
    track = capture.track
    offset = origin - track.start
    return [track.round_at(offset + i * bucket_s) for i in range(count + 1)]


def _thread(capture: TimedCapture, thread, edges: list[int]) -> TimelineThread:  # noqa: ANN001
    states = capture.sample_states(thread)
    present = [s for s in range(len(STATES)) if states.count(s)]
    shares: dict[str, list[float]] = {STATES[s]: [] for s in present}
    dominant: list[str | None] = []
    for begin, end in pairwise(edges):
        chunk = states[begin:end]
        counts = [chunk.count(s) for s in present]
        total = sum(counts)
        best = max(range(len(counts)), key=counts.__getitem__) if total else -1
        dominant.append(STATES[present[best]] if best >= 0 and counts[best] else None)
        for s, c in zip(present, counts, strict=True):
            shares[STATES[s]].append(round(c / total, SHARE_DIGITS) if total else 0.0)
    return {"name": thread.name, "tid": thread.tid, "dominant": dominant, "states": shares}


def aligned_timelines(
    ranks: Sequence[tuple[str, TimedCapture, float]],
    bucket_s: float | None = None,
    *,
    span: tuple[float, float, float] | None = None,
) -> AlignedTimeline:
    """Several ranks' timelines on one clock: (name, capture, offset) per rank, the offset
    being the seconds to add to that host's clock to read the reference clock.

    `span`: (first sample, last sample, lowest rate) of a larger job these ranks are a
    page of, on the reference clock; the buckets then cover it all, so every page of the
    job has the same `start` and buckets (and a page may hold no rank)."""
    if not ranks and span is None:
        raise ProfileError("no rank has a timeline")
    for name, _, offset in ranks:
        if isinstance(offset, bool) or not isinstance(offset, int | float):
            raise ProfileError(f"{name}: its clock offset is not a number")
        if not math.isfinite(offset):
            raise ProfileError(f"{name}: its clock offset is {offset!r}")
    starts = [c.track.start + off for _, c, off in ranks]
    stops = [c.track.end + off for _, c, off in ranks]
    rates = [c.track.rate for _, c, _ in ranks]
    if span is not None:
        starts, stops, rates = [*starts, span[0]], [*stops, span[1]], [*rates, span[2]]
    origin, stop = min(starts), max(stops)
    if bucket_s is None:
        bucket_s = default_bucket(stop - origin, min(rates))
    count = bucket_count(stop - origin, bucket_s)
    rows = []
    for name, capture, offset in ranks:
        own = timeline(capture, bucket_s, origin=origin - offset, buckets=count)
        rows.append(
            {
                "name": name,
                "offset_s": offset,
                "threads": own["threads"],
                "untimed": own["untimed"],
            }
        )
    return {"start": origin, "bucket_s": bucket_s, "ranks": rows}


__all__ = [
    "DEFAULT_BUCKETS",
    "MAX_BUCKETS",
    "NO_STATE",
    "aligned_timelines",
    "bucket_count",
    "default_bucket",
    "timeline",
    "untimed_threads",
]
