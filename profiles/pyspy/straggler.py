"""The straggler of a whole job: the rank the others wait for, and what it does more.

Works on RankView (one rank's stats seen through its step threads), built by
`rank_view` from a rank's stored stats; job.py uses it for the report. See job.py's
module doc for the rules; the numbers are in percent of step-thread samples and the
intervals are 95% (Newcombe, compare.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .compare import newcombe_interval
from .findings import (
    COLLECTIVE_WAIT,
    MIN_SAMPLES,
    NO_USER_FRAME,
    Pooled,
    capture_threads,
    percent_interval,
    pool,
    step_threads,
)
from .functions import TOP_FUNCTIONS, function_name
from .types import Explanation, Straggler

STRAGGLER_GAP = 10.0
"""Points by which every other rank's collective share must exceed the straggler's."""
EXPLAIN_MIN = 2.0
"""Points by which an explanation item must exceed the others (and beyond noise)."""
EXPLAIN_TOP = 6


class RankView(NamedTuple):
    """One rank: its stats, its step threads and their pooled states and functions."""

    name: str
    stats: Mapping[str, Any]
    threads: list[Mapping[str, Any]]
    detected_by: str
    pooled: Pooled
    functions: dict[str, tuple[int, str]]
    """Function -> (samples on the step threads, its hottest frame)."""
    function_floor: int
    """Most samples a function missing from `functions` can have (truncated lists)."""
    whole: int
    """What shares are of: the step threads' samples; without idle samples (and with
    known rounds), their sampling rounds, since blocked rounds left no sample."""
    waiting: int
    """Of `whole`: collective samples, plus the rounds left without a sample."""


def rank_view(name: str, stats: Mapping[str, Any], names: tuple[str, ...]) -> RankView:
    chosen = step_threads(capture_threads(stats), names)
    tids = {str(t["tid"]) for t in chosen.threads}
    rows = [r for r in stats.get("thread_functions") or [] if str(r["tid"]) in tids]
    functions: dict[str, tuple[int, str]] = {}
    best: dict[str, int] = {}
    for row in rows:
        for fn in row["functions"]:
            samples = functions.get(fn["function"], (0, ""))[0] + fn["samples"]
            if fn["samples"] > best.get(fn["function"], 0):
                best[fn["function"]] = fn["samples"]
                functions[fn["function"]] = (samples, fn["frame"])
            else:
                functions[fn["function"]] = (samples, functions[fn["function"]][1])
    floor = sum(
        min(f["samples"] for f in r["functions"])
        for r in rows
        if len(r["functions"]) >= TOP_FUNCTIONS
    )
    pooled = pool(chosen.threads)
    whole, collective = pooled.samples, pooled.states.get("collective", 0)
    rounds = stats.get("rounds") or 0
    if stats.get("idle_included") is False and rounds * len(chosen.threads) > whole:
        whole = rounds * len(chosen.threads)
    waiting = collective + whole - pooled.samples
    return RankView(
        name, stats, chosen.threads, chosen.detected_by, pooled, functions, floor, whole, waiting
    )


# --- the straggler ---


def find_straggler(views: Sequence[RankView]) -> Straggler | None:
    """The rank the others wait for, beyond noise, with its explanation; else None."""
    ranked = [v for v in views if v.pooled.samples >= MIN_SAMPLES]
    if len(ranked) < 2:
        return None
    candidate = min(ranked, key=lambda v: v.waiting / v.whole)
    others = [v for v in ranked if v is not candidate]
    waited = waiting(others)
    if percent_interval(*waited)[0] <= COLLECTIVE_WAIT:
        return None
    mine = (candidate.waiting, candidate.whole)
    for other in others:
        low, _ = newcombe_interval(mine, (other.waiting, other.whole))
        if 100 * low <= STRAGGLER_GAP:
            return None
    return {
        "name": candidate.name,
        "wait_percent": round(100 * mine[0] / mine[1], 1),
        "others_wait_percent": round(100 * waited[0] / waited[1], 1),
        "explanation": explain(candidate, others),
    }


def waiting(views: Iterable[RankView]) -> tuple[int, int]:
    """The views' waiting and whole added up."""
    pairs = [(v.waiting, v.whole) for v in views]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def state_counts(view: RankView, state: str) -> tuple[int, int]:
    return view.pooled.states.get(state, 0), view.pooled.samples


def function_counts(view: RankView, function: str) -> tuple[int, int]:
    return function_samples(view, function), view.pooled.samples


def explain(rank: RankView, others: Sequence[RankView]) -> list[Explanation]:
    """What `rank` does more than `others` pooled, beyond noise, largest first."""
    # Shares of the samples seen (without idle samples, of the time each was running):
    # a share of rounds would credit every frame of a less-blocked rank with the gap.
    total = sum(o.pooled.samples for o in others)
    items: list[Explanation] = []
    for function, (samples, frame) in rank.functions.items():
        theirs = sum(function_samples(o, function) for o in others)
        item = _difference(frame, (samples, rank.pooled.samples), (theirs, total))
        if item is not None:
            items.append({**item, "function": function})
    for state, callers in rank.pooled.callers.items():
        if state == "collective":
            continue  # what the others wait in; the straggler's own is smaller
        for frame, samples in callers.items():
            theirs = sum(_caller_samples(o, state, frame) for o in others)
            item = _difference(frame, (samples, rank.pooled.samples), (theirs, total))
            if item is not None:
                items.append({**item, "state": state})
    # A state at a line of a function listed already says the same thing again.
    listed = {i["function"] for i in items if "function" in i}
    items = [i for i in items if "state" not in i or function_name(i["frame"]) not in listed]
    items.sort(key=lambda i: (-i["delta"], i["frame"], i.get("state", "")))
    return items[:EXPLAIN_TOP]


def _difference(frame: str, mine: tuple[int, int], theirs: tuple[int, int]) -> Explanation | None:
    """The item when mine exceeds theirs by EXPLAIN_MIN points, beyond noise; None when
    either side has no samples (nothing to compare with)."""
    if mine[1] <= 0 or theirs[1] <= 0:
        return None
    low, high = newcombe_interval(theirs, mine)
    percent, others = 100 * mine[0] / mine[1], 100 * theirs[0] / theirs[1]
    if low <= 0 or percent - others < EXPLAIN_MIN or frame == NO_USER_FRAME:
        return None
    return {
        "frame": frame,
        "percent": round(percent, 1),
        "others_percent": round(others, 1),
        "delta": round(percent - others, 1),
        "interval": [round(100 * low, 1), round(100 * high, 1)],
    }


def function_samples(view: RankView, function: str) -> int:
    """The function's samples on that rank; when its lists were cut, the most it can
    have (so a delta is never overstated)."""
    found = view.functions.get(function)
    return found[0] if found else view.function_floor


def _caller_samples(view: RankView, state: str, frame: str) -> int:
    callers = view.pooled.callers.get(state, {})
    if frame in callers:
        return callers[frame]
    # user_callers are the top 10 per thread and state: a missing one has at most the
    # smallest shown, per thread whose list was full.
    return _caller_floor(view, state)


def _caller_floor(view: RankView, state: str) -> int:
    floor = 0
    for thread in view.threads:
        for row in thread.get("states") or []:
            callers = row.get("user_callers") or []
            if row["state"] == state and len(callers) >= 10:
                floor += min(c["samples"] for c in callers)
    return floor


def pool_views(group: Sequence[RankView]) -> Pooled:
    samples, states, callers = 0, {}, {}
    for view in group:
        samples += view.pooled.samples
        for state, count in view.pooled.states.items():
            states[state] = states.get(state, 0) + count
        for state, by_frame in view.pooled.callers.items():
            mine = callers.setdefault(state, {})
            for frame, count in by_frame.items():
                mine[frame] = mine.get(frame, 0) + count
    return Pooled(samples, states, callers)
