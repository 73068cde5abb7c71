"""Per-thread count tables: any thread subset's statistics without the samples.

Every figure `analyze` reports is a sum over samples (or a max, or a rank of sums),
and each sample belongs to exactly one thread: the outermost `thread (TID): NAME`
frame on its stack. So the statistics of a subset of threads are sums of per-thread
counts. `thread_tables` computes those counts once, when a capture is analysed;
`combine` turns the tables of some threads into exactly the Stats that
`analyze(profile, AnalysisOptions(threads=...))` gives, without the flamegraph and
the lag (which the caller keeps from the full analysis). A dashboard can then filter
by thread without reading the raw samples again, even after they were pruned.

The tables are JSON-ready. Frames are listed once and referred to by index; a
thread's `self` and `total` are flat `[index, samples, index, samples, ...]` lists.
Version 3 adds each thread's states with their user callers, the keywords' and
categories' user callers, and the capture's `rounds` and `idle_included` (which a
thread subset shares with the whole capture). Older tables count every sample of a
thread as `unknown` state, so states still add up to its samples. Version 4 adds the
framework frames of each thread's states (`framework_frames`, `state_frameworks`), so
a state row of a thread subset carries `framework_callers` as `analyze` gives them;
older tables give none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import compress
from typing import Any, NamedTuple, TypedDict

from ..core.frames import ThreadFilter
from ..core.profile import Profile
from ..core.types import LagReport, StateStat, Stats, ThreadStat
from ..rules.findings import findings_for_capture
from ..rules.framework import (
    FRAME_KEYS,
    FrameworkRules,
    NodeFrameworks,
    framework_frame,
    node_frameworks,
    rules_of,
    top_framework_callers,
)
from ..rules.state_rules import STATES
from ..rules.states import (
    NO_USER_FRAME,
    UNKNOWN,
    StateCounts,
    UserCode,
    classify,
    count_states,
)
from . import functions
from .activity import thread_owners
from .analysis import (
    AnalysisOptions,
    Matched,
    capture_activity,
    category_list,
    keyword_list,
    pid_of,
    ranked_frames,
    state_list,
    thread_stat,
)
from .keyword_matching import (
    NO_PYTHON_FRAME,
    PythonCallers,
    category_names,
    fresh_matches,
    matcher_for,
)
from .keywords import GPU_KEYWORDS, Keyword

VERSION = 4


class ThreadTable(TypedDict):
    tid: int | str
    name: str
    pid: int | None
    samples: int
    unique_stacks: int
    max_depth: int
    self: list[int]
    total: list[int]
    keywords: list[int]
    categories: list[int]
    keyword_callers: list[list[int]]
    """Per keyword: flat [frame index, samples, ...] of its Python callers (-1: none)."""
    category_callers: list[list[int]]
    keyword_user_callers: list[list[int]]
    category_user_callers: list[list[int]]
    states: list[int]
    """Samples per state, in STATES order."""
    state_callers: list[list[int]]
    """Per state: flat [frame index, samples, ...] of its user callers (-1: none)."""
    state_frameworks: list[list[int]]
    """Per state: flat [framework frame index, user caller's frame index (-1: none),
    samples, ...] (indexes into `framework_frames` and `frames`)."""


class ThreadTables(TypedDict):
    version: int
    format: str
    skipped_lines: int
    frames: list[str]
    uncovered: list[int]
    """Indexes (into `frames`) of native frames that match no keyword."""
    keywords: list[list[str]]
    framework_frames: list[list[str | bool]]
    """[frame, function, framework, phase, user_inside] of each framework frame the
    threads' states stand in (framework.FRAME_KEYS order)."""
    threads: list[ThreadTable]
    rounds: int | None
    idle_included: bool | None


class _Counts:
    def __init__(self, n_counts: int) -> None:
        self.own: dict[int, int] = {}
        self.total: dict[int, int] = {}
        self.matched = Matched(n_counts)
        self.samples = self.unique = self.depth = 0


def thread_tables(
    profile: Profile,
    keywords: tuple[Keyword, ...] = GPU_KEYWORDS,
    *,
    options: AnalysisOptions | None = None,
    lag: LagReport | None = None,
) -> ThreadTables:
    """Per-thread counts of everything `analyze` reports (see the module doc).

    `options` gives the state rules, library entries and idle flag (its keywords are
    not used: `keywords` are); `lag` is the capture's lag report, for `rounds`.
    """
    options = options or AnalysisOptions()
    info = profile.frame_info()
    owner = thread_owners(profile)
    n_kw = len(keywords)
    counts = {fid: _Counts(n_kw + len(category_names(keywords))) for fid in info.thread}
    frame, synthetic, own = profile.frame, info.synthetic, profile.self_count
    for node in compress(range(profile.node_count), own):
        mine = counts.get(owner[node])
        if mine is not None:
            fid, value = frame[node], own[node]
            if not synthetic[fid]:
                mine.own[fid] = mine.own.get(fid, 0) + value
            mine.samples += value
            mine.unique += 1
            mine.depth = max(mine.depth, profile.depth[node])
    total = profile.accumulated().total
    # One flat pass over the trie, keyed by (thread, frame): the hot loop of this module.
    by_key: dict[int, int] = {}
    get = by_key.get
    for node in compress(range(1, profile.node_count), profile.first_on_path[1:]):
        thread, value = owner[node], total[node]
        if thread >= 0 and value:
            key = thread << _SHIFT | frame[node]
            by_key[key] = get(key, 0) + value
    for key, value in by_key.items():
        fid = key & _MASK
        if not synthetic[fid]:
            counts[key >> _SHIFT].total[fid] = value
    library = (*options.library, *profile.installed)
    classified = classify(profile, options.state_rules, UserCode(library))
    rules = rules_of(options.state_rules)
    found = node_frameworks(profile, rules, classified.user_at)
    if keywords:
        callers = PythonCallers(profile)
        for node, fresh in fresh_matches(profile, matcher_for(profile, keywords)):
            mine = counts.get(owner[node])
            if mine is not None and total[node]:
                mine.matched.add(fresh, total[node], callers.of(node), classified.user_at[node])
    states = count_states(profile, own, classified, owner, found.label)
    act = capture_activity(profile, classified, lag, options.idle, states)
    tables = _tables(profile, keywords, counts, states, _Frameworks(found, rules))
    tables["rounds"], tables["idle_included"] = act.rounds, act.idle_included
    functions.add_to_tables(tables, profile, classified)  # type: ignore[arg-type]
    return tables


_SHIFT = 32
_MASK = (1 << _SHIFT) - 1


class _Frameworks(NamedTuple):
    found: NodeFrameworks
    rules: FrameworkRules


def _tables(
    profile: Profile,
    keywords: tuple[Keyword, ...],
    counts: dict[int, _Counts],
    states: StateCounts,
    frameworks: _Frameworks,
) -> ThreadTables:
    index: dict[int, int] = {}
    info = profile.frame_info()
    shown: dict[tuple, int] = {}

    def pairs(counter: dict[int, int]) -> list[int]:
        flat = []
        for fid, samples in counter.items():
            flat += (index.setdefault(fid, len(index)) if fid >= 0 else -1, samples)
        return flat

    def triples(counter: dict[tuple[int, int], int]) -> list[int]:
        flat = []
        for (caller, label), samples in counter.items():
            found = frameworks.found.labels[label]
            row = framework_frame(found, profile.frames, frameworks.rules, caller)
            key = tuple(row[k] for k in FRAME_KEYS)  # type: ignore[literal-required]
            user = index.setdefault(caller, len(index)) if caller >= 0 else -1
            flat += (shown.setdefault(key, len(shown)), user, samples)
        return flat

    n_kw = len(keywords)
    threads: list[ThreadTable] = []
    for fid, mine in counts.items():
        if not mine.samples:
            continue
        tid, name, _ = info.thread[fid]
        threads.append(
            {
                "tid": tid,
                "name": name,
                "pid": pid_of(profile, profile.parent[profile.frame.index(fid)]),
                "samples": mine.samples,
                "unique_stacks": mine.unique,
                "max_depth": mine.depth,
                "self": pairs(mine.own),
                "total": pairs(mine.total),
                "keywords": mine.matched.samples[:n_kw],
                "categories": mine.matched.samples[n_kw:],
                "keyword_callers": [pairs(c) for c in mine.matched.callers[:n_kw]],
                "category_callers": [pairs(c) for c in mine.matched.callers[n_kw:]],
                "keyword_user_callers": [pairs(c) for c in mine.matched.user_callers[:n_kw]],
                "category_user_callers": [pairs(c) for c in mine.matched.user_callers[n_kw:]],
                "states": states.samples[fid],
                "state_callers": [pairs(c) for c in states.callers[fid]],
                "state_frameworks": [triples(c) for c in states.frameworks[fid]],
            }
        )
    frames = [profile.frames[fid] for fid in index]
    matched = matcher_for(profile, keywords).candidates
    uncovered = [i for i, fid in enumerate(index) if info.native[fid] and not matched[fid]]
    return {
        "version": VERSION,
        "format": profile.format,
        "skipped_lines": profile.skipped_lines,
        "frames": frames,
        "uncovered": uncovered,
        "keywords": [[kw.keyword, kw.category] for kw in keywords],
        "framework_frames": [list(key) for key in shown],
        "threads": threads,
        "rounds": None,
        "idle_included": None,
    }


def thread_names(tables: ThreadTables) -> list[dict[str, Any]]:
    """The threads the tables know, most samples first (for a thread picker)."""
    rows = [
        {"tid": t["tid"], "name": t["name"], "samples": t["samples"]} for t in tables["threads"]
    ]
    return sorted(rows, key=lambda r: (-r["samples"], r["name"], str(r["tid"])))


def combine_threads(tables: ThreadTables, threads: Iterable[str], top_n: int = 50) -> Stats:
    """The statistics of the listed threads (names or tids), as `analyze` gives them."""
    wanted = ThreadFilter(threads)
    chosen = [t for t in tables["threads"] if wanted.matches(t["tid"], t["name"])]
    keywords = tuple(Keyword(word, category) for word, category in tables["keywords"])
    n_kw, n_cat = len(keywords), len(category_names(keywords))
    whole = sum(t["samples"] for t in chosen)
    own, total = Counter[int](), Counter[int]()
    for table in chosen:
        _add_pairs(own, table["self"])
        _add_pairs(total, table["total"])
    frames, top_n = tables["frames"], max(top_n, 30)
    uncovered = set(tables["uncovered"])
    rounds = tables.get("rounds")
    shown = tables.get("framework_frames") or []
    thread_rows = [_thread_row(t, whole, frames, rounds, shown) for t in chosen]
    thread_rows.sort(key=lambda t: (-t["samples"], t["name"], str(t["tid"])))
    kw = _sum_lists(chosen, "keywords", n_kw), _sum_lists(chosen, "categories", n_cat)
    python = [
        _named(_callers(chosen, key, size), frames, NO_PYTHON_FRAME)
        for key, size in (("keyword_callers", n_kw), ("category_callers", n_cat))
    ]
    user = [
        _named(_callers(chosen, key, size), frames, NO_USER_FRAME)
        for key, size in (("keyword_user_callers", n_kw), ("category_user_callers", n_cat))
    ]
    stats: Stats = {
        "format": tables["format"],  # type: ignore[typeddict-item]
        "total_samples": whole,
        "unique_stacks": sum(t["unique_stacks"] for t in chosen),
        "skipped_lines": tables["skipped_lines"],
        "max_depth": max((t["max_depth"] for t in chosen), default=0),
        "threads": thread_rows,
        "top_self": ranked_frames(((c, frames[i]) for i, c in own.items()), whole, top_n),
        "top_total": ranked_frames(((c, frames[i]) for i, c in total.items()), whole, top_n),
        "keywords": keyword_list(keywords, kw[0], python[0], whole, user[0]),
        "categories": category_list(keywords, kw[1], python[1], whole, user[1]),
        "uncovered_native": ranked_frames(
            ((c, frames[i]) for i, c in own.items() if i in uncovered), whole, top_n
        ),
        "states": _states(chosen, frames, whole, shown),
        "idle_included": tables.get("idle_included"),
        "rounds": rounds,
    }
    stats["thread_functions"] = functions.from_tables(chosen, thread_rows)  # type: ignore[arg-type]
    stats["findings"] = findings_for_capture(stats)
    return stats


def _thread_row(
    table: ThreadTable,
    whole: int,
    frames: list[str],
    rounds: int | None,
    shown: list[list[Any]],
) -> ThreadStat:
    states = _states([table], frames, table["samples"], shown)
    return thread_stat(
        table["tid"], table["name"], table["pid"], table["samples"], whole, states, rounds
    )


def _states(
    chosen: list[ThreadTable], frames: list[str], whole: int, shown: list[list[Any]]
) -> list[StateStat]:
    samples = [0] * len(STATES)
    for table in chosen:
        if "states" in table:
            samples = [a + b for a, b in zip(samples, table["states"], strict=True)]
        else:  # tables before version 3 did not classify: every sample is unknown
            samples[UNKNOWN] += table["samples"]
    callers = _named(_callers(chosen, "state_callers", len(STATES)), frames, NO_USER_FRAME)
    rows = state_list(samples, callers, whole)
    for row, merged in zip(rows, _frameworks(chosen, frames, shown), strict=True):
        found = top_framework_callers(merged, whole)
        if found:  # as analyze's framework.describer: absent when none
            row["framework_callers"] = found
    return rows


def _frameworks(
    chosen: list[ThreadTable], frames: list[str], shown: list[list[Any]]
) -> list[dict[tuple, int]]:
    """Per state, framework.caller_key -> samples over the threads (tables before
    version 4 add none)."""
    out: list[dict[tuple, int]] = [{} for _ in STATES]
    for table in chosen:
        for merged, flat in zip(out, table.get("state_frameworks", []), strict=False):
            for at in range(0, len(flat), 3):
                user = frames[flat[at + 1]] if flat[at + 1] >= 0 else NO_USER_FRAME
                key = (*shown[flat[at]], user)
                merged[key] = merged.get(key, 0) + flat[at + 2]
    return out


def _sum_lists(chosen: list[ThreadTable], key: str, size: int) -> list[int]:
    out = [0] * size
    for table in chosen:
        out = [a + b for a, b in zip(out, table[key], strict=True)]  # type: ignore[literal-required]
    return out


def _callers(chosen: list[ThreadTable], key: str, size: int) -> list[Counter[int]]:
    """Per item, the callers summed over threads; tables too old to have them add none."""
    out = [Counter[int]() for _ in range(size)]
    for table in chosen:
        for counter, flat in zip(out, table.get(key, []), strict=False):
            _add_pairs(counter, flat)
    return out


def _named(callers: list[Counter[int]], frames: list[str], none: str) -> list[dict[str, int]]:
    return [{frames[i] if i >= 0 else none: c for i, c in by.items()} for by in callers]


def _add_pairs(counter: Counter[int], flat: list[int]) -> None:
    for at in range(0, len(flat), 2):
        counter[flat[at]] += flat[at + 1]
