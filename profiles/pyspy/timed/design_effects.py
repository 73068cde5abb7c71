"""Design effects: how many of a capture's samples count as one independent draw.

py-spy's samples are autocorrelated (a 200 ms wait is ten samples at 50 Hz), so an
interval that treats them as independent (stats/intervals.py's Wilson and Newcombe) is too
narrow. With a time track the analysis measures, once, each share's *design effect*
over time blocks (stats/batch_means.py's batch means): the variance of the share across blocks
against the variance independent samples would give,

    deff = Var_blocks(share) / (p (1 - p) / n) · (t(m-1) / z)²,

where the ratio estimator's variance over m blocks is Σ (hits_j - p·samples_j)² /
(m (m-1) · mean samples_j²), and the last factor widens it by Student's t for few
blocks (as the batch-means interval does: m = 10 blocks widen it by a third). Every
later interval of that share (capture compare, watches, the whole-job compare, a
straggler's explanation, rank classes) counts n / deff samples (intervals.effective and
design_effects.effect_of): Wilson and Newcombe on the effective sample size are then the
batch-means interval without reading the samples again. A design effect is at least 1.

Measured per scope: `step` (the step threads that findings, watches and the job report
judge: each state and the DESIGN_FUNCTIONS most sampled user functions) and `all`
(every timed thread, which the capture's own state table pools: each state). A share
not measured (a frame, a category, a rarer function) takes the largest measured in its
scope: functions span states, so their runs are the longest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from statistics import NormalDist
from typing import Any

from ..core.frames import frame_key
from ..core.types import DesignEffects, ScopeEffects, StateStat, ThreadStat
from ..formats.time_track import ThreadTrack
from ..rules.state_rules import STATES
from ..rules.step_threads import step_threads
from ..stats.batch_means import block_size
from ..stats.t_distribution import t_quantile
from ..thresholds import CONFIDENCE, DESIGN_FUNCTIONS, MIN_BLOCKS
from .timed_capture import NO_STATE, TimedCapture

METHOD = "batch means over time blocks"


def design_effects(
    capture: TimedCapture, step_thread_names: Iterable[str] = ()
) -> DesignEffects | None:
    """The capture's design effects, or None when it has fewer than MIN_BLOCKS blocks
    (too short to measure a spread: its intervals stay those of independent samples)."""
    track = capture.track
    block = block_size(track.rounds, track.step_s)
    blocks = track.rounds // block if block else 0
    if blocks < MIN_BLOCKS:
        return None
    edges = [j * track.rounds // blocks for j in range(blocks + 1)]
    timed = capture.timed()
    chosen = step_tids(capture, timed, step_thread_names)
    step = [t for t in timed if str(t.tid) in chosen]
    widen = (t_quantile(CONFIDENCE, blocks - 1) / NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)) ** 2
    return {
        "method": METHOD,
        "block_s": round(block * track.step_s, 3),
        "blocks": blocks,
        "step": _scope(capture, step, edges, widen, DESIGN_FUNCTIONS),
        "all": _scope(capture, timed, edges, widen, 0),
    }


def step_tids(
    capture: TimedCapture, timed: Sequence[ThreadTrack], names: Iterable[str] = ()
) -> set[str]:
    """The tids of the capture's step threads (rules.step_threads on its track)."""
    rows = [_thread_stat(capture, thread) for thread in timed]
    return {str(t["tid"]) for t in step_threads(rows, names).threads}


def _thread_stat(capture: TimedCapture, thread: ThreadTrack) -> ThreadStat:
    """Enough of a thread's stats for rules.step_threads: samples and states."""
    states = capture.sample_states(thread)
    counts = [states.count(s) for s in range(len(STATES))]
    rows: list[StateStat] = [
        {"state": s, "samples": c, "percent": 0.0, "user_callers": []}
        for s, c in zip(STATES, counts, strict=True)
    ]
    return {
        "name": thread.name,
        "tid": thread.tid,
        "pid": thread.pid,
        "samples": sum(counts),
        "percent": 0.0,
        "states": rows,
        "active_percent": None,
    }


def _scope(
    capture: TimedCapture,
    threads: Sequence[ThreadTrack],
    edges: list[int],
    widen: float,
    functions: int,
) -> ScopeEffects:
    spans = list(pairwise(edges))
    per_thread = [capture.sample_states(t) for t in threads]
    totals = [sum((b - a) - s.count(NO_STATE, a, b) for s in per_thread) for a, b in spans]
    states = {}
    for index, state in enumerate(STATES):
        hits = [sum(s.count(index, a, b) for s in per_thread) for a, b in spans]
        if sum(hits):
            states[state] = _effect(hits, totals, widen)
    found = {}
    for name in _top_functions(capture, threads, functions):
        marks = capture.marks(name, is_function=True)
        flags = [capture.flags(t, marks) for t in threads]
        hits = [sum(f.count(1, a, b) for f in flags) for a, b in spans]
        found[name] = _effect(hits, totals, widen)
    measured = [*states.values(), *found.values()]
    return {
        "samples": sum(totals),
        "blocks": len(spans),
        "states": states,
        "functions": found,
        "largest": max(measured, default=1.0),
    }


def _top_functions(capture: TimedCapture, threads: Sequence[ThreadTrack], count: int) -> list[str]:
    """The `count` user functions with the most samples on `threads`."""
    if count <= 0:
        return []
    per_record: Counter[int] = Counter()
    for thread in threads:
        for record, n in zip(*thread.runs(), strict=True):
            per_record[record] += n
    names = capture.user_functions()
    functions: Counter[str] = Counter()
    for record, n in per_record.items():
        if record >= 0:
            for name in names[record]:
                functions[name] += n
    ranked = sorted(functions.items(), key=lambda kv: (-kv[1], kv[0]))
    return [name for name, _ in ranked[:count]]


def _effect(hits: Sequence[int], totals: Sequence[int], widen: float) -> float:
    """One share's design effect from its hits and samples per block (module doc)."""
    kept = [(h, t) for h, t in zip(hits, totals, strict=True) if t > 0]
    m, n = len(kept), sum(t for _, t in kept)
    if m < MIN_BLOCKS or n <= 0:
        return 1.0
    p = sum(h for h, _ in kept) / n
    if p <= 0.0 or p >= 1.0:
        return 1.0
    mean = n / m
    variance = sum((h - p * t) ** 2 for h, t in kept) / (m * (m - 1) * mean * mean)
    effect = widen * variance / (p * (1 - p) / n)
    return round(min(float(n), max(1.0, effect)), 3)


def scope_effects(stats: Mapping[str, Any] | None, scope: str) -> Mapping[str, Any] | None:
    """The design effects (core.types.ScopeEffects) a capture's analysis stored for `scope`
    ("step" or "all"), or None when it keeps no time."""
    time = (stats or {}).get("time") or {}
    effects = time.get("design_effect") if isinstance(time, Mapping) else None
    found = effects.get(scope) if isinstance(effects, Mapping) else None
    return found if isinstance(found, Mapping) else None


def effect_of(effects: Mapping[str, Any] | None, kind: str, name: str) -> float:
    """The design effect of one share (`kind` "state", "function", or anything else: a
    frame, a category), 1.0 when none was measured; a share not measured takes the
    largest of its scope (functions span states: their runs are the longest)."""
    if not effects:
        return 1.0
    field = {"state": "states", "function": "functions"}.get(kind)
    table = effects.get(field) if field else None
    found = table.get(name) if isinstance(table, Mapping) else None
    if found is None and kind == "function" and isinstance(table, Mapping):
        key = frame_key(name)  # a function matched by its key (one name per frame)
        found = next((v for n, v in table.items() if frame_key(str(n)) == key), None)
    if found is None and kind == "state" and isinstance(table, Mapping) and table:
        found = max(table.values())  # a state not sampled there: the states' largest
    value = found if found is not None else effects.get("largest", 1.0)
    return max(1.0, float(value))


def blocks_of(effects: Mapping[str, Any] | None) -> int | None:
    """The time blocks a capture's design effects were measured over (None: none)."""
    blocks = (effects or {}).get("blocks")
    return int(blocks) if isinstance(blocks, int) and blocks >= 2 else None


def stored_effects(stats: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The design effects of the shares `stats` holds: a step view's own
    (comparable.step_view), else the whole capture's (all threads); None without time."""
    if "design_effects" in stats:
        return stats["design_effects"]
    return scope_effects(stats, "all")
