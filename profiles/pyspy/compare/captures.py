"""Honest comparison of two captures: shares with intervals, and differential trees.

Inputs are what a capture stores: its stats (contract 2 without `flamegraph`) and its
flamegraph tree ({name, value, children}). Nothing here re-reads raw samples.

Every share gets a 95% Wilson score interval from its sample count, and every change a
Newcombe hybrid score interval (Newcombe 1998, method 10), built from the two Wilson
intervals. Why these: a Wald (normal) interval collapses to zero width when a share is
0% or 100% (a keyword absent from one capture) and under-covers for the small shares
that matter here (an allocator at 0.4%); Wilson does neither, never leaves [0, 100],
and Newcombe's interval for the difference is consistent with the per-share intervals
the page shows beside it. A change is a "real change" only when its interval excludes 0
and, since a table compares many rows at once, its Holm-adjusted p-value over the rows
of its table is at most FAMILY_ERROR (1%): two captures of an unchanged job then show a
real change anywhere in a table at most 1% of the time (`family_verdicts`).

py-spy samples of one process are autocorrelated (a 200 ms sync spans several samples),
so counting every sample as an independent draw makes intervals too narrow. A capture
that keeps time carries each share's *design effect*, measured over time blocks
(timed/design_effects.py: batch means), and every interval here counts `samples / design effect`
(`effective`): Wilson and Newcombe on the effective sample size. A capture without time
(an import, an older capture) keeps the independent intervals, and `method` says so.

Direction: `before` is the earlier capture, `after` the later; every delta is
after minus before, in percentage points.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NotRequired, TypedDict

from ..core.frames import frame_key
from ..stats.intervals import difference_p, effective, newcombe_interval, wilson_interval
from ..stats.multiple_testing import holm_adjusted
from ..thresholds import FAMILY_ERROR
from ..timed.design_effects import blocks_of, effect_of, scope_effects

SHORTEST_TOP_LIST = 30
"""The smallest cap a top list is cut at (analysis.py never lists fewer than 30 frames
when there are more): a list shorter than this holds every frame there was."""
NOT_MEASURED = "not measured"
REAL_CHANGE = "real change"
WITHIN_NOISE = "within noise"
Verdict = Literal["real change", "within noise", "not measured"]


class ShareSide(TypedDict):
    """One capture's share of samples, in percent, with its 95% Wilson interval (on the
    effective sample size when `design_effect` is given: that many samples count as
    one independent draw)."""

    samples: int
    total: int
    percent: float
    low: float
    high: float
    design_effect: NotRequired[float]
    blocks: NotRequired[int]


class ShareRow(TypedDict):
    """A category or keyword in both captures; a side is None when it was not measured."""

    name: str
    category: NotRequired[str]
    before: ShareSide | None
    after: ShareSide | None
    delta_points: float | None
    delta_low: float | None
    delta_high: float | None
    verdict: Verdict


class FrameRow(TypedDict):
    """A top frame. A side missing from its top list has `percent` None and `below`
    (the smallest share its list shows), so the delta is a bound: `delta_bound` says
    whether the true change is "at most" or "at least" `delta_points`."""

    frame: str
    before_percent: float | None
    after_percent: float | None
    before_below: float | None
    after_below: float | None
    delta_points: float
    delta_bound: Literal["exact", "at most", "at least"]
    verdict: Verdict


class LagNote(TypedDict):
    side: Literal["before", "after"]
    verdict: str
    max_behind_s: float | None
    recommended_rate: int | None


class Comparison(TypedDict):
    before_samples: int
    after_samples: int
    states: list[ShareRow]
    categories: list[ShareRow]
    keywords: list[ShareRow]
    top_self: list[FrameRow]
    top_total: list[FrameRow]
    lag_warnings: list[LagNote]
    method: dict[str, str]


class DiffNode(TypedDict):
    """A node of the shown tree. `delta` is after-share minus before-share of the same
    path, in points (None for pruned-mass nodes, whose path means nothing)."""

    name: str
    value: int
    share: float
    other_value: int
    delta: float | None
    children: list[DiffNode]


METHOD = {
    "share": "Wilson score interval, 95%",
    "difference": "Newcombe hybrid score interval (method 10), 95%",
    "verdict": "real change when the difference interval excludes 0 and the change is "
    "beyond noise for its whole table: Holm-adjusted p-value at most 1% over the table's rows",
    "assumption": "samples treated as independent; py-spy samples are autocorrelated, "
    "so the intervals are optimistic",
}
BLOCKS_ASSUMPTION = (
    "samples counted as samples / design effect, each share's design effect measured "
    "over time blocks of its capture (batch means), so autocorrelated waits are not "
    "counted as independent draws"
)
PARTLY_ASSUMPTION = (
    "design effects measured over time blocks where a capture keeps time; {side} keeps "
    "none (an import, or taken before flamedeck kept time), so its samples are treated "
    "as independent and those intervals are optimistic"
)


def method_of(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, str]:
    """How the intervals of two captures were computed: over time blocks when both keep
    time (`design_effect` in their stats' time), else which side is independent."""
    missing = [
        side
        for side, stats in (("before", before), ("after", after))
        if not scope_effects(stats, "all")
    ]
    if not missing:
        return {**METHOD, "assumption": BLOCKS_ASSUMPTION}
    if len(missing) == 2:
        return dict(METHOD)
    return {**METHOD, "assumption": PARTLY_ASSUMPTION.format(side=f"the {missing[0]} side")}


def change_verdict(before: tuple[float, float], after: tuple[float, float]) -> Verdict:
    """ "real change" when the difference interval excludes 0, else "within noise"."""
    if before[1] <= 0 or after[1] <= 0:
        return NOT_MEASURED
    low, high = newcombe_interval(before, after)
    return REAL_CHANGE if low > 0 or high < 0 else WITHIN_NOISE


def _points(fraction: float) -> float:
    return round(100 * fraction, 2)


def share_side(
    samples: int, total: int, design_effect: float = 1.0, blocks: int | None = None
) -> ShareSide:
    low, high = wilson_interval(*effective((samples, total), design_effect))
    share = samples / total if total else 0.0
    side: ShareSide = {
        "samples": samples,
        "total": total,
        "percent": _points(share),
        "low": _points(low),
        "high": _points(high),
    }
    if design_effect > 1.0:
        side["design_effect"] = round(design_effect, 2)
    if blocks:
        side["blocks"] = blocks
    return side


def side_p(before: ShareSide, after: ShareSide) -> float:
    """difference_p of two sides, each with its design effect and blocks."""
    return difference_p(
        (before["samples"], before["total"]),
        (after["samples"], after["total"]),
        (before.get("design_effect", 1.0), after.get("design_effect", 1.0)),
        (before.get("blocks"), after.get("blocks")),
    )


def family_verdicts(rows: list[ShareRow], alpha: float = FAMILY_ERROR) -> list[ShareRow]:
    """The rows of one table as one family: a row stays a "real change" only when its
    Holm-adjusted p-value (side_p) is at most `alpha`, so an unchanged job's comparison
    calls any row of the table a real change at most that often (rows share samples:
    Holm holds under any dependence)."""
    tested = [
        r
        for r in rows
        if r["verdict"] != NOT_MEASURED and (r["before"]["samples"] or r["after"]["samples"])  # type: ignore[index]
    ]
    adjusted = holm_adjusted([side_p(r["before"], r["after"]) for r in tested])  # type: ignore[arg-type]
    for row, p in zip(tested, adjusted, strict=True):
        if p > alpha:
            row["verdict"] = WITHIN_NOISE
    return rows


def side_counts(side: ShareSide) -> tuple[float, float]:
    """A side's (samples, total) as independent draws (its design effect applied)."""
    return effective((side["samples"], side["total"]), side.get("design_effect", 1.0))


def share_row(name: str, before: ShareSide | None, after: ShareSide | None) -> ShareRow:
    """Compare one share; a side that was not measured (None) gives no verdict."""
    row: ShareRow = {
        "name": name,
        "before": before,
        "after": after,
        "delta_points": None,
        "delta_low": None,
        "delta_high": None,
        "verdict": NOT_MEASURED,
    }
    if before is None or after is None or not before["total"] or not after["total"]:
        return row
    counts_b, counts_a = side_counts(before), side_counts(after)
    low, high = newcombe_interval(counts_b, counts_a)
    row["delta_points"] = round(after["percent"] - before["percent"], 2)
    row["delta_low"], row["delta_high"] = _points(low), _points(high)
    row["verdict"] = change_verdict(counts_b, counts_a)
    return row


def _rows_by(rows: Iterable[Mapping[str, Any]], key: str) -> dict[str, Mapping[str, Any]]:
    return {str(r[key]): r for r in rows}


def compare_categories(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ShareRow]:
    """Category shares side by side, biggest move first."""
    return _compare_lists(before, after, "categories", lambda r: str(r["category"]))


def compare_states(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ShareRow]:
    """Thread-state shares side by side with the categories' maths, biggest move first
    ("collective 62% -> 31%"). A side analysed before states were stored is "not
    measured"; a state without samples on either side is left out."""
    rows = _compare_lists(before, after, "states", lambda r: str(r["state"]))
    return [r for r in rows if any(side and side["samples"] for side in (r["before"], r["after"]))]


def compare_keywords(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ShareRow]:
    """Keyword shares side by side; a keyword missing from one side's set is unmeasured."""
    rows = _compare_lists(before, after, "keywords", lambda r: str(r["keyword"]))
    cats = {str(r["keyword"]): str(r["category"]) for s in (before, after) for r in s["keywords"]}
    for row in rows:
        row["category"] = cats[row["name"]]
    return rows


def _compare_lists(before, after, field: str, name_of) -> list[ShareRow]:
    sides = []
    kind = "state" if field == "states" else field
    for stats in (before, after):
        total = int(stats.get("total_samples") or 0)
        rows = stats.get(field) or []
        effects = scope_effects(stats, "all")
        blocks = blocks_of(effects)
        sides.append(
            {
                name_of(r): share_side(
                    int(r["samples"]), total, effect_of(effects, kind, name_of(r)), blocks
                )
                for r in rows
            }
        )
    names = list(dict.fromkeys([*sides[0], *sides[1]]))
    rows = family_verdicts([share_row(n, sides[0].get(n), sides[1].get(n)) for n in names])
    return sorted(rows, key=_row_order)


def _rows_by_key(rows: Iterable[Mapping[str, Any]], key: str) -> dict[str, Mapping[str, Any]]:
    """Rows by frames.frame_key of their `key` field (one name per frame, however named)."""
    return {frame_key(str(r[key])): r for r in rows}


def _row_order(row: ShareRow) -> tuple[int, float, float, str]:
    real = 0 if row["verdict"] == REAL_CHANGE else 1
    shares = [s["percent"] for s in (row["before"], row["after"]) if s]
    return real, -abs(row["delta_points"] or 0.0), -max(shares, default=0.0), row["name"]


def list_complete(stats: Mapping[str, Any], field: str) -> bool:
    """Whether `stats[field]` lists every frame (or function) there was, so one absent
    from it had 0 samples: as its producer says (`complete`), a `top_self` whose leaves
    add up to every sample, or a list shorter than the shortest cap."""
    said = (stats.get("complete") or {}).get(field)
    if said is not None:
        return bool(said)
    rows = stats.get(field) or []
    if field == "top_self" and rows:
        total = int(stats.get("total_samples") or 0)
        return sum(int(r["samples"]) for r in rows) >= total
    return len(rows) < SHORTEST_TOP_LIST


def compare_frames(
    before: Mapping[str, Any], after: Mapping[str, Any], field: str, limit: int = 30
) -> list[FrameRow]:
    """Top frames (`top_self` or `top_total`) of either capture with their change.

    Frames are matched by frames.frame_key, so a capture stored with full paths meets
    one named as py-spy names frames. A truncated list only says that a frame absent
    from it is below its smallest entry; its delta is then a bound, and the verdict
    tests the bound (a real drop to below the bound is a real drop to the true value
    too). A complete list (list_complete) says the frame had 0 samples: exact.
    """
    lists = (before.get(field) or [], after.get(field) or [])
    totals = (int(before.get("total_samples") or 0), int(after.get("total_samples") or 0))
    by_frame = [_rows_by_key(rows, "frame") for rows in lists]
    floors = [
        None if list_complete(stats, field) else min((int(r["samples"]) for r in rows), default=0)
        for stats, rows in zip((before, after), lists, strict=True)
    ]
    names = [str(r["frame"]) for r in lists[1][:limit]] + [
        str(r["frame"]) for r in lists[0][:limit]
    ]
    names = list({frame_key(n): n for n in reversed(names)}.values())[::-1]
    scopes = [scope_effects(s, "all") for s in (before, after)]
    effects = tuple(effect_of(scope, "frame", "") for scope in scopes)
    blocks = tuple(blocks_of(scope) for scope in scopes)
    rows, p_values = [], []
    for name in dict.fromkeys(names):
        row, p = _frame_row(name, by_frame, floors, totals, effects, blocks)
        rows.append(row)
        p_values.append(p)
    for row, p in zip(rows, holm_adjusted(p_values), strict=True):
        if p > FAMILY_ERROR:  # the frames compared are one family (family_verdicts)
            row["verdict"] = WITHIN_NOISE if row["verdict"] == REAL_CHANGE else row["verdict"]
    return sorted(rows, key=lambda r: (-abs(r["delta_points"]), r["frame"]))


def _frame_row(
    name: str,
    by_frame,
    floors: list[int | None],
    totals: tuple[int, int],
    effects: tuple[float, ...] = (1.0, 1.0),
    blocks: tuple[int | None, ...] = (None, None),
) -> tuple[FrameRow, float]:
    key = frame_key(name)
    # Absent from a complete list (no floor): 0 samples, exactly.
    found = [side.get(key, None if floors[i] is not None else {"samples": 0})
             for i, side in enumerate(by_frame)]  # fmt: skip
    counts = [int(f["samples"]) if f else int(floors[i] or 0) for i, f in enumerate(found)]
    shares = [c / t if t else 0.0 for c, t in zip(counts, totals, strict=True)]
    delta = _points(shares[1] - shares[0])
    bound = "exact" if all(found) else ("at most" if found[0] else "at least")
    verdict = change_verdict(
        effective((counts[0], totals[0]), effects[0]), effective((counts[1], totals[1]), effects[1])
    )
    if verdict == REAL_CHANGE and bound != "exact":
        # The bound only proves a change in the direction it limits.
        proves = delta < 0 if bound == "at most" else delta > 0
        verdict = REAL_CHANGE if proves else WITHIN_NOISE
    percent = [_points(s) if f else None for s, f in zip(shares, found, strict=True)]
    below = [None if f else _points(s) for s, f in zip(shares, found, strict=True)]
    p = difference_p((counts[0], totals[0]), (counts[1], totals[1]), effects[:2], blocks[:2])  # type: ignore[arg-type]
    if verdict != REAL_CHANGE:
        p = 1.0
    row: FrameRow = {
        "frame": name,
        "before_percent": percent[0],
        "after_percent": percent[1],
        "before_below": below[0],
        "after_below": below[1],
        "delta_points": delta,
        "delta_bound": bound,
        "verdict": verdict,
    }
    return row, p


def lag_warnings(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[LagNote]:
    """Sides whose sampler fell behind: their shares are biased, say so beside verdicts."""
    notes: list[LagNote] = []
    for side, stats in (("before", before), ("after", after)):
        lag = stats.get("lag")
        if lag and lag.get("verdict") not in (None, "ok"):
            notes.append(
                {
                    "side": side,
                    "verdict": str(lag["verdict"]),
                    "max_behind_s": lag.get("max_behind_s"),
                    "recommended_rate": lag.get("recommended_rate"),
                }
            )
    return notes


def compare_stats(before: Mapping[str, Any], after: Mapping[str, Any]) -> Comparison:
    """Everything the compare page and `GET /api/compare/` show, from two stats dicts."""
    return {
        "before_samples": int(before.get("total_samples") or 0),
        "after_samples": int(after.get("total_samples") or 0),
        "states": compare_states(before, after),
        "categories": compare_categories(before, after),
        "keywords": compare_keywords(before, after),
        "top_self": compare_frames(before, after, "top_self"),
        "top_total": compare_frames(before, after, "top_total"),
        "lag_warnings": lag_warnings(before, after),
        "method": method_of(before, after),
    }


def diff_flamegraph(
    shown: Mapping[str, Any], other: Mapping[str, Any], *, shown_is_after: bool = True
) -> DiffNode:
    """The `shown` tree with each node's change in normalised share against `other`.

    Nodes are matched by path (root→node names). A path missing from `other` counts
    as 0 there, so in the after-tree new frames are all growth, and in the before-tree
    vanished frames are all shrinkage. `delta` is always after minus before (points).
    """
    totals = (int(shown.get("value") or 0), int(other.get("value") or 0))
    root = _diff_node(shown, other, totals, shown_is_after)
    # Iterative: native stacks can be deeper than Python's recursion limit.
    stack = [(root, shown, other)]
    while stack:
        out, node, match = stack.pop()
        kids = _children_by_name(match)
        for child in node.get("children") or []:
            twin = kids.get(frame_key(str(child.get("name"))))
            diffed = _diff_node(child, twin, totals, shown_is_after)
            out["children"].append(diffed)
            stack.append((diffed, child, twin))
    return root


def _diff_node(
    node: Mapping[str, Any],
    match: Mapping[str, Any] | None,
    totals: tuple[int, int],
    shown_is_after: bool,
) -> DiffNode:
    value = int(node.get("value") or 0)
    other_value = int(match.get("value") or 0) if match else 0
    share = value / totals[0] if totals[0] else 0.0
    other_share = other_value / totals[1] if totals[1] else 0.0
    delta = share - other_share if shown_is_after else other_share - share
    return {
        "name": str(node.get("name", "")),
        "value": value,
        "share": _points(share),
        "other_value": other_value,
        "delta": None if "pruned_frames" in node else _points(delta),
        "children": [],
    }


def _children_by_name(node: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    if not node:
        return {}
    return {frame_key(str(c.get("name"))): c for c in node.get("children") or []}


def share_of(stats: Mapping[str, Any] | None, kind: str, name: str) -> ShareSide | None:
    """One category's or keyword's share in stored stats; None when not measured."""
    if not stats:
        return None
    field, key = ("categories", "category") if kind == "category" else ("keywords", "keyword")
    total = int(stats.get("total_samples") or 0)
    for row in stats.get(field) or []:
        if row.get(key) == name:
            return share_side(int(row["samples"]), total)
    return None
