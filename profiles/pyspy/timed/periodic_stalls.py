"""Periodic stalls: a state or a user function that comes back in bursts, regularly.

"Every 6.2 s, 0.9 s in `evaluate (train.py:71)`": an evaluation, a checkpoint or a
garbage collection every N steps is a few percent of the window as a share, but a
stall of the step as it happens. On each step thread (rules.step_threads) of a
capture with time (timed/timed_capture.py), every *signal* is tried: each state, and each function
of the user's code (functions.function_name: a frame without its line; a sample has
it when it is anywhere on the stack). The method:

1. Shares per detection bucket (DETECT_BUCKET_S) of the thread's samples with the
   signal; a bucket is in a burst at BURST_SHARE or more; bursts a bucket apart merge.
2. Each burst's edges are refined to the samples: from its first to its last sample
   with the signal, a bucket either side searched. A burst touching the capture's
   edge is cut: it counts for coverage only.
3. The signal recurs regularly when it has MIN_BURSTS whole bursts, the intervals
   between their starts have a coefficient of variation (population sd / mean) of at
   most MAX_CV, the mean interval (the period) is at least MIN_PERIOD_S, a burst takes
   at most MAX_DUTY of the period, the signal is nearly absent between bursts
   (QUIET_SHARE) and the bursts run across the whole capture (no more than
   1 + EDGE_SLACK periods before the first or after the last).
4. The finding's `value` is the percent of the thread's time in the stalls (mean burst
   duration over the period, per burst), `interval` its 95% Student-t interval over
   the whole bursts (each burst one observation: blocks, as in stats/batch_means.py); it reports
   when the interval's low end is past MIN_DUTY_PERCENT.
Signals whose bursts coincide (most starts within two buckets) are one stall: a user
function is kept over a state (it names code), the longest one over those it calls.
A steady job has no bursts (its functions are in every bucket, or in none), so no
finding. The thresholds are here, each with its reason, until thresholds.py takes them.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import pairwise
from typing import NamedTuple

from ..core.types import PeriodicFinding
from ..count.functions import function_name
from ..formats.time_track import ThreadTrack
from ..rules.findings import call_site, severity, top_frames
from ..rules.state_rules import STATES
from ..rules.states import NO_USER_FRAME
from ..stats.t_distribution import t_quantile
from ..thresholds import (
    BURST_SHARE,
    COINCIDE_SHARE,
    DETECT_BUCKET_S,
    EDGE_SLACK,
    MAX_CV,
    MAX_DUTY,
    MERGE_GAP,
    MIN_BURSTS,
    MIN_DETECT_SAMPLES,
    MIN_DUTY_PERCENT,
    MIN_PERIOD_S,
    QUIET_SHARE,
)
from .design_effects import step_tids
from .timed_capture import NO_STATE, TimedCapture

RULE = "periodic_stall"


class Burst(NamedTuple):
    start: int
    """First round with the signal."""
    end: int
    """One past the last round with the signal."""
    whole: bool
    """Not cut by the capture's edges."""


class Stall(NamedTuple):
    signal: str
    """The user function (`name (file.py)`) or the state."""
    is_function: bool
    bursts: list[Burst]
    period_s: float
    duration_s: float
    cv: float
    duties: list[float]


def periodic_stalls(
    capture: TimedCapture, step_thread_names: Iterable[str] = ()
) -> list[PeriodicFinding]:
    """`periodic_stall` findings on the capture's step threads (module doc), most time first."""
    found: dict[str, PeriodicFinding] = {}
    timed = capture.timed()
    chosen = step_tids(capture, timed, step_thread_names)
    for thread in timed:
        if str(thread.tid) not in chosen:
            continue
        for stall in _stalls(capture, thread):
            finding = _finding(capture, thread, stall)
            if finding is None:
                continue
            known = found.get(stall.signal)
            if known is None or finding["value"] > known["value"]:
                found[stall.signal] = finding
    return sorted(found.values(), key=lambda f: (-f["interval"][0], f["title"]))


class _Series(NamedTuple):
    edges: list[int]
    totals: list[int]
    """Samples with a state per detection bucket."""
    signals: dict[tuple[str, bool], list[int]]
    """(signal, is_function) -> samples with it per bucket."""
    marks: dict[tuple[str, bool], bytes]
    """Per sample of the thread: 1 when it has the signal."""


def _stalls(capture: TimedCapture, thread: ThreadTrack) -> list[Stall]:
    series = _series(capture, thread)
    stalls = []
    for key, counts in series.signals.items():
        stall = _regular(capture, series, key, counts)
        if stall is not None:
            stalls.append(stall)
    return _distinct(stalls, capture.track.at, _detect_bucket(capture))


def _detect_bucket(capture: TimedCapture) -> float:
    return max(DETECT_BUCKET_S, MIN_DETECT_SAMPLES * capture.track.step_s)


def _series(capture: TimedCapture, thread: ThreadTrack) -> _Series:
    track = capture.track
    bucket = _detect_bucket(capture)
    count = max(1, math.ceil(track.duration_s / bucket - 1e-9))
    edges = [track.round_at(i * bucket) for i in range(count + 1)]
    states = capture.sample_states(thread)
    totals = [(b - a) - states.count(NO_STATE, a, b) for a, b in pairwise(edges)]
    candidates = _candidates(capture, thread, sum(totals))
    marks = {key: capture.flags(thread, capture.marks(*key)) for key in candidates}
    signals = {
        key: [hits.count(1, a, b) for a, b in pairwise(edges)] for key, hits in marks.items()
    }
    return _Series(edges, totals, signals, marks)


def _candidates(capture: TimedCapture, thread: ThreadTrack, total: int) -> list[tuple[str, bool]]:
    """Signals whose whole share could be a stall: present, and at most a burst's worth
    (MAX_DUTY) plus the quiet share between bursts."""
    if not total:
        return []
    most = (MAX_DUTY + QUIET_SHARE) * total
    least = MIN_DUTY_PERCENT / 100 * total / 2
    states = capture.sample_states(thread)
    found = [(STATES[s], False) for s in range(len(STATES)) if least <= states.count(s) <= most]
    functions: Counter[str] = Counter()
    names = capture.user_functions()
    per_record: Counter[int] = Counter()
    for record, n in zip(*thread.runs(), strict=True):
        per_record[record] += n
    for record, n in per_record.items():
        if record >= 0:
            for name in names[record]:
                functions[name] += n
    found += [(name, True) for name, n in sorted(functions.items()) if least <= n <= most]
    return found


def _regular(
    capture: TimedCapture, series: _Series, key: tuple[str, bool], counts: list[int]
) -> Stall | None:
    """The stall when the signal's bursts recur regularly (module doc, steps 1-3)."""
    shares = [c / t if t else 0.0 for c, t in zip(counts, series.totals, strict=True)]
    runs = _burst_runs(shares)
    whole_runs = [r for r in runs if r[0] > 0 and r[1] < len(shares) - 1]
    if len(whole_runs) < MIN_BURSTS or not _quiet(counts, series.totals, runs):
        return None
    hits = series.marks[key]
    bursts = [_refine(hits, series.edges, run, run in whole_runs) for run in runs]
    whole = [b for b in bursts if b.whole]
    at = capture.track.at  # a round's time (py-spy's own when it stamped them)
    intervals = [at(b.start) - at(a.start) for a, b in pairwise(whole)]
    period = statistics.fmean(intervals)
    cv = statistics.pstdev(intervals) / period if period > 0 else math.inf
    duration = statistics.fmean(at(b.end) - at(b.start) for b in whole)
    if cv > MAX_CV or period < MIN_PERIOD_S or duration > MAX_DUTY * period:
        return None
    slack = (1 + EDGE_SLACK) * period
    if at(bursts[0].start) > slack or capture.track.duration_s - at(bursts[-1].end) > slack:
        return None
    duties = [(at(b.end) - at(b.start)) / period for b in whole]
    return Stall(key[0], key[1], bursts, period, duration, cv, duties)


def _burst_runs(shares: list[float]) -> list[tuple[int, int]]:
    """(first, last) bucket of each burst: buckets at BURST_SHARE, MERGE_GAP gaps closed."""
    runs: list[tuple[int, int]] = []
    for i, share in enumerate(shares):
        if share < BURST_SHARE:
            continue
        if runs and i - runs[-1][1] <= MERGE_GAP + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _quiet(counts: list[int], totals: list[int], runs: list[tuple[int, int]]) -> bool:
    """The signal's share outside the bursts (a bucket of margin each side) is small."""
    inside = bytearray(len(counts))
    for first, last in runs:
        inside[max(0, first - 1) : last + 2] = b"\x01" * (
            min(len(counts), last + 2) - max(0, first - 1)
        )
    outside = [i for i in range(len(counts)) if not inside[i]]
    samples = sum(totals[i] for i in outside)
    return not samples or sum(counts[i] for i in outside) <= QUIET_SHARE * samples


def _refine(hits: bytes, edges: list[int], run: tuple[int, int], whole: bool) -> Burst:
    """The burst's first and last sample with the signal, a bucket either side searched."""
    begin = edges[max(0, run[0] - 1)]
    end = edges[min(len(edges) - 1, run[1] + 2)]
    return Burst(hits.find(1, begin, end), hits.rfind(1, begin, end) + 1, whole)


def _distinct(stalls: list[Stall], at: Callable[[int], float], bucket: float) -> list[Stall]:
    """One stall per set of coinciding bursts: functions first, then the longest."""
    ordered = sorted(stalls, key=lambda s: (not s.is_function, -s.duration_s, s.signal))
    kept: list[Stall] = []
    for stall in ordered:
        if not any(_coincide(stall, other, at, bucket) for other in kept):
            kept.append(stall)
    return kept


def _coincide(a: Stall, b: Stall, at: Callable[[int], float], bucket: float) -> bool:
    starts = [at(x.start) for x in b.bursts]
    near = sum(any(abs(at(x.start) - s) <= 2 * bucket for s in starts) for x in a.bursts)
    return near >= COINCIDE_SHARE * min(len(a.bursts), len(b.bursts))


def _finding(capture: TimedCapture, thread: ThreadTrack, stall: Stall) -> PeriodicFinding | None:
    """The finding when the stalls' share of time is past MIN_DUTY_PERCENT (step 4)."""
    value = 100 * statistics.fmean(stall.duties)
    spread = statistics.stdev(stall.duties) if len(stall.duties) > 1 else 0.0
    half = 100 * t_quantile(0.95, len(stall.duties) - 1) * spread / math.sqrt(len(stall.duties))
    low, high = round(max(0.0, value - half), 1), round(min(100.0, value + half), 1)
    if low <= MIN_DUTY_PERCENT:
        return None
    state, frame, callers = _inside(capture, thread, stall)
    what = f"`{frame}`" if stall.is_function else state
    period, duration = round(stall.period_s, 2), round(stall.duration_s, 2)
    at = capture.track.at
    return {
        "rule": RULE,
        "severity": severity(low, MIN_DUTY_PERCENT),  # type: ignore[typeddict-item]
        "title": f"Every {period:.1f} s, {duration:.1f} s in {what}",
        "value": round(value, 1),
        "interval": [low, high],
        "threshold": MIN_DUTY_PERCENT,
        "frames": [frame]
        if stall.is_function
        else [c["frame"] for c in callers if c["frame"] != NO_USER_FRAME],
        "user_callers": callers,
        "advice": _advice(stall, what, thread.name, state, value, callers),
        "period_s": period,
        "duration_s": duration,
        "state": state,
        "function": stall.signal if stall.is_function else None,
        "thread": thread.name or str(thread.tid),
        "bursts": [[round(at(b.start), 2), round(at(b.end), 2)] for b in stall.bursts],
        "regularity_cv": round(stall.cv, 3),
    }


def _inside(capture: TimedCapture, thread: ThreadTrack, stall: Stall):  # noqa: ANN202
    """The bursts' dominant state, the function's hottest line frame and the user callers."""
    records: Counter[int] = Counter()
    for burst in stall.bursts:
        records.update(thread.lines[burst.start : burst.end])
    records.pop(-1, None)
    line_states, (_, leaves) = capture.line_states(), capture.profile()
    classified, frames = capture.classified(), capture.profile()[0].frames
    states: Counter[int] = Counter()
    callers: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    user_frames = capture.user_frames()
    for record, n in records.items():
        states[line_states[record]] += n
        leaf = leaves[record]
        caller = classified.user_caller[leaf] if leaf >= 0 else -1
        callers[frames[caller] if caller >= 0 else NO_USER_FRAME] += n
        if stall.is_function:
            here = [f for f in user_frames[record] if function_name(f) == stall.signal]
            if here:
                lines[here[0]] += n
    states.pop(NO_STATE, None)
    state = STATES[states.most_common(1)[0][0]] if states else "unknown"
    frame = min(lines.items(), key=lambda kv: (-kv[1], kv[0]))[0] if lines else stall.signal
    return state, frame, top_frames(callers, sum(records.values()))


def _advice(stall: Stall, what: str, thread: str, state: str, value: float, callers) -> str:  # noqa: ANN001
    every = f"every {stall.period_s:.1f} s for {stall.duration_s:.1f} s"
    if stall.is_function:
        return (
            f"{what} runs {every} on the `{thread}` thread ({value:.0f}% of its time, in "
            f"{state}), and the step waits while it runs: run it less often, make it "
            "cheaper, or move it off the step (another process, or asynchronously)."
        )
    return (
        f"The `{thread}` thread is in {state} {every} ({value:.0f}% of its time), from "
        f"{call_site(callers)}: find what recurs there (an evaluation, a checkpoint, a "
        "garbage collection) and run it less often or off the step."
    )
