"""What a watch compares: the step threads' view of a capture, and whether two
captures were taken with settings that allow comparing their shares at all.

Input: stats dicts as a capture stores them (`step_threads` with its pooled `states`,
`threads` with their states' `user_callers`, `thread_functions`), and each capture's
py-spy settings as a mapping (`idle`, `native`, `gil`, `threads`, `subprocesses`:
booleans; `rate`: samples a second; a setting that is not known is absent).
Output: a stats-shaped dict regression.judge reads, and a sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..count.functions import MAX_THREADS, TOP_FUNCTIONS, function_name
from ..rules.step_threads import pool
from ..timed.design_effects import scope_effects
from .jobs import rank_functions

STEP_THREADS = "step threads"
ALL_THREADS = "all threads"
SHARE_SETTINGS = ("idle", "native", "gil", "threads", "subprocesses")
"""Switches that change which samples py-spy keeps, so every share moves with them."""
MAX_RATE_RATIO = 2.0
"""Rates further apart than this change how often short waits are seen."""


def step_view(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The capture as the findings see it: the step threads' samples, their states (each
    with its user callers) and their user functions (`functions`, inclusive). A capture
    stored before step threads were kept is judged whole (`scope` says which)."""
    step = stats.get("step_threads") or {}
    if not step.get("samples"):
        return {**stats, "scope": ALL_THREADS}
    tids = {str(t) for t in step.get("tids") or []}
    callers = pool(t for t in stats.get("threads") or [] if str(t["tid"]) in tids).callers
    states = [
        {**row, "user_callers": _top(callers.get(row["state"]) or {})}
        for row in step.get("states") or []
    ]
    _, functions = rank_functions(stats)
    ranked = sorted(functions.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return {
        "total_samples": int(step["samples"]),
        "states": states,
        "functions": [
            {"function": function_name(frame) or f, "frame": frame, "samples": n}
            for f, (n, frame) in ranked
        ],
        "complete": {"functions": _functions_complete(stats, tids)},
        "scope": STEP_THREADS,
        "step_thread_names": list(step.get("names") or []),
        "design_effects": scope_effects(stats, "step"),
    }


def _functions_complete(stats: Mapping[str, Any], tids: set[str]) -> bool:
    """Whether the step threads' functions are all listed, so one absent had 0 samples:
    every step thread has its row, each shorter than its cap (functions.py)."""
    rows = {str(r.get("tid")): r for r in stats.get("thread_functions") or []}
    if not tids <= rows.keys() and len(rows) >= MAX_THREADS:
        return False  # a step thread may have been cut with the threads past the cap
    return all(len(rows[t].get("functions") or []) < TOP_FUNCTIONS for t in tids if t in rows)


def pair_views(
    baseline: Mapping[str, Any], capture: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both captures' step views, or both whole when either was stored without step
    threads: shares of different scopes are not comparable."""
    views = (step_view(baseline), step_view(capture))
    if views[0]["scope"] == views[1]["scope"]:
        return views
    return {**baseline, "scope": ALL_THREADS}, {**capture, "scope": ALL_THREADS}


def _top(callers: Mapping[str, int]) -> list[dict[str, Any]]:
    ranked = sorted(callers.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return [{"frame": frame, "samples": n} for frame, n in ranked]


def settings_mismatch(baseline: Mapping[str, Any], capture: Mapping[str, Any]) -> str:
    """'' when the two captures' settings allow comparing shares, else why not:
    `not comparable: the baseline used --idle, this capture did not`."""
    problems = []
    for name in SHARE_SETTINGS:
        before, after = baseline.get(name), capture.get(name)
        if before is None or after is None or bool(before) == bool(after):
            continue
        flag = f"--{name}"
        problems.append(
            f"the baseline used {flag}, this capture did not"
            if before
            else f"this capture used {flag}, the baseline did not"
        )
    before, after = baseline.get("rate"), capture.get("rate")
    if before and after and max(before, after) > MAX_RATE_RATIO * min(before, after):
        problems.append(
            f"the baseline sampled {before:g} times a second, this capture {after:g} "
            f"(more than {MAX_RATE_RATIO:g}× apart)"
        )
    return f"not comparable: {'; '.join(problems)}" if problems else ""
