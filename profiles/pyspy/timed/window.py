"""A window is a capture of its own: the raw text of only the samples taken in it.

`window(raw_text, track, from_s, to_s)` keeps the samples of the rounds placed in
[from_s, to_s) seconds since the first sample (round k at track.at(k), formats/time_track.py),
of every thread sampled in every round, and writes them as raw text: one `frames COUNT`
line per record that has samples in the window, in the records' order, its frames named
as the whole capture's (TimedCapture.stack), not guessed again from the window's few. The existing
`analyze` then gives the window's flamegraph, states, findings and top frames unchanged.
`rest=True` gives the complement: the samples of the same threads outside the window
("the rest of the capture"), for the difference. Threads sampled in fewer rounds
(untimed) are in neither; malformed samples have no place in time and are left out.
`window_flamegraph` gives the window's flamegraph alone (the API's `?from=&to=`) and
`window_states` each thread's states in the window (or the rest), from the states the
analysis stored in the track: neither classifies anything.

Counting walks each thread's runs (a record index and how many rounds it lasted) from
the first run in the window (a binary search), never sample by sample; the text has
one line per distinct stack in the window, not one per sample.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from ..core.types import FlameNode, WindowThread
from ..count.flamegraph import trie_flamegraph
from ..errors import ProfileError
from ..formats.raw import parse_raw_lines
from ..formats.time_track import ThreadTrack, Track
from ..rules.state_rules import STATES
from .timed_capture import TimedCapture


def window(
    raw_text: str, track: Track | None, from_s: float, to_s: float, *, rest: bool = False
) -> str:
    """The raw text of the samples in [from_s, to_s) (or, with `rest`, outside it)."""
    return window_text(TimedCapture(raw_text, track), from_s, to_s, rest=rest)


def window_text(capture: TimedCapture, from_s: float, to_s: float, *, rest: bool = False) -> str:
    """`window` for a capture already read (module doc)."""
    begin, end = sample_range(capture, from_s, to_s)
    ranges = [(0, begin), (end, capture.track.rounds)] if rest else [(begin, end)]
    counts: dict[int, int] = {}
    for thread in capture.timed():
        for a, b in ranges:
            if b > a:
                _add_runs(thread, a, b, counts)
    counts.pop(-1, None)
    if not counts:
        what = "the rest of the capture" if rest else f"[{from_s:g}, {to_s:g}) s"
        raise ProfileError(
            f"{what} holds no samples (the capture spans {capture.track.duration_s:.2f} s)"
        )
    stack = capture.stack
    return "".join(f"{stack(r)} {counts[r]}\n" for r in sorted(counts))


def _add_runs(thread: ThreadTrack, begin: int, end: int, counts: dict[int, int]) -> None:
    """Add the samples of rounds [begin, end) to `counts`, a run at a time."""
    values, runs = thread.runs()
    ends = thread.run_ends()
    get = counts.get
    for i in range(bisect_right(ends, begin), len(ends)):
        first = ends[i] - runs[i]
        if first >= end:
            break
        counts[values[i]] = get(values[i], 0) + min(ends[i], end) - max(first, begin)


def window_flamegraph(
    capture: TimedCapture, from_s: float, to_s: float, max_nodes: int = 8192, *, rest: bool = False
) -> FlameNode:
    """The window's flamegraph (the API's `flamegraph/?from=&to=`): its raw text parsed
    and pruned as `analyze` does, without the rest of the analysis."""
    profile = parse_raw_lines(window_text(capture, from_s, to_s, rest=rest).split("\n"))
    profile.renamed = capture.names()  # the text is named already: keep the full files
    acc = profile.accumulated()
    return trie_flamegraph(profile, acc.total, acc.size, max_nodes)


def window_states(
    capture: TimedCapture, from_s: float, to_s: float, *, rest: bool = False
) -> list[WindowThread]:
    """Per placed thread, its samples in the window and how many are in each state it
    has there: read from the states the analysis stored in the track (timed.with_states),
    counted with `bytes.count`, so the page can set a window beside the rest."""
    begin, end = sample_range(capture, from_s, to_s)
    rows: list[WindowThread] = []
    for thread in capture.timed():
        states = capture.sample_states(thread)
        parts = [states[:begin], states[end:]] if rest else [states[begin:end]]
        counts = {name: sum(part.count(i) for part in parts) for i, name in enumerate(STATES)}
        counts = {name: n for name, n in counts.items() if n}
        samples = sum(counts.values())
        rows.append({"name": thread.name, "tid": thread.tid, "samples": samples, "states": counts})
    return rows


def sample_range(capture: TimedCapture, from_s: float, to_s: float) -> tuple[int, int]:
    """The rounds [begin, end) placed in [from_s, to_s); ProfileError for a bad window."""
    for name, value in (("from", from_s), ("to", to_s)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProfileError(f"the window's `{name}` must be seconds, not {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ProfileError(f"the window's `{name}` must be 0 or more seconds, not {value!r}")
    if to_s <= from_s:
        raise ProfileError(f"the window must end after it starts ({from_s:g} to {to_s:g} s)")
    return capture.track.round_at(from_s), capture.track.round_at(to_s)
