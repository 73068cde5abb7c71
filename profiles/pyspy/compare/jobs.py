"""Two whole-job captures of one job side by side: before (`a`) and after (`b`).

Inputs are what the dashboard stores per whole-job capture: its job report (job/report.py:
`ranks` with their step threads' `states`, `straggler`, `classes`, `findings`) and,
for the functions, each rank's step-thread user functions (`RankFunctions`: the
rank's step-thread samples and {function: (samples, frame)}). Nothing re-reads raw
samples, so 64 ranks against 64 is a few thousand additions.

- Ranks are aligned by name (their role, `rank-3`); roles only one side has are
  listed apart (`only_a`, `only_b`) and compared nowhere.
- Per shared role and pooled over every shared role's step threads: each state's
  share before and after, the difference, its 95% Newcombe interval and the verdict
  of compare/captures.py (a "real change" only when the interval excludes 0 and it stands for
  its whole table: Holm at 1% over the table's rows). Ranks that keep time carry their
  step threads' design effects (`design_effect`, timed/design_effects.py): each share counts its
  samples over them, pooled over ranks by samples.
- Findings by rule and rank: `resolved` (a rule held on a rank before, not after),
  `new`, `persisting`.
- Classes: per class of ranks (the after capture's classes), the states of its step
  threads pooled, as for every shared role (`classes`).
- Functions: per class of ranks (the after capture's classes), the user functions
  whose share of the class's step-thread samples moved most, beyond noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ..core.frames import frame_key
from ..count.functions import function_name
from ..rules.state_rules import STATES
from ..stats.intervals import pooled_effect
from ..timed.design_effects import blocks_of, effect_of
from .captures import REAL_CHANGE, family_verdicts, share_row, share_side

RankFunctions = tuple[int, Mapping[str, tuple[int, str]]]
"""A rank's step-thread samples and {user function: (samples, frame)}."""
TOP_FUNCTIONS = 5
"""Functions listed per class of ranks, the largest moves first."""


class StateChange(TypedDict):
    state: str
    a_percent: float | None
    b_percent: float | None
    delta: float | None
    interval: list[float] | None
    verdict: str


class RoleChange(TypedDict):
    role: str
    a: int | None
    b: int | None
    states: list[StateChange]


class ClassChange(TypedDict):
    label: str
    roles: int
    states: list[StateChange]


class FindingChange(TypedDict):
    rule: str
    title: str
    severity: str
    ranks: list[str]


class FunctionChange(TypedDict):
    ranks: list[str]
    label: str
    function: str
    frame: str
    a_percent: float
    b_percent: float
    delta: float | None
    interval: list[float] | None
    verdict: str


def compare_jobs(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    functions_a: Mapping[str, RankFunctions] | None = None,
    functions_b: Mapping[str, RankFunctions] | None = None,
    *,
    roles: Sequence[str] | None = None,
    function_classes: Sequence[tuple[str, list[str]]] | None = None,
) -> dict[str, Any]:
    """The whole-job comparison of report `a` (before) and `b` (after): module doc.

    `roles`: the shared roles to compare one by one, in that order (default: every
    shared role; `pooled` and `classes` always pool them all); `function_classes`:
    (label, ranks) whose functions are pooled (default: compared_classes, every rank)."""
    ranks_a = {r["name"]: r for r in a.get("ranks") or []}
    ranks_b = {r["name"]: r for r in b.get("ranks") or []}
    shared = [name for name in ranks_b if name in ranks_a]
    captures_a, captures_b = a.get("captures") or {}, b.get("captures") or {}
    shown = shared if roles is None else [r for r in roles if r in ranks_a and r in ranks_b]
    by_role: list[RoleChange] = [
        {
            "role": name,
            "a": captures_a.get(name),
            "b": captures_b.get(name),
            "states": state_changes([ranks_a[name]], [ranks_b[name]]),
        }
        for name in shown
    ]
    classes = compared_classes(b, a)
    return {
        "roles": by_role,
        "pooled": {
            "roles": len(shared),
            "states": state_changes([ranks_a[n] for n in shared], [ranks_b[n] for n in shared]),
        },
        "classes": [
            ClassChange(
                label=label,
                roles=len(names),
                states=state_changes([ranks_a[n] for n in names], [ranks_b[n] for n in names]),
            )
            for label, names in classes
        ],
        "only_a": [name for name in ranks_a if name not in ranks_b],
        "only_b": [name for name in ranks_b if name not in ranks_a],
        "straggler": {"a": a.get("straggler"), "b": b.get("straggler")},
        "findings": finding_changes(a.get("findings") or [], b.get("findings") or []),
        "functions": function_changes(
            classes if function_classes is None else function_classes,
            functions_a or {},
            functions_b or {},
            _effects(ranks_a),
            _effects(ranks_b),
        ),
    }


def compared_classes(
    after: Mapping[str, Any], before: Mapping[str, Any]
) -> list[tuple[str, list[str]]]:
    """(label, ranks) of the classes the comparison pools by: the after report's classes
    (the before one's when the after has none), keeping the roles both reports have;
    one class of every shared role when neither has classes."""
    names_a = {r["name"] for r in before.get("ranks") or []}
    shared = {r["name"] for r in after.get("ranks") or [] if r["name"] in names_a}
    return _classes(after, before, shared)


def state_changes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[StateChange]:
    """Each state either side saw, in STATES order, over the given ranks pooled."""
    counts_a, total_a = _state_counts(before)
    counts_b, total_b = _state_counts(after)
    effects_a, effects_b = _effects(before), _effects(after)
    rows = []
    for state in STATES:
        if not counts_a.get(state) and not counts_b.get(state):
            continue
        rows.append(
            share_row(
                state,
                _side(counts_a.get(state, 0), total_a, effects_a, list(effects_a), "state", state)
                if total_a
                else None,
                _side(counts_b.get(state, 0), total_b, effects_b, list(effects_b), "state", state)
                if total_b
                else None,
            )
        )
    return [_change(row["name"], row) for row in family_verdicts(rows)]


def _effects(ranks: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{role: (its step samples, its design effects or None)} of report ranks."""
    rows = ranks.values() if isinstance(ranks, Mapping) else ranks
    return {r["name"]: (int(r.get("samples") or 0), r.get("design_effect")) for r in rows}


def _side(
    samples: int,
    total: int,
    effects: Mapping[str, Any] | None,
    ranks: Sequence[str],
    kind: str,
    name: str,
):
    """The share over `ranks` pooled, counted over their design effects (pooled by
    samples, intervals.pooled_effect) and the fewest blocks among them."""
    found = [effects[r] for r in ranks if effects and r in effects]
    effect = pooled_effect((n, effect_of(e, kind, name)) for n, e in found)
    blocks = [b for _, e in found if (b := blocks_of(e))]
    return share_side(samples, total, effect, min(blocks) if len(blocks) == len(found) else None)


def _state_counts(ranks: Sequence[Mapping[str, Any]]) -> tuple[dict[str, int], int]:
    counts: dict[str, int] = {}
    total = 0
    for rank in ranks:
        total += int(rank.get("samples") or 0)
        for row in rank.get("states") or []:
            counts[row["state"]] = counts.get(row["state"], 0) + int(row.get("samples") or 0)
    return counts, total


def _change(name: str, row: Mapping[str, Any]) -> StateChange:
    low, high = row["delta_low"], row["delta_high"]
    return {
        "state": name,
        "a_percent": row["before"]["percent"] if row["before"] else None,
        "b_percent": row["after"]["percent"] if row["after"] else None,
        "delta": row["delta_points"],
        "interval": None if low is None else [low, high],
        "verdict": row["verdict"],
    }


def finding_changes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> dict[str, list[FindingChange]]:
    """Findings by rule and rank: resolved, new and persisting, one entry per rule."""
    held_a, held_b = _held(before), _held(after)
    result: dict[str, list[FindingChange]] = {"resolved": [], "new": [], "persisting": []}
    for rule in dict.fromkeys([*held_b, *held_a]):
        ranks_a, ranks_b = held_a.get(rule, ({}, []))[1], held_b.get(rule, ({}, []))[1]
        finding = held_b.get(rule, held_a.get(rule))[0]  # type: ignore[index]
        for kind, ranks in (
            ("new", [r for r in ranks_b if r not in ranks_a]),
            ("persisting", [r for r in ranks_b if r in ranks_a]),
            ("resolved", [r for r in ranks_a if r not in ranks_b]),
        ):
            if ranks:
                source = held_a[rule][0] if kind == "resolved" else finding
                result[kind].append(
                    {
                        "rule": rule,
                        "title": str(source.get("title", rule)),
                        "severity": str(source.get("severity", "info")),
                        "ranks": ranks,
                    }
                )
    return result


def _held(findings: Sequence[Mapping[str, Any]]) -> dict[str, tuple[Mapping[str, Any], list]]:
    """{rule: (its first finding, the ranks it holds on)}; a finding naming no rank holds
    on the whole job ("job")."""
    held: dict[str, tuple[Mapping[str, Any], list]] = {}
    for finding in findings:
        first, ranks = held.setdefault(finding["rule"], (finding, []))
        for rank in finding.get("ranks") or ["job"]:
            if rank not in ranks:
                ranks.append(rank)
    return held


def _classes(
    after: Mapping[str, Any], before: Mapping[str, Any], shared: set[str]
) -> list[tuple[str, list[str]]]:
    """(label, shared ranks) per class of the after capture (the before one's when the
    after has none); one class of every shared rank when neither has classes."""
    classes = after.get("classes") or before.get("classes") or []
    found = [(c["label"], [r for r in c["ranks"] if r in shared]) for c in classes]
    found = [(label, ranks) for label, ranks in found if ranks]
    return found or ([("all ranks", sorted(shared))] if shared else [])


def function_changes(
    classes: Sequence[tuple[str, list[str]]],
    functions_a: Mapping[str, RankFunctions],
    functions_b: Mapping[str, RankFunctions],
    effects_a: Mapping[str, Any] | None = None,
    effects_b: Mapping[str, Any] | None = None,
) -> list[FunctionChange]:
    """Per class, the user functions whose share moved beyond noise, largest first."""
    rows: list[FunctionChange] = []
    for label, ranks in classes:
        total_a, by_a = _pool_functions(functions_a, ranks)
        total_b, by_b = _pool_functions(functions_b, ranks)
        if not total_a or not total_b:
            continue
        moved = []
        tested = []
        for function in sorted(by_a.keys() | by_b.keys()):
            samples_a, frame_a = by_a.get(function, (0, ""))
            samples_b, frame_b = by_b.get(function, (0, ""))
            row = share_row(
                function,
                _side(samples_a, total_a, effects_a, ranks, "function", function),
                _side(samples_b, total_b, effects_b, ranks, "function", function),
            )
            tested.append((row, frame_a, frame_b))
        family_verdicts([row for row, _, _ in tested])
        for row, frame_a, frame_b in tested:
            function = row["name"]
            if row["verdict"] != REAL_CHANGE:  # the page lists what moved, not noise
                continue
            change = _change(function, row)
            moved.append(
                {
                    "ranks": list(ranks),
                    "label": label,
                    "function": function_name(frame_b or frame_a) or function,
                    "frame": frame_b or frame_a,
                    "a_percent": change["a_percent"] or 0.0,
                    "b_percent": change["b_percent"] or 0.0,
                    "delta": change["delta"],
                    "interval": change["interval"],
                    "verdict": change["verdict"],
                }
            )
        moved.sort(key=_move_order)
        rows += moved[:TOP_FUNCTIONS]
    return rows


def _move_order(row: FunctionChange) -> tuple[float, str]:
    return -abs(row["delta"] or 0), row["function"]


def _pool_functions(
    tables: Mapping[str, RankFunctions], ranks: Sequence[str]
) -> tuple[int, dict[str, tuple[int, str]]]:
    total, pooled = 0, {}
    for rank in ranks:
        if rank not in tables:
            continue
        samples, functions = tables[rank]
        total += samples
        for function, (count, frame) in functions.items():
            before = pooled.get(function, (0, frame))
            pooled[function] = (before[0] + count, before[1] or frame)
    return total, pooled


def rank_functions(stats: Mapping[str, Any]) -> RankFunctions:
    """A rank's step-thread user functions from its stored stats (`step_threads`,
    `thread_functions`), keyed by frames.frame_key (a capture stored with full paths
    meets one named as py-spy names frames); (0, {}) when it has none."""
    step = stats.get("step_threads") or {}
    tids = {str(t) for t in step.get("tids") or []}
    functions: dict[str, tuple[int, str]] = {}
    best: dict[str, int] = {}
    for row in stats.get("thread_functions") or []:
        if str(row.get("tid")) not in tids:
            continue
        for fn in row.get("functions") or []:
            name, count = frame_key(str(fn["function"])), int(fn["samples"])
            total, frame = functions.get(name, (0, fn["frame"]))
            if count > best.get(name, 0):  # the frame of the thread that runs it most
                best[name], frame = count, fn["frame"]
            functions[name] = (total + count, frame)
    return int(step.get("samples") or 0), functions
