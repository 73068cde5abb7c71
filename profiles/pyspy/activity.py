"""Sampling rounds, whether blocked threads were sampled, and each thread's active share.

py-spy 0.4 samples in rounds: each round takes one stack from every thread it
samples. Measured here (py-spy 0.4.3, bench/capture_states.sh and the captures in
tests/data/pyspy/):
- `Samples: N` on its last log line counts stacks, not rounds: with `--idle` it is
  rounds x threads (5 threads, 50 Hz, 4 s: 995 = 5 x 199);
- a capture that ends by `--duration D` at `--rate R` takes R*D - 1 rounds (99 of 100,
  199 of 200, 59 of 60, 399 of 400, 49 of 50; a round that failed counts among them as
  an error), however far py-spy fell behind;
- with `--idle` every live thread gives one stack per round; without it py-spy drops
  the stacks of threads it finds blocked (a thread waiting on a queue gave 14 of 199).
So `rounds` comes from the log when the capture ended by duration (R*D - 1), else from
the data when blocked threads were sampled (the most samples any thread has), else it
is unknown (None). `idle_included` is what the caller knows (the capture's settings),
else inferred: with `--idle` the threads that lived through the capture have exactly
the same count, so at least two threads, and at least half of them, sharing the
highest count says idle samples are present; a single thread says nothing (None).
A thread's `active_percent` is 100 x its samples / rounds: without `--idle` the share
of rounds it was running; with `--idle` the share of the capture it existed.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import NamedTuple

from .profile import Profile
from .types import LagReport


class Activity(NamedTuple):
    rounds: int | None
    idle_included: bool | None


def thread_owners(profile: Profile) -> array:
    """Per node: the frame id of the outermost thread frame on its path, or -1 (cached)."""
    cached = profile._cache.get("owners")
    if cached is None:
        threads = profile.frame_info().thread
        owner = array("l", [-1]) * profile.node_count
        parent, frame = profile.parent, profile.frame
        for node in range(1, profile.node_count):
            above = owner[parent[node]]
            owner[node] = above if above >= 0 else (frame[node] if frame[node] in threads else -1)
        cached = profile._cache["owners"] = owner
    return cached  # type: ignore[return-value]


def activity(
    thread_samples: Iterable[int], lag: LagReport | None, idle: bool | None = None
) -> Activity:
    """Rounds and idle_included from the whole capture's per-thread samples and log."""
    counts = sorted((c for c in thread_samples if c), reverse=True)
    inferred = _idle_in(counts)
    idle_included = idle if idle is not None else inferred
    rounds = rounds_from_log(lag)
    if rounds is None and idle_included and counts:
        rounds = counts[0]
    return Activity(rounds, idle_included)


def rounds_from_log(lag: LagReport | None) -> int | None:
    """R*D - 1 when py-spy's log shows it ended by its duration, else None."""
    if lag is None or lag.get("error") or lag.get("stop_reason") is not None:
        return None
    rate, duration = lag.get("requested_rate"), lag.get("requested_duration_s")
    if not rate or not duration or lag.get("samples_reported") is None:
        return None
    return max(1, rate * duration - 1)


def _idle_in(counts: list[int]) -> bool | None:
    if len(counts) < 2:
        return None
    top = sum(1 for c in counts if c == counts[0])
    return top >= 2 and 2 * top >= len(counts)


def active_percent(samples: int, rounds: int | None) -> float | None:
    """Share of the sampling rounds in which the thread gave a sample (at most 100)."""
    if not rounds:
        return None
    return round(min(100.0, 100.0 * samples / rounds), 2)
