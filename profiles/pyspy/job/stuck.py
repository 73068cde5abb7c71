"""The `stuck` finding: the ranks wait out the window in collectives for ranks that are
elsewhere. That is a hang (or the start of one), not a straggler: a straggler's excess
can be removed from its step, a rank that stands still cannot.

Works on the job's RankViews (straggler.py). Of the ranks with at least MIN_SAMPLES
step-thread samples, a rank *waits* when its whole 95% Wilson interval of waiting share
(the wait model's: collective, or with async collectives also device syncs) is at or
above STUCK_WAIT, and is *elsewhere* when its whole interval lies below STUCK_ELSEWHERE
(both in thresholds.py). The finding holds when some ranks wait, some are elsewhere, and every
measured rank is one or the other; it needs idle samples on every rank (py-spy
`--idle`): without them a blocked rank leaves no sample, and a rank blocked in its own
code cannot be told from one blocked in a collective. It names the ranks elsewhere,
where each stands (its innermost user frame and state with most samples) and where the
others wait (their top collective call site). job/report.py reports it instead of the
`straggler` finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..core.rank_names import ranks_label
from ..core.types import Finding, FrameworkFrame
from ..rules.findings import percent_interval, top_frames
from ..rules.framework import framework_text, site_text, top_for
from ..rules.states import NO_USER_FRAME
from ..stats.intervals import wilson_interval
from ..thresholds import MIN_SAMPLES, STUCK_ELSEWHERE, STUCK_WAIT
from .layout import NO_LAYOUTS, Layouts
from .straggler import (
    BLOCKING_WAITS,
    RankView,
    pool_views,
    waiting,
    waiting_callers,
    waiting_frameworks,
)

SHOWN_ODD = 3
"""Odd ranks whose place the advice spells out before it counts the rest."""


class Stuck(NamedTuple):
    """The ranks elsewhere (`odd`) and the ranks that wait for them."""

    odd: list[RankView]
    waiting: list[RankView]


def find_stuck(views: Sequence[RankView]) -> Stuck | None:
    """Ranks that wait out the window in collectives for ranks elsewhere (module doc)."""
    measured = [v for v in views if v.pooled.samples >= MIN_SAMPLES and v.whole > 0]
    if any(v.stats.get("idle_included") is False for v in measured):
        return None
    shares = [(v, wilson_interval(v.waiting, v.whole)) for v in measured]
    waits = [v for v, (low, _) in shares if 100 * low >= STUCK_WAIT]
    odd = [v for v, (_, high) in shares if 100 * high < STUCK_ELSEWHERE]
    if not waits or not odd or len(waits) + len(odd) != len(measured):
        return None
    return Stuck(odd, waits)


def stuck_finding(
    stuck: Stuck, waits: tuple[str, ...] = BLOCKING_WAITS, places: Layouts = NO_LAYOUTS
) -> Finding:
    """The `stuck` finding (high): who stands where, and where the others wait (in the
    wait model's states `waits`); `places` name the odd ranks' parallel group."""
    waited = waiting(stuck.waiting)
    low, high = percent_interval(*waited)
    value = round(100 * waited[0] / waited[1], 1)
    waits_at = top_frames(waiting_callers(pool_views(stuck.waiting), waits), waited[1])
    there = next((c["frame"] for c in waits_at if c["frame"] != NO_USER_FRAME), None)
    there_in = top_for(waiting_frameworks(pool_views(stuck.waiting), waits), there)
    spots = [(places.named(v.name, [v.name]), *place(v, waits)) for v in stuck.odd]
    framed = [
        (*spot, framework_at(v, spot[1], spot[2])) for v, spot in zip(stuck.odd, spots, strict=True)
    ]
    where = "in collectives" if waits == BLOCKING_WAITS else "at device syncs and in collectives"
    odd_names = [view.name for view in stuck.odd]
    odd, others = places.named(_label(stuck.odd), odd_names), _label(stuck.waiting)
    verb = "stands" if len(spots) == 1 else "stand"
    return {
        "rule": "stuck",
        "severity": "high",
        "title": f"{odd} {verb} {_where(framed)} while the other ranks wait {where}",
        "value": value,
        "interval": [low, high],
        "threshold": STUCK_WAIT,
        "frames": list(
            dict.fromkeys(
                [*(f for _, f, _ in spots if f != NO_USER_FRAME), *([there] if there else [])]
            )
        ),
        "user_callers": _callers(stuck.odd[0], spots[0][2]),
        "advice": f"The job is stuck (or nearly): {others} wait {value:g}% of the window "
        f"{where}"
        + (f" {'in' if there_in else 'at'} {site_text(there, there_in)}" if there else "")
        + f", while {_places(framed)}. Find out why {_label(stuck.odd)} {verb} there "
        "(a lock, a file, its input, a collective it skipped): a faster step will not help. "
        "Dump all ranks to see whether anything moves.",
        "ranks": odd_names,
    }


def place(view: RankView, waits: tuple[str, ...] = BLOCKING_WAITS) -> tuple[str, str]:
    """Where a rank stands: the (user caller, state) outside the waiting states with most
    samples, a frame of the user's code before `(no user frame)`."""
    best: tuple[int, int, str, str] | None = None
    for state, callers in view.pooled.callers.items():
        if state in waits:
            continue
        for frame, samples in callers.items():
            key = (frame != NO_USER_FRAME, samples, frame, state)
            if best is None or key > best:
                best = key
    if best is None:
        main = max(view.pooled.states.items(), key=lambda kv: kv[1], default=("unknown", 0))
        return NO_USER_FRAME, main[0]
    return best[2], best[3]


def framework_at(view: RankView, frame: str, state: str) -> FrameworkFrame | None:
    """The framework frame a rank's (user frame, state) stands in most, if any."""
    return top_for(view.pooled.frameworks.get(state, {}), frame)


def _callers(view: RankView, state: str):
    return top_frames(view.pooled.callers.get(state, {}), view.pooled.samples)


def _places(places: list[tuple[str, str, str, FrameworkFrame | None]]) -> str:
    shown = [f"{name} spends the window in {_spot(frame, state, found)}"
             for name, frame, state, found in places]  # fmt: skip
    extra = len(shown) - SHOWN_ODD
    text = "; ".join(shown[:SHOWN_ODD])
    return text + (f"; and {extra} more rank{'s' if extra > 1 else ''}" if extra > 0 else "")


def _where(places: list[tuple[str, str, str, FrameworkFrame | None]]) -> str:
    """`in `wait_for_lock (train.py:62)` (idle)` when every odd rank stands there (with
    the framework frame that calls it, when any)."""
    spots = {(frame, state) for _, frame, state, _ in places}
    if len(spots) > 1:
        return "outside collectives"
    _, frame, state, found = places[0]
    return f"in {_spot(frame, state, found)}"


def _spot(frame: str, state: str, found: FrameworkFrame | None) -> str:
    """`` `f (x.py:9)` (idle) ``, then `, called from ...` or the framework frame first."""
    if not found:
        return f"`{frame}` ({state})"
    if found["user_inside"] or frame == NO_USER_FRAME:
        user = "" if frame == NO_USER_FRAME else f"`{frame}` ({state}), called from "
        return f"{user}{framework_text(found)}" + ("" if user else f" ({state})")
    return f"{framework_text(found)}, called from `{frame}` ({state})"


def _label(views: Sequence[RankView]) -> str:
    names = [v.name for v in views]
    return names[0] if len(names) == 1 else ranks_label(names)
