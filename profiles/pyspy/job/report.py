"""The whole job: each rank's step threads, the straggler, classes of ranks, findings.

Input is one capture's stats per rank, as `analyze` returns them and the dashboard
stores them (`threads` with `states`, `thread_functions`, `idle_included`, `lag`), so
the app runs this from stored stats without the raw samples.

- Each rank's stats are made whole first (rankstats.well_formed): missing or mistyped
  keys of a stored or failed capture read as empty, so the report never fails on them.
- Step threads per rank: rules.step_threads (named on the run, else the threads
  that make collective calls, ...); a rank's `states` are theirs, added up. A rank
  where neither finds a thread (a rank hung outside collectives has no collective
  samples) takes the threads named as most other ranks' collective step threads (with
  async collectives, also those found by their device calls; `detected_by` "peers"), so
  its idle wait is measured, not dropped.
- The wait model (straggler.py, `wait_model` in the report): "blocking" (gloo, no GPU)
  counts a rank's collective samples as its waiting for peers; "async" (a rank shows
  CUDA or NCCL frames) counts collective + gpu_sync + host_sync, since an NCCL
  collective only enqueues work and the wait surfaces at the next device sync.
- The straggler (straggler.py) is the rank the others wait for: the rank with the
  smallest waiting share, named only when the others' pooled waiting share is past
  COLLECTIVE_WAIT and *every* other rank's waiting share exceeds its share by more than
  STRAGGLER_GAP points over the whole 95% (Newcombe) interval of the difference. One
  peer that waits as little means there is none (null). Without idle samples the rounds
  a step thread left no sample in (blocked) count as waiting too.
- Async only: when no rank is named and every measured rank waits at device syncs past
  COLLECTIVE_WAIT, a slow device and a slow peer cannot be told apart from host stacks;
  the `peer_or_device` finding says so. A host_sync or gpu_sync finding on ranks that
  wait for a named straggler, or that cannot be told, says the sync is where the wait
  surfaces, not its cause.
- Its explanation lists what it does *more* than the others (never what it does
  less): the user functions (thread_functions) and the (state, user call site)
  pairs of its step threads whose share exceeds the others' pooled share over the
  whole interval, by at least EXPLAIN_MIN points, largest first.
- Classes: ranks alike in their step threads' states and user functions (no state's
  share differs beyond noise by more than CLASS_GAP points from the class's first
  rank, nor does a function's that one of the two hardly runs) form one class,
  labelled by its main state and call site and by the user function that sets it
  apart from the other ranks, if any: 64 ranks read as a few lines.
- Findings: every rule of findings.py on the step threads of all ranks added up, and
  on each rank alone (a rule that holds on some ranks only names them), plus the
  `straggler` finding, or, when the other ranks wait out the window in collectives
  for ranks elsewhere, the `stuck` finding instead (stuck.py): a hang is no straggler.
- Layouts (layout.py): when the ranks said where they sit in the job's parallel layout,
  the straggler, the stuck finding and each class also name their parallel group
  (`group`, and in the texts "rank-29 (pipeline stage 3 of data-parallel replica 7)");
  without layouts nothing changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

from ..core.rank_names import natural, ranks_label
from ..core.types import (
    Explanation,
    Finding,
    FrameStat,
    JobClass,
    JobRank,
    JobReport,
    StateStat,
    Straggler,
)
from ..rules.findings import (
    call_site,
    findings_for_threads,
    percent_interval,
    rank_findings,
    severity,
    top_frames,
    with_busy_thread,
)
from ..rules.framework import FRAME_KEYS, framework_text, top_for
from ..rules.state_rules import STATES
from ..rules.step_threads import Pooled
from ..stats.intervals import effective, newcombe_interval
from ..stats.multiple_testing import simultaneous_confidence
from ..thresholds import CLASS_GAP, COLLECTIVE_WAIT, DISTINCT_OTHERS
from .layout import NO_LAYOUTS, Layouts
from .rank_stats import well_formed
from .straggler import (
    BLOCKING_WAITS,
    RankView,
    explain,
    find_straggler,
    function_counts,
    merged_effects,
    peer_or_device_finding,
    pool_views,
    rank_view,
    state_counts,
    surfaced,
    view_effect,
    wait_model,
    waiting,
    waiting_callers,
    waiting_frameworks,
    with_waits,
)
from .stuck import Stuck, find_stuck, stuck_finding


def analyze_job(
    ranks: Sequence[tuple[str, Mapping[str, Any]]],
    step_names: Iterable[str] = (),
    layouts: Mapping[str, Mapping[str, int] | None] | None = None,
) -> JobReport:
    """The whole-job report from each rank's (name, stats) (see the module doc);
    `layouts`: rank name -> its place in the parallel layout, where known."""
    names, places = tuple(step_names), Layouts(layouts)
    views = [rank_view(n, well_formed(s), names) for n, s in ranks]
    views.sort(key=lambda v: natural(v.name))
    model = wait_model(views)
    waits = tuple(model["waiting_states"])
    peers_by = ("collective",) if model["kind"] == "blocking" else ("collective", "device")
    views = [with_waits(v, waits) for v in with_peer_threads(views, names, peers_by)]
    straggler, stuck = find_straggler(views, waits), find_stuck(views)
    if straggler is not None and stuck is not None:
        straggler["stuck"] = True  # so a client reading the straggler alone is not misled
    if straggler is not None and (group := places.place([straggler["name"]])):
        straggler["group"] = group
    return {
        "ranks": [rank_row(v) for v in views],
        "straggler": straggler,
        "wait_model": model,
        "classes": rank_classes(views, places),
        "findings": job_findings(views, straggler, stuck, waits, places),
    }


def with_peer_threads(
    views: list[RankView], names: tuple[str, ...], peers_by: tuple[str, ...] = ("collective",)
) -> list[RankView]:
    """Ranks without step threads take the threads named as most other ranks' collective
    step threads (module doc); with async collectives also those found by their device
    calls, since an NCCL rank's wait shows at its syncs, not in its collectives. The
    others are kept as they are."""
    found = Counter(
        t["name"] for v in views if v.detected_by in peers_by for t in v.threads if t["name"]
    )
    if names or not found:
        return views
    peer = found.most_common(1)[0][0]
    return [
        rank_view(v.name, v.stats, (peer,))._replace(detected_by="peers")
        if v.detected_by == "none" and any(t["name"] == peer for t in v.stats["threads"])
        else v
        for v in views
    ]


def rank_row(view: RankView) -> JobRank:
    threads = [
        {k: t[k] for k in ("name", "tid", "samples", "percent", "states", "active_percent")}
        for t in view.stats["threads"]
    ]
    row: JobRank = {
        "name": view.name,
        "step_threads": [t["name"] or str(t["tid"]) for t in view.threads],
        "detected_by": view.detected_by,
        "samples": view.pooled.samples,
        "states": pooled_states(view.pooled),
        "threads": threads,  # type: ignore[typeddict-item]
    }
    if view.effects:  # the whole-job compare counts shares over them (compare/jobs.py)
        row["design_effect"] = view.effects  # type: ignore[typeddict-item]
    return row


def pooled_states(pooled: Pooled) -> list[StateStat]:
    """Every state in STATES order, percent of the pooled samples, top 5 user callers."""
    whole = pooled.samples
    return [
        {
            "state": state,
            "samples": pooled.states.get(state, 0),
            "percent": round(100 * pooled.states.get(state, 0) / whole, 2) if whole else 0.0,
            "user_callers": top_frames(pooled.callers.get(state, {}), whole) if whole else [],
        }
        for state in STATES
    ]


# --- the straggler ---


# --- classes ---


def rank_classes(views: Sequence[RankView], places: Layouts = NO_LAYOUTS) -> list[JobClass]:
    """Ranks grouped by alike step-thread states, biggest class first (module doc)."""
    groups: list[list[RankView]] = []
    for view in views:
        home = next((g for g in groups if alike(g[0], view)), None)
        if home is None:
            groups.append([view])
        else:
            home.append(view)
    classes = [describe_class(group, views, places) for group in groups]
    classes.sort(key=lambda c: (-len(c["ranks"]), natural(c["ranks"][0])))
    return classes


def alike(first: RankView, view: RankView) -> bool:
    """No state's share differs beyond noise by more than CLASS_GAP points, and no user
    function that one of them hardly runs (under DISTINCT_OTHERS percent) takes more
    than CLASS_GAP points beyond noise on the other: a rank that spends a third of its
    step in a function the others never run is not like them, even where its states
    look the same. (A function both run at different shares shows in the states.)"""
    if not first.pooled.samples or not view.pooled.samples:
        return first.pooled.samples == view.pooled.samples
    pairs = [
        (effective(state_counts(first, s), view_effect(first, "state", s)),
         effective(state_counts(view, s), view_effect(view, "state", s)))
        for s in STATES
    ]  # fmt: skip
    for function in first.functions.keys() | view.functions.keys():
        mine, theirs = function_counts(first, function), function_counts(view, function)
        if 100 * min(mine[0] / mine[1], theirs[0] / theirs[1]) < DISTINCT_OTHERS:
            pairs.append(
                (effective(mine, view_effect(first, "function", function)),
                 effective(theirs, view_effect(view, "function", function)))
            )  # fmt: skip
    # Many shares are compared: each interval at Bonferroni's level (Holm's first step,
    # blocks.simultaneous_confidence), so "not alike" is a claim at 95% for the pair.
    z = NormalDist().inv_cdf(0.5 + simultaneous_confidence(len(pairs)) / 2)
    for mine, theirs in pairs:
        low, high = newcombe_interval(mine, theirs, z=z)
        if 100 * low > CLASS_GAP or 100 * high < -CLASS_GAP:
            return False
    return True


def describe_class(
    group: Sequence[RankView], views: Sequence[RankView], places: Layouts = NO_LAYOUTS
) -> JobClass:
    pooled = pool_views(group)
    states = [s for s in pooled_states(pooled) if s["samples"]]
    main = max(states, key=lambda s: s["samples"], default=None)
    rest = [v for v in views if v not in group]
    distinct = _distinctive(group, rest) if rest else None
    names = [v.name for v in group]
    label = places.named(ranks_label(names), names) + ": "
    under = pooled.frameworks.get(main["state"], {}) if main is not None else {}
    if main is not None:
        site = call_site(main["user_callers"], under) if main["user_callers"] else ""
        found = top_for(under)
        at = "in" if found and site.startswith(framework_text(found)) else "at"
        label += f"{main['percent']:.0f}% {main['state']}" + (f" {at} {site}" if site else "")
    if distinct is not None:
        label += f"; {distinct['percent']:.0f}% in `{distinct['function']}`"
    elif rest and main is not None:
        label += _apart(pooled, pool_views(rest), main["state"])
    described: JobClass = {
        "ranks": names,
        "label": label,
        "states": [{"state": s["state"], "percent": s["percent"]} for s in states],
        "distinctive": distinct,
    }
    if found := top_for(under):  # framework.py: the framework frame of its main state
        described["framework_frame"] = found  # type: ignore[typeddict-item]
    if group_place := places.place(names):
        described["group"] = group_place
    return described


def _apart(mine: Pooled, theirs: Pooled, main: str) -> str:
    """`; collective 2% (the other ranks 75%)`: the state whose share differs most from
    the other ranks', when it is not the class's main state (the label gives that one)
    and differs by more than CLASS_GAP points; else ``."""
    if not mine.samples or not theirs.samples:
        return ""
    shares = {
        state: (100 * mine.states.get(state, 0) / mine.samples,
                100 * theirs.states.get(state, 0) / theirs.samples)
        for state in STATES
    }  # fmt: skip
    state, (percent, others) = max(shares.items(), key=lambda kv: abs(kv[1][0] - kv[1][1]))
    if state == main or abs(percent - others) <= CLASS_GAP:
        return ""
    return f"; {state} {percent:.0f}% (the other ranks {others:.0f}%)"


def _distinctive(group: Sequence[RankView], rest: Sequence[RankView]) -> Explanation | None:
    """The class's user function that the other ranks hardly run (under DISTINCT_OTHERS
    percent), with the largest share above theirs."""
    merged = RankView(
        "", {}, [], "", pool_views(group), _merged_functions(group), 0, 0, 0,
        merged_effects(group),
    )  # fmt: skip
    items = [
        i
        for i in explain(merged, rest)
        if "function" in i and i["others_percent"] < DISTINCT_OTHERS
    ]
    return items[0] if items else None


def _merged_functions(group: Sequence[RankView]) -> dict[str, tuple[int, str]]:
    merged: dict[str, tuple[int, str]] = {}
    for view in group:
        for function, (samples, frame) in view.functions.items():
            merged[function] = (merged.get(function, (0, frame))[0] + samples, frame)
    return merged


# --- findings ---


def job_findings(
    views: Sequence[RankView],
    straggler: Straggler | None,
    stuck: Stuck | None = None,
    waits: tuple[str, ...] = BLOCKING_WAITS,
    places: Layouts = NO_LAYOUTS,
) -> list[Finding]:
    """Rules on all ranks' step threads added up, and per rank, then `stuck` or else
    `straggler`, or else (async waits) `peer_or_device` (see the module doc)."""
    if not views:
        return []
    per_rank = {v.name: findings_for_threads(v.stats, v.threads) for v in views}
    everyone = {
        "idle_included": all(v.stats.get("idle_included") is not False for v in views),
        "threads": [t for v in views for t in v.threads],
    }
    pooled = {f["rule"]: f for f in findings_for_threads(everyone, everyone["threads"])}
    found: list[Finding] = []
    for rule in dict.fromkeys(
        f["rule"] for fs in [*per_rank.values(), pooled.values()] for f in fs
    ):
        holders = [n for n, fs in per_rank.items() if any(f["rule"] == rule for f in fs)]
        base = pooled.get(rule) or _strongest(rule, per_rank)
        if rule in pooled:  # a busy thread beside the step is a rank's own: the first found
            ordered = sorted(views, key=lambda v: v.name not in holders)
            named = (with_busy_thread(base, v.stats, v.threads, v.name) for v in ordered)
            base = next((f for f in named if f is not base), base)
        found.append({**base, "ranks": holders or [v.name for v in views]})
    untold = None
    if stuck is not None:
        found.append(stuck_finding(stuck, waits, places))
    elif straggler is not None:
        found.append(straggler_finding(views, straggler, waits, places))
    elif waits != BLOCKING_WAITS:
        untold = peer_or_device_finding(views)
        found += [untold] if untold else []
    if waits != BLOCKING_WAITS and stuck is None:
        found = [surfaced(f, straggler, untold is not None) for f in found]
    return rank_findings(found)


def _strongest(rule: str, per_rank: Mapping[str, list[Finding]]) -> Finding:
    mine = [f for fs in per_rank.values() for f in fs if f["rule"] == rule]
    return max(mine, key=lambda f: f["interval"][0])


def straggler_finding(
    views: Sequence[RankView],
    straggler: Straggler,
    waits: tuple[str, ...] = BLOCKING_WAITS,
    places: Layouts = NO_LAYOUTS,
) -> Finding:
    """The others' wait (in the wait model's states), caused by the straggler and
    explained by its excess; `places` name its parallel group."""
    who = places.named(straggler["name"], [straggler["name"]])
    others = [v for v in views if v.name != straggler["name"] and v.pooled.samples]
    waited = waiting(others)
    low, high = percent_interval(*waited)
    callers = top_frames(waiting_callers(pool_views(others), waits), waited[1])
    under = waiting_frameworks(pool_views(others), waits)
    explanation = straggler["explanation"]
    cause = f", which spends {_excess(explanation[0])}" if explanation else ""
    value = round(100 * waited[0] / waited[1], 1)
    blocking = waits == BLOCKING_WAITS
    where = "in collectives" if blocking else "at device syncs and in collectives"
    surfaces = (
        ""
        if blocking
        else " (NCCL collectives only enqueue work: their wait surfaces at the next device sync)"
    )
    return {
        "rule": "straggler",
        "severity": severity(low, COLLECTIVE_WAIT),
        "title": f"The other ranks wait for {who} {where}",
        "value": value,
        "interval": [low, high],
        "threshold": COLLECTIVE_WAIT,
        "frames": list(
            dict.fromkeys([i["frame"] for i in explanation] + [c["frame"] for c in callers[:2]])
        ),
        "user_callers": callers,
        "advice": f"The other ranks wait {value:g}% of their step at {call_site(callers, under)} "
        f"for {who}{surfaces}{cause}: remove that excess from its step.",
        "ranks": [straggler["name"]],
    }


def _excess(item: Explanation) -> str:
    """`+39.9 pts more than them in `metric_per_sample (train.py)``, or `... in data_wait
    at `train.py:151` (in `Job.train`)`` for a state at a call site."""
    delta = f"{item['delta']:+.1f} pts more than them"
    found = item.get("framework_frame")
    if "function" in item:
        within = f", called from {framework_text(found)}" if found else ""
        return f"{delta} in `{item['function']}`{within}"
    under = {(*(found[k] for k in FRAME_KEYS), item["frame"]): 1} if found else None
    return f"{delta} in {item.get('state', '')} at {call_site([_as_frame(item)], under)}"


def _as_frame(item: Explanation) -> FrameStat:
    return {"frame": item["frame"], "samples": 0, "percent": item["percent"]}
