"""Step threads: the threads that run the training step, which every finding reads.

Most findings, the straggler, the rank classes, the design effects and the before/after
judges measure a state's share *of the step threads' samples*, not of the whole process
(a DataLoader thread's waits are no step's). This module is the one place that chooses
them, from a capture's per-thread stats (`step_threads`): the threads named on the run
(`names`, ThreadFilter patterns), else those that make collective calls (at least
COLLECTIVE_MIN of their samples), else those that touch the device (DEVICE_STATES), else
the busiest one; `detected_by` says which. `pool` adds the chosen threads' states up.

Its readers see the choice through their own inputs, and call it rather than choose again:
- rules.findings: `findings_for_capture` on the stats;
- timed.design_effects.step_tids: the same choice on a time track's threads;
- compare.comparable.step_view: what a stored capture's `step_threads` kept;
- job.straggler.rank_view: one rank of a job, with its step functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..core.frames import ThreadFilter
from ..core.types import ThreadStat
from ..thresholds import COLLECTIVE_MIN
from .framework import caller_key

DEVICE_STATES = ("gpu_launch", "gpu_sync", "host_sync")
WHOLE_CAPTURE = "(all threads)"


class StepThreads(NamedTuple):
    threads: list[ThreadStat]
    detected_by: str
    """"named", "collective", "device", "busiest" or "none"."""


def step_threads(threads: Sequence[ThreadStat], names: Iterable[str] = ()) -> StepThreads:
    """The threads that run the training step (see the module doc for the order)."""
    wanted = ThreadFilter(names)
    if wanted.wanted:
        named = [t for t in threads if wanted.matches(t["tid"], t["name"])]
        if named:
            return StepThreads(named, "named")
    collective = [t for t in threads if state_share(t, "collective") >= COLLECTIVE_MIN]
    if collective:
        return StepThreads(collective, "collective")
    device = [t for t in threads if any(samples_in(t, s) for s in DEVICE_STATES)]
    if device:
        return StepThreads(device, "device")
    busy = [t for t in threads if samples_in(t, "compute")]
    if busy:
        return StepThreads([max(busy, key=lambda t: samples_in(t, "compute"))], "busiest")
    return StepThreads([], "none")


def samples_in(thread: Mapping[str, Any], state: str) -> int:
    return next((s["samples"] for s in thread.get("states") or [] if s["state"] == state), 0)


def state_share(thread: Mapping[str, Any], state: str) -> float:
    samples = thread.get("samples") or 0
    return samples_in(thread, state) / samples if samples else 0.0


class Pooled(NamedTuple):
    """States of several threads added up: samples, per state samples and user callers."""

    samples: int
    states: dict[str, int]
    callers: dict[str, dict[str, int]]
    frameworks: dict[str, dict[tuple, int]] = {}  # noqa: RUF012 (never mutated)
    """Per state: framework.caller_key of a framework_callers row -> samples."""


def pool(threads: Iterable[Mapping[str, Any]]) -> Pooled:
    """Add up the states (and their user callers' and framework frames' samples) of
    `threads`."""
    total, states, callers, frameworks = 0, {}, {}, {}
    for thread in threads:
        total += thread.get("samples") or 0
        for row in thread.get("states") or []:
            states[row["state"]] = states.get(row["state"], 0) + row["samples"]
            mine = callers.setdefault(row["state"], {})
            for caller in row.get("user_callers") or []:
                mine[caller["frame"]] = mine.get(caller["frame"], 0) + caller["samples"]
            under = frameworks.setdefault(row["state"], {})
            for caller in row.get("framework_callers") or []:
                key = caller_key(caller)
                under[key] = under.get(key, 0) + caller["samples"]
    return Pooled(total, states, callers, frameworks)


def capture_threads(stats: Mapping[str, Any]) -> list[ThreadStat]:
    """The capture's threads; without thread frames (py-spy without --threads), the
    whole capture as one thread, so its states are judged all the same."""
    threads = stats.get("threads") or []
    if threads or not stats.get("total_samples"):
        return list(threads)
    whole: ThreadStat = {
        "name": WHOLE_CAPTURE,
        "tid": "",
        "pid": None,
        "samples": stats["total_samples"],
        "percent": 100.0,
        "states": stats.get("states") or [],
        "active_percent": None,
    }
    return [whole]
