"""Regression judgement: did a capture move away from its baseline, and where in a
series of captures did a share shift?

Input: stats dicts as a capture stores them (contract 2 without `flamegraph`):
`total_samples`, `states`, `categories`, `top_self`, `top_total`, or a step-thread view
of one (comparable.step_view: `states` with `user_callers`, `functions` of the user's
code). A capture without `states` has no state rows. Output: TypedDicts (`Judgement`,
`SeriesShift`) that the dashboard stores as JSON.

Pairs. Every row compared (each thread state, each category, and the frames of the
top `top_frames` of either side's `top_self` and `top_total`) gets a two-proportion
z-test (pooled, two-sided) and a Newcombe interval for its change (compare/captures.py). The
p-values of all rows compared are corrected together by Benjamini–Hochberg at
`false_discovery_rate`; a row *moved* when its adjusted p-value is below it AND its
change is at least `min_effect_points`. py-spy's samples are autocorrelated (a wait
spans many), so where both captures keep time each share counts samples / its design
effect (timed/design_effects.py, measured over time blocks; intervals.effective): the z-test and the
interval are then those of that many independent draws. Without time (an import, an
older capture) the samples are treated as independent, and `options.intervals` says so.

Series of captures: stats/change_points.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ..core.frames import frame_key
from ..rules.state_rules import STATES
from ..stats.intervals import difference_p, effective, newcombe_interval
from ..stats.multiple_testing import benjamini_hochberg
from ..thresholds import (
    FALSE_DISCOVERY_RATE,
    JUDGE_MIN_SAMPLES,
    MIN_EFFECT_POINTS,
    RETURN_FRACTION,
)
from ..timed.design_effects import blocks_of, effect_of, stored_effects
from .captures import ShareSide, list_complete, share_side

CHANGED = "changed"
UNCHANGED = "unchanged"
TOO_FEW = "too few samples"
Verdict = Literal["changed", "unchanged", "too few samples"]
Kind = Literal["state", "category", "self", "total", "function"]
LISTS = {"self": ("top_self", "frame"), "total": ("top_total", "frame"),
         "function": ("functions", "function")}  # fmt: skip
"""Kinds of rows read from a truncated list: (its stats field, the row's name field)."""
MAX_TRACKED_CATEGORIES = 20


@dataclass(frozen=True)
class JudgeOptions:
    """How strict a watch is (the defaults and their reasons: thresholds.py)."""

    min_effect_points: float = MIN_EFFECT_POINTS
    """A row moves only when its share changed by at least this many points."""
    false_discovery_rate: float = FALSE_DISCOVERY_RATE
    """Benjamini–Hochberg level across all rows compared of one pair."""
    min_samples: int = JUDGE_MIN_SAMPLES
    """Fewer samples on either side: too few to judge, nothing is said."""
    top_frames: int = 15
    """Frames compared: the top this many of each side's top_self and top_total."""
    dependent: bool = True
    """Benjamini–Yekutieli (any dependence) instead of plain Benjamini–Hochberg: rows
    share samples (a frame, its category, its state), so they are not independent."""


class Row(TypedDict):
    """One share compared: `key` is `kind:name`; a side known only as a bound (a frame
    absent from that side's top list) has `bound` "before below" or "after below"."""

    key: str
    kind: Kind
    name: str
    before: ShareSide
    after: ShareSide
    delta_points: float
    delta_low: float
    delta_high: float
    p_value: float
    q_value: float
    bound: str
    moved: bool
    aliases: list[str]
    where: str
    """The user's code it points at: a function's line, a state's top user caller."""


class Judgement(TypedDict):
    verdict: Verdict
    reason: str
    rows_compared: int
    moved: list[Row]
    rows: list[Row]
    options: dict[str, float | str]


class Count(TypedDict):
    samples: int
    exact: bool


# --- rows ------------------------------------------------------------------------------


def share_counts(stats: Mapping[str, Any], top_frames: int = 15) -> dict[str, Count]:
    """Every comparable share of one capture, `kind:name` → sample count.

    Frames beyond `top_frames` of a list are left out; a frame that the other side
    lists but this side does not is filled in by `_fill_bounds`.
    """
    counts: dict[str, Count] = {}
    states = stats.get("states")
    if states:
        for state in STATES:
            counts[f"state:{state}"] = {"samples": 0, "exact": True}
        for row in states:
            counts[f"state:{row['state']}"] = {"samples": int(row["samples"]), "exact": True}
    for row in stats.get("categories") or []:
        counts[f"category:{row['category']}"] = {"samples": int(row["samples"]), "exact": True}
    for kind, (field, name) in LISTS.items():
        for row in (stats.get(field) or [])[:top_frames]:
            key = f"{kind}:{frame_key(str(row[name]))}"
            counts[key] = {"samples": int(row["samples"]), "exact": True}
    return counts


def row_key(kind: str, name: str) -> str:
    """`kind:name` as rows and alerts are keyed: a frame or function by frames.frame_key,
    so a capture stored with full paths and one named as py-spy names frames meet."""
    return f"{kind}:{frame_key(name)}" if kind in LISTS else f"{kind}:{name}"


def labels(*sides: Mapping[str, Any]) -> dict[str, str]:
    """Each frame or function row's key -> its name as the latest side writes it."""
    named: dict[str, str] = {}
    for stats in sides:
        for kind, (field, name) in LISTS.items():
            for row in stats.get(field) or []:
                named[row_key(kind, str(row[name]))] = str(row[name])
    return named


def _fill_bounds(stats: Mapping[str, Any], own: dict[str, Count], other: Iterable[str]) -> None:
    """A frame the other side lists: its count here; when this side's list lacks it, 0
    if the list is complete (compare.list_complete), else the smallest count of the
    list as an upper bound (a truncated list says no more)."""
    for key in other:
        kind, _, name = key.partition(":")
        if key in own or kind not in LISTS:
            continue
        field, named = LISTS[kind]
        rows = stats.get(field) or []
        found = next((r for r in rows if row_key(kind, str(r[named])) == key), None)
        if found is not None:
            own[key] = {"samples": int(found["samples"]), "exact": True}
        elif list_complete(stats, field):
            own[key] = {"samples": 0, "exact": True}
        else:
            floor = min((int(r["samples"]) for r in rows), default=0)
            own[key] = {"samples": floor, "exact": False}


def paired_counts(
    before: Mapping[str, Any], after: Mapping[str, Any], top_frames: int
) -> dict[str, tuple[Count, Count]]:
    """Rows measured on both sides (a category of another keyword set is not)."""
    sides = [share_counts(before, top_frames), share_counts(after, top_frames)]
    _fill_bounds(before, sides[0], sides[1])
    _fill_bounds(after, sides[1], sides[0])
    keys = [k for k in dict.fromkeys([*sides[0], *sides[1]]) if k in sides[0] and k in sides[1]]
    return {k: (sides[0][k], sides[1][k]) for k in keys}


def tracked_counts(
    baseline: Mapping[str, Any], stats: Mapping[str, Any], frames: int = 10
) -> dict[str, list[int]]:
    """The shares a watch's series follows, counted in `stats`: every state, the
    baseline's 20 biggest categories and its top `frames` leaf frames, as
    `key` → [samples, total]. A frame missing from `stats`' list counts at that list's
    smallest count (an upper bound; it is a small share either way)."""
    total = int(stats.get("total_samples") or 0)
    tracked = share_counts(baseline, top_frames=0)
    states = [k for k in tracked if k.startswith("state:")]
    # A keyword set may have many categories: the series follows the biggest ones.
    categories = sorted(
        (k for k in tracked if k.startswith("category:")),
        key=lambda k: (-tracked[k]["samples"], k),
    )[:MAX_TRACKED_CATEGORIES]
    wanted = [*states, *categories]
    wanted += [row_key("self", r["frame"]) for r in (baseline.get("top_self") or [])[:frames]]
    wanted += [
        row_key("function", r["function"]) for r in (baseline.get("functions") or [])[:frames]
    ]
    own = share_counts(stats, top_frames=0)
    _fill_bounds(stats, own, wanted)
    return {key: [own[key]["samples"], total] for key in wanted if key in own}


# --- tests -----------------------------------------------------------------------------


def _row(
    key: str,
    counts: tuple[Count, Count],
    totals: tuple[int, int],
    effects: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] = (None, None),
) -> Row:
    (before, after), (n1, n2) = counts, totals
    x1, x2 = before["samples"], after["samples"]
    kind, _, name = key.partition(":")
    d1, d2 = (effect_of(e, kind, name) for e in effects)
    low, high = newcombe_interval(effective((x1, n1), d1), effective((x2, n2), d2))
    bound = (
        "exact"
        if before["exact"] and after["exact"]
        else ("before below" if not before["exact"] else "after below")
    )
    p = difference_p((x1, n1), (x2, n2), (d1, d2), tuple(blocks_of(e) for e in effects))  # type: ignore[arg-type]
    delta = 100 * (x2 / n2 - x1 / n1)
    # A bound proves only a change away from it: a frame gone from the top list
    # (after below) can prove a drop, one new to it (before below) a rise.
    if (bound == "after below" and delta >= 0) or (bound == "before below" and delta <= 0):
        p = 1.0
    return {
        "key": key,
        "kind": kind,  # type: ignore[typeddict-item]
        "name": name,
        "before": share_side(x1, n1, d1),
        "after": share_side(x2, n2, d2),
        "delta_points": round(delta, 2),
        "delta_low": round(100 * low, 2),
        "delta_high": round(100 * high, 2),
        "p_value": p,
        "q_value": 1.0,
        "bound": bound,
        "moved": False,
        "aliases": [],
        "where": "",
    }


def _distinct(rows: list[Row]) -> list[Row]:
    """One row per pair of counts: rows counting the very same samples on both sides
    (a frame that is always a leaf, in top_self and top_total) are one test, not
    several that would reinforce each other; the others are kept as `aliases`."""
    kept: dict[tuple, Row] = {}
    for row in rows:
        same = (row["before"]["samples"], row["after"]["samples"], row["bound"])
        if same in kept:
            kept[same]["aliases"].append(row["key"])
        else:
            kept[same] = row
    return list(kept.values())


def _named(rows: list[Row]) -> int:
    """Rows by name, aliases included (one test may stand for several names)."""
    return sum(1 + len(r["aliases"]) for r in rows)


def judge(
    before: Mapping[str, Any], after: Mapping[str, Any], options: JudgeOptions = JudgeOptions()
) -> Judgement:
    """Compare `after` with the baseline `before`; see the module docstring."""
    totals = (int(before.get("total_samples") or 0), int(after.get("total_samples") or 0))
    result: Judgement = {
        "verdict": TOO_FEW,
        "reason": "",
        "rows_compared": 0,
        "moved": [],
        "rows": [],
        "options": {
            "min_effect_points": options.min_effect_points,
            "false_discovery_rate": options.false_discovery_rate,
            "min_samples": options.min_samples,
            "correction": "Benjamini-Yekutieli" if options.dependent else "Benjamini-Hochberg",
        },
    }
    if min(totals) < options.min_samples:
        side = "baseline" if totals[0] < options.min_samples else "capture"
        result["reason"] = (
            f"too few samples to judge: the {side} has {min(totals)}, "
            f"at least {options.min_samples} are needed"
        )
        return result
    pairs = paired_counts(before, after, options.top_frames)
    effects = (stored_effects(before), stored_effects(after))
    result["options"]["intervals"] = (
        "design effects over time blocks" if all(effects) else "independent samples"
    )
    rows = _distinct([_row(k, c, totals, effects) for k, c in pairs.items()])
    named = labels(before, after)
    for row in rows:
        row["name"] = named.get(row["key"], row["name"])
    adjusted = benjamini_hochberg([r["p_value"] for r in rows], dependent=options.dependent)
    for row, q in zip(rows, adjusted, strict=True):
        row["q_value"] = q
        row["moved"] = (
            q < options.false_discovery_rate
            and abs(row["delta_points"]) >= options.min_effect_points
        )
    rows.sort(key=lambda r: (not r["moved"], -abs(r["delta_points"]), r["key"]))
    for row in rows:
        row["where"] = where(row, before, after)
    moved = [r for r in rows if r["moved"]]
    compared = _named(rows)
    result.update(verdict=CHANGED if moved else UNCHANGED, rows_compared=compared)
    result.update(moved=moved, rows=rows)
    said = f"{_named(moved)} of" if moved else "none of"
    result["reason"] = f"{said} {compared} rows moved ({len(rows)} distinct tests)"
    return result


def returned(row: Row | None, direction: int, min_effect_points: float) -> bool:
    """Whether a row that moved in `direction` (+1 up, -1 down) is back: its change
    in that direction is now under RETURN_FRACTION of the minimum effect (hysteresis, so a
    change sitting at the threshold does not open and close alerts capture after capture)."""
    if row is None:
        return False
    return direction * row["delta_points"] < min_effect_points * RETURN_FRACTION


def row_label(row: Mapping[str, Any]) -> str:
    """`host sync` for a state, the category's name, or `frame (self)`."""
    name = str(row["name"])
    if row["kind"] == "state":
        return name.replace("_", " ")
    if row["kind"] == "category":
        return f"{name} (category)"
    if row["kind"] == "function":
        return name
    return f"{name} ({row['kind']})"


def where(row: Row, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """The line of the user's code a row points at: a function's hottest line; for a
    state, its top user caller on the side where it is larger ('' when unknown)."""
    if row["kind"] == "function":
        for stats in (after, before):
            found = next(
                (
                    f
                    for f in stats.get("functions") or []
                    if row_key("function", f["function"]) == row["key"]
                ),
                None,
            )
            if found:
                return str(found["frame"])
        return ""
    if row["kind"] != "state":
        return ""
    side = after if row["delta_points"] >= 0 else before
    state = next((s for s in side.get("states") or [] if s["state"] == row["name"]), None)
    callers = (state or {}).get("user_callers") or []
    return str(callers[0]["frame"]) if callers else ""
