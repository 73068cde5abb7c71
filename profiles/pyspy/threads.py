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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import compress
from typing import Any, TypedDict

from .analysis import (
    Matched,
    category_list,
    keyword_list,
    pid_of,
    ranked_frames,
    thread_stat,
)
from .frames import ThreadFilter
from .keywords import GPU_KEYWORDS, Keyword
from .matching import (
    NO_PYTHON_FRAME,
    PythonCallers,
    category_names,
    fresh_matches,
    matcher_for,
)
from .profile import Profile
from .types import Stats

VERSION = 2


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


class ThreadTables(TypedDict):
    version: int
    format: str
    skipped_lines: int
    frames: list[str]
    uncovered: list[int]
    """Indexes (into `frames`) of native frames that match no keyword."""
    keywords: list[list[str]]
    threads: list[ThreadTable]


class _Counts:
    def __init__(self, n_counts: int) -> None:
        self.own: dict[int, int] = {}
        self.total: dict[int, int] = {}
        self.matched = Matched(n_counts)
        self.samples = self.unique = self.depth = 0


def thread_tables(profile: Profile, keywords: tuple[Keyword, ...] = GPU_KEYWORDS) -> ThreadTables:
    """Per-thread counts of everything `analyze` reports (see the module doc)."""
    info = profile.frame_info()
    owner = _owners(profile, info.thread.keys())
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
    if keywords:
        callers = PythonCallers(profile)
        for node, fresh in fresh_matches(profile, matcher_for(profile, keywords)):
            mine = counts.get(owner[node])
            if mine is not None and total[node]:
                mine.matched.add(fresh, total[node], callers.of(node))
    return _tables(profile, keywords, counts)


_SHIFT = 32
_MASK = (1 << _SHIFT) - 1


def _owners(profile: Profile, thread_frames: Iterable[int]) -> list[int]:
    """Per node: the frame id of the outermost thread frame on its path, or -1."""
    threads = set(thread_frames)
    owner = [-1] * profile.node_count
    nodes = zip(range(1, profile.node_count), profile.parent[1:], profile.frame[1:], strict=True)
    for node, parent, fid in nodes:
        above = owner[parent]
        if above >= 0:
            owner[node] = above
        elif fid in threads:
            owner[node] = fid
    return owner


def _tables(
    profile: Profile, keywords: tuple[Keyword, ...], counts: dict[int, _Counts]
) -> ThreadTables:
    index: dict[int, int] = {}
    info = profile.frame_info()

    def pairs(counter: dict[int, int]) -> list[int]:
        flat = []
        for fid, samples in counter.items():
            flat += (index.setdefault(fid, len(index)) if fid >= 0 else -1, samples)
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
        "threads": threads,
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
    whole = sum(t["samples"] for t in chosen)
    own, total = Counter[int](), Counter[int]()
    matched_kw = [0] * len(keywords)
    matched_cat = [0] * len(category_names(keywords))
    kw_callers = [Counter[int]() for _ in matched_kw]
    cat_callers = [Counter[int]() for _ in matched_cat]
    for table in chosen:
        _add_pairs(own, table["self"])
        _add_pairs(total, table["total"])
        matched_kw = [a + b for a, b in zip(matched_kw, table["keywords"], strict=True)]
        matched_cat = [a + b for a, b in zip(matched_cat, table["categories"], strict=True)]
        # Tables stored before version 2 have no callers: their lists stay empty.
        for counter, flat in zip(kw_callers, table.get("keyword_callers", []), strict=False):
            _add_pairs(counter, flat)
        for counter, flat in zip(cat_callers, table.get("category_callers", []), strict=False):
            _add_pairs(counter, flat)
    frames, top_n = tables["frames"], max(top_n, 30)
    uncovered = set(tables["uncovered"])
    thread_rows = [thread_stat(t["tid"], t["name"], t["pid"], t["samples"], whole) for t in chosen]
    thread_rows.sort(key=lambda t: (-t["samples"], t["name"], str(t["tid"])))
    return {
        "format": tables["format"],  # type: ignore[typeddict-item]
        "total_samples": whole,
        "unique_stacks": sum(t["unique_stacks"] for t in chosen),
        "skipped_lines": tables["skipped_lines"],
        "max_depth": max((t["max_depth"] for t in chosen), default=0),
        "threads": thread_rows,
        "top_self": ranked_frames(((c, frames[i]) for i, c in own.items()), whole, top_n),
        "top_total": ranked_frames(((c, frames[i]) for i, c in total.items()), whole, top_n),
        "keywords": keyword_list(keywords, matched_kw, _named(kw_callers, frames), whole),
        "categories": category_list(keywords, matched_cat, _named(cat_callers, frames), whole),
        "uncovered_native": ranked_frames(
            ((c, frames[i]) for i, c in own.items() if i in uncovered), whole, top_n
        ),
    }


def _named(callers: list[Counter[int]], frames: list[str]) -> list[dict[str, int]]:
    return [{frames[i] if i >= 0 else NO_PYTHON_FRAME: c for i, c in by.items()} for by in callers]


def _add_pairs(counter: Counter[int], flat: list[int]) -> None:
    for at in range(0, len(flat), 2):
        counter[flat[at]] += flat[at + 1]
