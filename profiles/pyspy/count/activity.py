"""Sampling rounds, whether blocked threads were sampled, and each thread's active share.

py-spy 0.4 samples in rounds: each round takes one stack from every thread it
samples. Measured here (py-spy 0.4.3, bench/recorders/capture_states.sh and the captures in
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
else inferred from the threads that lasted (at least TRANSIENT of the busiest one's
count; gloo and pybind11 make short-lived thread states; the thresholds are in
thresholds.py): with `--idle` each of them gives a sample in every round, without it
only a thread that never blocked does. So two or more threads filling the rounds
(FULL_ROUNDS of R*D - 1, or the top count without a log) say idle samples are present;
a single lasting thread filling them does when at least KEPT_BLOCKED of its samples are
blocked states (a thread py-spy kept while it waited); a single thread without a log
says nothing (None); anything else says they are absent.
A thread's `active_percent` is 100 x its samples / rounds: without `--idle` the share
of rounds it was running; with `--idle` the share of the capture it existed.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import NamedTuple

from ..core.profile import Profile
from ..core.types import LagReport
from ..thresholds import FULL_ROUNDS, KEPT_BLOCKED, TRANSIENT

# States a blocked thread is in: without --idle py-spy drops these samples.
BLOCKED = frozenset({"collective", "data_wait", "backpressure", "gil", "idle"})


class Activity(NamedTuple):
    rounds: int | None
    idle_included: bool | None


class ThreadCount(NamedTuple):
    samples: int
    blocked: int
    """Samples in a BLOCKED state."""


def thread_owners(profile: Profile) -> array:
    """Per node: the frame id of the outermost thread frame on its path, or -1 (cached)."""
    cached = profile._cache.get("owners")
    if cached is None:
        threads = profile.frame_info().thread
        owner = array("i", [-1]) * profile.node_count
        parent, frame = profile.parent, profile.frame
        for node in range(1, profile.node_count):
            above = owner[parent[node]]
            owner[node] = above if above >= 0 else (frame[node] if frame[node] in threads else -1)
        cached = profile._cache["owners"] = owner
    return cached  # type: ignore[return-value]


def activity(
    threads: Iterable[ThreadCount], lag: LagReport | None, idle: bool | None = None
) -> Activity:
    """Rounds and idle_included from the whole capture's threads and py-spy's log."""
    counts = sorted((t for t in threads if t.samples), reverse=True)
    logged = rounds_from_log(lag)
    idle_included = idle if idle is not None else _idle_in(counts, logged)
    rounds = logged
    if rounds is None and idle_included and counts:
        rounds = counts[0].samples
    return Activity(rounds, idle_included)


def rounds_from_log(lag: LagReport | None) -> int | None:
    """R*D - 1 when py-spy's log shows it ended by its duration, else None."""
    if lag is None or lag.get("error") or lag.get("stop_reason") is not None:
        return None
    rate, duration = lag.get("requested_rate"), lag.get("requested_duration_s")
    if not rate or not duration or lag.get("samples_reported") is None:
        return None
    return max(1, rate * duration - 1)


def _idle_in(counts: list[ThreadCount], rounds: int | None) -> bool | None:
    """Whether blocked threads were sampled, from the counts (module doc); None: unknown."""
    if not counts:
        return None
    top = counts[0].samples
    lasting = [t for t in counts if t.samples >= TRANSIENT * top]
    full = [t for t in lasting if t.samples >= FULL_ROUNDS * (rounds or top)]
    if len(full) >= 2:
        return True
    if rounds is None and len(lasting) < 2:
        return None  # one thread and no log: nothing to compare its count with
    if len(full) == 1 and len(lasting) == 1:
        # The only lasting thread gave a sample every round: blocked samples among them
        # mean py-spy kept blocked stacks (without --idle it drops exactly those).
        return full[0].blocked >= KEPT_BLOCKED * full[0].samples
    return False


def active_percent(samples: int, rounds: int | None) -> float | None:
    """Share of the sampling rounds in which the thread gave a sample (at most 100)."""
    if not rounds:
        return None
    return round(min(100.0, 100.0 * samples / rounds), 2)
