"""Per thread: how much time each function of the user's own code covers (`thread_functions`).

A *function* is a user-code frame without its line number, as py-spy's `--nolineno`
writes it: `metric_per_sample (train.py:79)` and `metric_per_sample (train.py:80)`
are lines of `metric_per_sample (train.py)`. A function's samples are the samples
with it anywhere on the stack, each sample once (two lines of one function on a
stack, or a recursion, count once), so a function's share is its inclusive share,
whatever line of it was running. `frame` is the function's line seen outermost in
most samples: the exact frame a page can open in the flamegraph or the sandwich.

This is what the whole-job report (job/report.py) compares across ranks and what the
findings (findings.py) name, from stored stats alone. It stays small: the threads
that matter first (those with samples in a collective, then by samples not idle),
at most MAX_THREADS of them, and per thread its TOP_FUNCTIONS functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import eq
from typing import Any

from ..core.frames import split_location
from ..core.profile import Profile
from ..core.types import FunctionStat, ThreadFunctions, ThreadStat
from ..rules.states import Classified
from .activity import thread_owners

MAX_THREADS = 16
TOP_FUNCTIONS = 20


def function_name(frame: str) -> str:
    """`name (file.py:N)` -> `name (file.py)`; a frame without a line stays as it is."""
    name, location = split_location(frame)
    file, colon, line = location.rpartition(":")
    return f"{name} ({file})" if colon and line.isdigit() else frame


def thread_functions(
    profile: Profile,
    total: Sequence[int],
    classified: Classified,
    threads: Sequence[ThreadStat] = (),
) -> list[ThreadFunctions]:
    """User functions per thread, the threads that matter first (see the module doc).

    `total` is the inclusive value per node (a thread filter's view); `classified` is
    the profile's states.classify result (its `user_at` says which frames are user
    code); `threads` are the capture's thread rows with their states, which rank them.
    """
    return in_order(_rows(profile, total, classified), threads)


def _rows(profile: Profile, total: Sequence[int], classified: Classified) -> list[ThreadFunctions]:
    """Every thread's row (unordered, unbounded)."""
    counts, lines = _count(profile, total, classified)
    info, frames = profile.frame_info().thread, profile.frames
    rows: list[ThreadFunctions] = []
    for fid, count in _thread_samples(profile, total).items():
        tid, name, _ = info[fid]
        mine, best = counts.get(fid, {}), lines.get(fid, {})
        top = sorted(mine.items(), key=lambda kv: (-kv[1], function_name(frames[kv[0]])))
        functions: list[FunctionStat] = [
            {"function": function_name(frames[fn]), "frame": _hottest(best[fn], frames),
             "samples": c}
            for fn, c in top[:TOP_FUNCTIONS]
        ]  # fmt: skip
        rows.append({"thread": name, "tid": tid, "samples": count, "functions": functions})
    return rows


def in_order(rows: list[ThreadFunctions], threads: Sequence[ThreadStat]) -> list[ThreadFunctions]:
    """The rows of the threads that matter first, at most MAX_THREADS (module doc)."""
    order = {(str(t["tid"]), t["name"]): _interest(t) for t in threads}

    def key(row: ThreadFunctions) -> tuple:
        here = (str(row["tid"]), row["thread"])
        return order.get(here, (0, 0)), -row["samples"], *here

    rows = sorted(rows, key=key)
    return rows[:MAX_THREADS]


def add_to_tables(tables: dict[str, Any], profile: Profile, classified: Classified) -> None:
    """Give each thread table (count/thread_tables.py) its `functions`, so a thread subset's
    `thread_functions` come from the tables as `analyze` would give them."""
    rows = _rows(profile, profile.accumulated().total, classified)
    # A thread renamed while sampled (py-spy saw `thread (5)` before `thread (5): main`)
    # has two tables with one tid.
    everyone = {(str(r["tid"]), r["thread"]): r["functions"] for r in rows}
    for table in tables["threads"]:
        table["functions"] = everyone.get((str(table["tid"]), table["name"]), [])


def from_tables(
    chosen: Sequence[dict[str, Any]], threads: Sequence[ThreadStat]
) -> list[ThreadFunctions]:
    """`thread_functions` of a thread subset, from their tables (empty lists for tables
    stored before they carried functions)."""
    rows: list[ThreadFunctions] = [
        {"thread": t["name"], "tid": t["tid"], "samples": t["samples"],
         "functions": t.get("functions", [])}
        for t in chosen
    ]  # fmt: skip
    return in_order(rows, threads)


def _interest(thread: ThreadStat) -> tuple[int, int]:
    """Sort key: threads in a collective first, then most samples not idle."""
    by_state = {s["state"]: s["samples"] for s in thread.get("states", [])}
    return -bool(by_state.get("collective")), -(thread["samples"] - by_state.get("idle", 0))


def _hottest(per_line: dict[int, int], frames: list[str]) -> str:
    """The line frame with most samples; ties by name (not by the order lines came in)."""
    return min((-samples, frames[fid]) for fid, samples in per_line.items())[1]


def _function_ids(profile: Profile, classified: Classified) -> list[int]:
    """Per frame id: its function's id (the id of the function's first frame seen), or
    -1 for frames that are not the user's code (a user frame's node is its own nearest
    user frame in `classified.user_at`)."""
    frame = profile.frame
    user = set(compress(frame, map(eq, frame, classified.user_at)))
    first: dict[str, int] = {}
    return [
        first.setdefault(function_name(text), fid) if fid in user else -1
        for fid, text in enumerate(profile.frames)
    ]


def _count(
    profile: Profile, total: Sequence[int], classified: Classified
) -> tuple[dict[int, dict[int, int]], dict[int, dict[int, dict[int, int]]]]:
    """Per thread frame id: samples per function, and per function samples per line.

    One pass in node order (parents first) carrying, as an int bit mask, the functions
    already on the path (a tuple cost 6x more on deep Python stacks); a node adds its
    inclusive value to its function only when the function is not above it, so each
    sample counts once. Nodes of no new function share their parent's mask object.
    """
    fn_of = _function_ids(profile, classified)
    bits = _function_bits(fn_of)
    owner = thread_owners(profile)
    parent, frame = profile.parent, profile.frame
    path = [0] * profile.node_count
    counts: dict[int, dict[int, int]] = {}
    lines: dict[int, dict[int, dict[int, int]]] = {}
    for node in range(1, profile.node_count):
        above, fid = path[parent[node]], frame[node]
        bit = bits[fid]
        if not bit or above & bit:
            path[node] = above
            continue
        path[node] = above | bit
        value, thread = total[node], owner[node]
        if value and thread >= 0:
            fn = fn_of[fid]
            mine = counts.setdefault(thread, {})
            mine[fn] = mine.get(fn, 0) + value
            per_line = lines.setdefault(thread, {}).setdefault(fn, {})
            per_line[fid] = per_line.get(fid, 0) + value
    return counts, lines


def _function_bits(fn_of: list[int]) -> list[int]:
    """Per frame id: the bit of its function (0 for frames that are not user code)."""
    index: dict[int, int] = {}
    return [1 << index.setdefault(fn, len(index)) if fn >= 0 else 0 for fn in fn_of]


def _thread_samples(profile: Profile, total: Sequence[int]) -> dict[int, int]:
    """Samples per thread frame id: the inclusive values of its outermost nodes."""
    owner, parent = thread_owners(profile), profile.parent
    is_thread = profile.frame_info().thread.__contains__
    samples: dict[int, int] = {}
    for node in compress(range(profile.node_count), map(is_thread, profile.frame)):
        fid = profile.frame[node]
        if owner[parent[node]] < 0 and total[node]:
            samples[fid] = samples.get(fid, 0) + total[node]
    return samples
