"""The straggler of a whole job: the rank the others wait for, and what it does more.

Works on RankView (one rank's stats seen through its step threads), built by
`rank_view` from a rank's stored stats; job/report.py uses it for the report. See job/report.py's
module doc for the rules; the numbers are in percent of step-thread samples and the
intervals are 95% (Newcombe, compare/captures.py).

The wait model says what counts as a rank waiting for its peers. "blocking" (gloo, or
no GPU): a collective blocks the host until every peer has joined, so the wait is the
collective share. "async" (NCCL/CUDA): a collective only enqueues work on the device,
and a rank waiting for a slow peer blocks at its next device sync (`.item()`, a stream
or event synchronize, a blocking copy, a blocking free of the caching allocator), which
the states call host_sync or gpu_sync; the wait is then collective + gpu_sync +
host_sync. A job is "async" when a rank shows CUDA or NCCL frames (`shows_device`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..core.frames import is_native, split_location
from ..core.rank_names import ranks_label
from ..core.types import Explanation, Finding, Straggler, WaitModel
from ..count.functions import TOP_FUNCTIONS, function_name
from ..rules.findings import call_site, percent_interval, top_frames
from ..rules.framework import top_for
from ..rules.states import NO_USER_FRAME
from ..rules.step_threads import Pooled, capture_threads, pool, samples_in, step_threads
from ..stats.intervals import difference_p, effective, newcombe_interval, pooled_effect
from ..stats.multiple_testing import holm_adjusted
from ..thresholds import (
    COLLECTIVE_WAIT,
    CONFIDENCE,
    EXPLAIN_MIN,
    MIN_SAMPLES,
    STRAGGLER_GAP,
)
from ..timed.design_effects import blocks_of, effect_of, scope_effects
from .rank_stats import FRAME_LISTS

EXPLAIN_TOP = 6
BLOCKING_WAITS = ("collective",)
"""States in which a rank waits for its peers when collectives block the host."""
DEVICE_SYNCS = ("gpu_sync", "host_sync")
ASYNC_WAITS = ("collective", *DEVICE_SYNCS)
"""...and when they only enqueue work (NCCL): the wait surfaces at the next device sync."""


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
    """Of `whole`: samples in the wait model's waiting states (collective; with async
    collectives also gpu_sync and host_sync), plus the rounds left without a sample."""
    effects: Mapping[str, Any] | None = None
    """The step threads' design effects (core.types.ScopeEffects), None without time."""


def rank_view(
    name: str,
    stats: Mapping[str, Any],
    names: tuple[str, ...],
    waits: tuple[str, ...] = BLOCKING_WAITS,
) -> RankView:
    chosen = step_threads(capture_threads(stats), names)
    tids = {str(t["tid"]) for t in chosen.threads}
    rows = [r for r in stats.get("thread_functions") or [] if str(r["tid"]) in tids]
    functions: dict[str, tuple[int, str]] = {}
    best: dict[str, int] = {}
    for row in rows:
        for fn in row["functions"]:
            samples = functions.get(fn["function"], (0, ""))[0] + fn["samples"]
            if fn["function"] not in functions or fn["samples"] > best[fn["function"]]:
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
    whole = pooled.samples
    rounds = stats.get("rounds") or 0
    if stats.get("idle_included") is False and rounds * len(chosen.threads) > whole:
        whole = rounds * len(chosen.threads)
    view = RankView(
        name,
        stats,
        chosen.threads,
        chosen.detected_by,
        pooled,
        functions,
        floor,
        whole,
        0,
        scope_effects(stats, "step"),
    )
    return with_waits(view, waits)


def with_waits(view: RankView, waits: tuple[str, ...]) -> RankView:
    """The view with `waiting` measured in the states `waits` (and unsampled rounds)."""
    waited = sum(view.pooled.states.get(state, 0) for state in waits)
    return view._replace(waiting=waited + view.whole - view.pooled.samples)


# --- the wait model ---

_DEVICE_LIBRARY = re.compile(r"lib(?:cuda|cudart|nccl)\.so[0-9.]*")
_DEVICE_CALL = re.compile(r"cu(?:da)?[A-Z][A-Za-z0-9_]*|nccl[A-Z][A-Za-z0-9_]*")
MAX_FRAME_TEXT = 4096
"""Longer frame texts (untrusted) are not inspected for CUDA/NCCL names."""


def is_device_frame(frame: str) -> bool:
    """A native frame of the CUDA driver or runtime or of NCCL: in libcuda, libcudart or
    libnccl (`cuLaunchKernel (libcuda.so.1)`), a CUDA or NCCL API call linked into
    another library (`cudaLaunchKernel (libtorch_cuda.so)`, `ncclAllReduce`), or
    torch's NCCL process group (`c10d::ProcessGroupNCCL::allreduce`)."""
    if len(frame) > MAX_FRAME_TEXT or not is_native(frame):
        return False
    name, location = split_location(frame)
    return (
        _DEVICE_LIBRARY.fullmatch(location.rpartition("/")[2]) is not None
        or _DEVICE_CALL.fullmatch(name) is not None
        or name.startswith("c10d::ProcessGroupNCCL::")
    )


def shows_device(view: RankView) -> bool:
    """Whether a rank shows CUDA or NCCL frames: its step threads launch kernels or sync
    with the device (states only CUDA frames give), or its capture's frame lists
    (`top_self`, `top_total`, `uncovered_native`) name one (`is_device_frame`). Stats keep
    no per-thread frames, so the lists are the whole capture's: an NCCL process group
    shows there even when its calls are too short to show in a step thread's states."""
    if any(samples_in(t, s) for t in view.threads for s in ("gpu_launch", "gpu_sync")):
        return True
    lists = [view.stats.get(key) or [] for key in FRAME_LISTS]
    return any(is_device_frame(row["frame"]) for rows in lists for row in rows)


def wait_model(views: Sequence[RankView]) -> WaitModel:
    """The job's wait model: async when any rank shows CUDA or NCCL frames, else
    blocking (module doc)."""
    device = [v.name for v in views if shows_device(v)]
    unsampled = "; without --idle, plus the sampling rounds they left no sample in"
    if not device:
        return {
            "kind": "blocking",
            "waiting_states": list(BLOCKING_WAITS),
            "ranks": [],
            "explanation": "No CUDA or NCCL frames: collectives block the host (gloo), so a "
            "rank waits for its peers inside the collective call. Waiting is its step "
            f"threads' collective share{unsampled}.",
        }
    return {
        "kind": "async",
        "waiting_states": list(ASYNC_WAITS),
        "ranks": device,
        "explanation": f"{ranks_label(device)} show CUDA or NCCL frames: NCCL collectives "
        "only enqueue work, and a rank waiting for a slow peer blocks at its next device "
        "sync (`.item()`, a stream or event synchronize, a blocking copy or free). Waiting "
        f"is its step threads' collective, gpu_sync and host_sync share{unsampled}.",
    }


# --- the straggler ---


def find_straggler(
    views: Sequence[RankView], waits: tuple[str, ...] = BLOCKING_WAITS
) -> Straggler | None:
    """The rank the others wait for (their `waiting`, in the wait model's states), beyond
    noise, with its explanation; else None."""
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
        low, _ = newcombe_interval(
            effective(mine, wait_effect(candidate, waits)),
            effective((other.waiting, other.whole), wait_effect(other, waits)),
        )
        if 100 * low <= STRAGGLER_GAP:
            return None
    return {
        "name": candidate.name,
        "wait_percent": round(100 * mine[0] / mine[1], 1),
        "others_wait_percent": round(100 * waited[0] / waited[1], 1),
        "explanation": explain(candidate, others, waits),
    }


def wait_effect(view: RankView, waits: tuple[str, ...]) -> float:
    """The design effect of a rank's waiting share: the largest of its waiting states'."""
    return max(effect_of(view.effects, "state", state) for state in waits)


def view_effect(view: RankView, kind: str, name: str) -> float:
    return effect_of(view.effects, kind, name)


def pooled_blocks(views: Iterable[RankView]) -> int | None:
    """The fewest time blocks among the ranks' design effects (the test's degrees of
    freedom, conservatively), None when none keeps time."""
    found = [b for v in views if (b := blocks_of(v.effects))]
    return min(found) if found else None


def pooled_view_effect(views: Iterable[RankView], kind: str, name: str) -> float:
    """The design effect of a share pooled over ranks (intervals.pooled_effect)."""
    return pooled_effect((v.pooled.samples, view_effect(v, kind, name)) for v in views)


def merged_effects(views: Sequence[RankView]) -> dict[str, Any] | None:
    """Design effects of several ranks' step threads pooled (a class of ranks), or None
    when none of them keeps time."""
    if not any(v.effects for v in views):
        return None
    states = {s for v in views for s in (v.effects or {}).get("states") or {}}
    functions = {f for v in views for f in (v.effects or {}).get("functions") or {}}
    return {
        "states": {s: pooled_view_effect(views, "state", s) for s in states},
        "functions": {f: pooled_view_effect(views, "function", f) for f in functions},
        "largest": pooled_view_effect(views, "frame", ""),
    }


def waiting(views: Iterable[RankView]) -> tuple[int, int]:
    """The views' waiting and whole added up."""
    pairs = [(v.waiting, v.whole) for v in views]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def state_counts(view: RankView, state: str) -> tuple[int, int]:
    return view.pooled.states.get(state, 0), view.pooled.samples


def function_counts(view: RankView, function: str) -> tuple[int, int]:
    return function_samples(view, function), view.pooled.samples


def explain(
    rank: RankView, others: Sequence[RankView], waits: tuple[str, ...] = BLOCKING_WAITS
) -> list[Explanation]:
    """What `rank` does more than `others` pooled, beyond noise, largest first; never a
    waiting state (`waits`): what the others wait in, the straggler's own is smaller."""
    # Shares of the samples seen (without idle samples, of the time each was running):
    # a share of rounds would credit every frame of a less-blocked rank with the gap.
    # Each share counts its samples over its design effect (intervals.effective), and the
    # many functions and lines tested are one family: Holm's correction (stats/batch_means.py)
    # keeps the chance of even one false item in the list at 5%.
    total = sum(o.pooled.samples for o in others)
    blocks = (blocks_of(rank.effects), pooled_blocks(others))
    tested: list[tuple[Explanation, float]] = []
    for function, (samples, frame) in rank.functions.items():
        theirs = sum(function_samples(o, function) for o in others)
        effects = (
            view_effect(rank, "function", function),
            pooled_view_effect(others, "function", function),
        )
        item = _difference(frame, (samples, rank.pooled.samples), (theirs, total), effects, blocks)
        if item is not None:
            tested.append(({**item[0], "function": function}, item[1]))
    for state, callers in rank.pooled.callers.items():
        if state in waits:
            continue
        effects = (view_effect(rank, "state", state), pooled_view_effect(others, "state", state))
        for frame, samples in callers.items():
            theirs = sum(_caller_samples(o, state, frame) for o in others)
            item = _difference(
                frame, (samples, rank.pooled.samples), (theirs, total), effects, blocks
            )
            if item is not None:
                tested.append(({**item[0], "state": state}, item[1]))
    tested = [(with_framework(rank.pooled, item), p) for item, p in tested]
    adjusted = holm_adjusted([p for _, p in tested])
    items = [
        item
        for (item, _), p in zip(tested, adjusted, strict=True)
        if p <= 1 - CONFIDENCE and item["delta"] >= EXPLAIN_MIN and item["interval"][0] > 0
    ]
    # A state at a line of a function listed already says the same thing again.
    listed = {i["function"] for i in items if "function" in i}
    items = [i for i in items if "state" not in i or function_name(i["frame"]) not in listed]
    # Equal shares: a function that spends them all in another (a dataset's __getitem__
    # calling make_features) comes after the one whose own lines run: that one says
    # where the time goes, and stands in the framework's frame (with_framework).
    own = own_samples(rank.pooled)
    items.sort(
        key=lambda i: (
            -i["delta"],
            -own.get(i.get("function", ""), 0),
            i["frame"],
            i.get("state", ""),
        )
    )
    return items[:EXPLAIN_TOP]


def own_samples(pooled: Pooled) -> dict[str, int]:
    """Per function, the samples whose nearest user frame is one of its lines."""
    own: dict[str, int] = {}
    for callers in pooled.callers.values():
        for frame, samples in callers.items():
            own[function_name(frame)] = own.get(function_name(frame), 0) + samples
    return own


def with_framework(pooled: Pooled, item: Explanation) -> Explanation:
    """The item with the framework frame its samples stand in most (framework.py): for a
    state at a call site, that state's; for a function, any state's at its lines."""
    if "state" in item:
        found = top_for(pooled.frameworks.get(item["state"], {}), item["frame"])
    else:
        function = item.get("function", "")
        nested = function.split(" (")[0] + ".<locals>."  # its generator expressions, ...
        mine = {
            key: samples
            for by_key in pooled.frameworks.values()
            for key, samples in by_key.items()
            if function_name(key[5]) == function or key[5].startswith(nested)
        }
        found = top_for(mine)
    return {**item, "framework_frame": found} if found else item


def _difference(
    frame: str,
    mine: tuple[int, int],
    theirs: tuple[int, int],
    effects: tuple[float, float] = (1.0, 1.0),
    blocks: tuple[int | None, int | None] = (None, None),
) -> tuple[Explanation, float] | None:
    """The item and its p-value (a test of the family explain corrects) when mine is
    larger than theirs; None when either side has no samples or mine is not larger."""
    if mine[1] <= 0 or theirs[1] <= 0:
        return None
    counts = effective(theirs, effects[1]), effective(mine, effects[0])
    low, high = newcombe_interval(*counts)
    percent, others = 100 * mine[0] / mine[1], 100 * theirs[0] / theirs[1]
    if percent <= others or frame == NO_USER_FRAME:
        return None
    item: Explanation = {
        "frame": frame,
        "percent": round(percent, 1),
        "others_percent": round(others, 1),
        "delta": round(percent - others, 1),
        "interval": [round(100 * low, 1), round(100 * high, 1)],
    }
    return item, difference_p(theirs, mine, (effects[1], effects[0]), (blocks[1], blocks[0]))


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


def waiting_frameworks(pooled: Pooled, waits: tuple[str, ...]) -> dict[tuple, int]:
    """Framework frames (framework.caller_key) of the waiting states `waits`, added up."""
    merged: dict[tuple, int] = {}
    for state in waits:
        for key, samples in pooled.frameworks.get(state, {}).items():
            merged[key] = merged.get(key, 0) + samples
    return merged


def waiting_callers(pooled: Pooled, waits: tuple[str, ...]) -> dict[str, int]:
    """User callers of the waiting states `waits`, added up."""
    merged: dict[str, int] = {}
    for state in waits:
        for frame, samples in pooled.callers.get(state, {}).items():
            merged[frame] = merged.get(frame, 0) + samples
    return merged


def pool_views(group: Sequence[RankView]) -> Pooled:
    samples, states, callers, frameworks = 0, {}, {}, {}
    for view in group:
        samples += view.pooled.samples
        for state, count in view.pooled.states.items():
            states[state] = states.get(state, 0) + count
        for state, by_frame in view.pooled.callers.items():
            mine = callers.setdefault(state, {})
            for frame, count in by_frame.items():
                mine[frame] = mine.get(frame, 0) + count
        for state, by_key in view.pooled.frameworks.items():
            under = frameworks.setdefault(state, {})
            for key, count in by_key.items():
                under[key] = under.get(key, 0) + count
    return Pooled(samples, states, callers, frameworks)


# --- async waits: a peer or the device ---


def peer_or_device_finding(views: Sequence[RankView]) -> Finding | None:
    """Async waits only: every measured rank (at least two) waits at device syncs past
    COLLECTIVE_WAIT over its whole interval, and no rank waits clearly less. Each rank may
    wait for its own device or for a slow peer's NCCL kernel: host stacks cannot tell."""
    measured = [v for v in views if v.pooled.samples >= MIN_SAMPLES and v.whole > 0]
    synced = [(v, sum(v.pooled.states.get(s, 0) for s in DEVICE_SYNCS)) for v in measured]
    if len(measured) < 2 or any(percent_interval(n, v.whole)[0] <= COLLECTIVE_WAIT
                                for v, n in synced):  # fmt: skip
        return None
    whole = sum(v.whole for v in measured)
    total = sum(n for _, n in synced)
    low, high = percent_interval(total, whole)
    callers = top_frames(waiting_callers(pool_views(measured), DEVICE_SYNCS), whole)
    shares = sorted((100 * n / v.whole, v.name) for v, n in synced)
    value = round(100 * total / whole, 1)
    return {
        "rule": "peer_or_device",
        "severity": "info",
        "title": "The ranks wait at device syncs alike: a slow device or a slow peer cannot "
        "be told apart from host stacks",
        "value": value,
        "interval": [low, high],
        "threshold": COLLECTIVE_WAIT,
        "frames": [c["frame"] for c in callers if c["frame"] != NO_USER_FRAME],
        "user_callers": callers,
        "advice": f"Every rank waits at device syncs ({value:g}% of the step, from "
        f"{shares[0][0]:.0f}% on {shares[0][1]} to {shares[-1][0]:.0f}% on {shares[-1][1]}), "
        f"at {call_site(callers)}. With NCCL a rank waiting for its own busy GPU and one "
        "waiting for a slow peer block at the same sync, so no straggler is named: compare "
        "the ranks' GPU time (torch.profiler or Nsight Systems on each rank, or "
        "nvidia-smi's utilisation). A rank whose GPU stays busy while the other GPUs wait "
        "in NCCL kernels is the straggler; when every GPU is busy, the device sets the pace.",
        "ranks": [v.name for v in measured],
    }


SURFACING_RULES = ("host_sync", "gpu_sync")
"""Rules whose sync is where an async wait for a peer surfaces."""


def surfaced(finding: Finding, straggler: Straggler | None, untold: bool) -> Finding:
    """A host_sync or gpu_sync finding on ranks that wait for a named straggler (or that
    may, when `untold`): the sync is where the wait surfaces, not its cause."""
    if finding["rule"] not in SURFACING_RULES or (straggler is None and not untold):
        return finding
    site, share = call_site(finding["user_callers"]), f"{finding['value']:g}%"
    if straggler is not None:
        name = straggler["name"]
        waiters = [r for r in finding.get("ranks", []) if r != name]
        if not waiters:
            return finding  # the straggler's own sync: no peer is waited for there
        verb = "waits" if len(waiters) == 1 else "wait"
        advice = (
            f"{site} is where {ranks_label(waiters)} {verb} for {name} ({share} of the step): NCCL "
            "collectives only enqueue work, so a wait for a slow peer surfaces at the next "
            f"device sync. The sync is not the cause: remove {name}'s excess (the straggler "
            "finding); dropping the sync would only move the wait to the next one."
        )
    else:
        advice = (
            f"{site} waits for the device ({share} of the step), and with NCCL it is also "
            "where a wait for a slow peer surfaces; host stacks cannot tell which (the "
            "peer_or_device finding). The sync may not be the cause: reading the value "
            "less often helps only when the device itself is the wait."
        )
    return {**finding, "advice": advice}
