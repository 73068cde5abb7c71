"""Statistics from a Profile: every figure counts a sample at most once per item.

All passes are flat loops over the trie's arrays (parents precede children):
- a node adds its inclusive value to frame f only when f is not above it
  (`first_on_path`), so recursion never double counts;
- keywords and categories use bit masks carried down the path: a node adds its
  inclusive value to a keyword only for bits its frame sets and no ancestor set.
Synthetic process/thread frames are left out of the frame lists and are never
matched by keywords (a command line mentioning `queue` must not count).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import compress, islice

from .flamegraph import trie_flamegraph
from .frames import ThreadFilter, parse_process
from .keywords import GPU_KEYWORDS, Keyword
from .lag import analyze_lag
from .profile import Accumulated, Profile, accumulate
from .types import CategoryStat, FrameStat, KeywordStat, Stats, ThreadStat


@dataclass(frozen=True)
class AnalysisOptions:
    """What to compute and for which threads."""

    keywords: tuple[Keyword, ...] = GPU_KEYWORDS
    """Keywords to look for in frames (substring, case-sensitive), with categories."""
    max_nodes: int = 8192
    """Most nodes the flamegraph may have, the pruned-mass nodes included (>= 2)."""
    threads: frozenset[str] | None = None
    """Only samples of these threads (names or tid strings); None means all."""
    top_n: int = 50
    """Length of the top_self, top_total and uncovered_native lists (>= 30)."""
    include_flamegraph: bool = True
    """Whether the result carries the (pruned) flamegraph tree."""


@dataclass
class _View:
    """The profile seen through a thread filter: per-node samples and totals."""

    own: list[int]
    total: list[int]
    sizes: list[int]
    frame_total: list[int]
    grand_total: int


def analyze(
    profile: Profile, options: AnalysisOptions | None = None, log_text: str | None = None
) -> Stats:
    """Compute the dashboard's statistics (the CLI's JSON); `lag` when log_text is given."""
    options = options or AnalysisOptions()
    view = _view(profile, options.threads)
    top_n = max(options.top_n, 30)
    own_by_frame, total_by_frame = _own_by_frame(profile, view), view.frame_total
    kw_counts, cat_counts = _keyword_counts(profile, view, options.keywords)
    stats: Stats = {
        "format": profile.format,
        "total_samples": view.grand_total,
        "unique_stacks": len(view.own) - view.own.count(0),
        "skipped_lines": profile.skipped_lines,
        "max_depth": max(compress(profile.depth, view.own), default=0),
        "threads": _threads(profile, total_by_frame, view.grand_total),
        "top_self": _frame_list(profile, own_by_frame, view.grand_total, top_n),
        "top_total": _frame_list(profile, total_by_frame, view.grand_total, top_n),
        "keywords": keyword_list(options.keywords, kw_counts, view.grand_total),
        "categories": category_list(options.keywords, cat_counts, view.grand_total),
        "uncovered_native": _uncovered(profile, own_by_frame, options.keywords, view, top_n),
    }
    if options.include_flamegraph:
        stats["flamegraph"] = trie_flamegraph(profile, view.total, view.sizes, options.max_nodes)
    if log_text is not None:
        stats["lag"] = analyze_lag(log_text)
    return stats


def percent(part: int, whole: int) -> float:
    """Share in percent, two decimals; 0 of nothing is 0."""
    return round(100.0 * part / whole, 2) if whole else 0.0


def _view(profile: Profile, threads: frozenset[str] | None) -> _View:
    if threads is None:
        return _view_of(profile.self_count, profile.accumulated())
    wanted = _matching_thread_frames(profile, threads)
    selected = bytearray(profile.node_count)
    parent, frame = profile.parent, profile.frame
    for i in range(1, profile.node_count):
        selected[i] = selected[parent[i]] or frame[i] in wanted
    own = [c if s else 0 for c, s in zip(profile.self_count, selected, strict=True)]
    return _view_of(own, accumulate(profile, own))


def _view_of(own: list[int], acc: Accumulated) -> _View:
    return _View(own, acc.total, acc.size, acc.frame_total, acc.total[0])


def _matching_thread_frames(profile: Profile, threads: frozenset[str]) -> set[int]:
    wanted = ThreadFilter(threads)
    thread = profile.frame_info().thread
    return {fid for fid, (tid, name, _pid) in thread.items() if wanted.matches(tid, name)}


def _own_by_frame(profile: Profile, view: _View) -> list[int]:
    """Per frame id: samples with that frame as leaf (only stack ends have own samples)."""
    own_by = [0] * len(profile.frames)
    leaves = compress(range(profile.node_count), view.own)
    for node in leaves:
        if node:
            own_by[profile.frame[node]] += view.own[node]
    return own_by


def frame_masks(profile: Profile, keywords: tuple[Keyword, ...]) -> tuple[list[int], list[int]]:
    """Per distinct frame: bit mask of matching keywords and of their categories (cached).

    One regex alternation finds the few frames that match anything; only those are
    tested keyword by keyword.
    """
    key = ("masks", keywords)
    cached = profile._cache.get(key)
    if cached is not None:
        return cached  # type: ignore[return-value]
    names = category_names(keywords)
    synthetic = profile.frame_info().synthetic
    kw_masks, cat_masks = [0] * len(profile.frames), [0] * len(profile.frames)
    if not keywords:
        return kw_masks, cat_masks
    any_keyword = re.compile("|".join(re.escape(kw.keyword) for kw in keywords)).search
    for fid, name in enumerate(profile.frames):
        if synthetic[fid] or not any_keyword(name):
            continue
        for bit, kw in enumerate(keywords):
            if kw.keyword in name:
                kw_masks[fid] |= 1 << bit
                cat_masks[fid] |= 1 << names.index(kw.category)
    profile._cache[key] = (kw_masks, cat_masks)
    return kw_masks, cat_masks


def _keyword_counts(
    profile: Profile, view: _View, keywords: tuple[Keyword, ...]
) -> tuple[list[int], list[int]]:
    n_kw = len(keywords)
    counts = [0] * (n_kw + len(category_names(keywords)))
    if keywords:
        kw_masks, cat_masks = frame_masks(profile, keywords)
        masks = [k | c << n_kw for k, c in zip(kw_masks, cat_masks, strict=True)]
        _count_masks(profile, view.total, masks, counts)
    return counts[:n_kw], counts[n_kw:]


def _count_masks(profile: Profile, total: list[int], masks: list[int], counts: list[int]) -> None:
    """Add each matched node's inclusive value to the bits no matched ancestor set."""
    for node, fresh in fresh_matches(profile, masks):
        if total[node]:
            add_bits(fresh, total[node], counts)


def fresh_matches(profile: Profile, masks: list[int]) -> Iterator[tuple[int, int]]:
    """(node, bits) for each node whose frame sets bits no ancestor on its path set.

    Only nodes whose frame matches something are visited (in id order, so parents
    first); each finds the union of its matched ancestors by walking up to the
    nearest matched one, whose union is already known.
    """
    parent = profile.parent
    node_mask = map(masks.__getitem__, islice(profile.frame, 1, None))
    matched = compress(range(1, profile.node_count), node_mask)
    union: dict[int, int] = {}
    for node in matched:
        mine = masks[profile.frame[node]]
        up = parent[node]
        while up > 0 and up not in union:
            up = parent[up]
        above = union.get(up, 0)
        union[node] = above | mine
        fresh = mine & ~above
        if fresh:
            yield node, fresh


def add_bits(bits: int, value: int, counts: list[int]) -> None:
    index = 0
    while bits:
        if bits & 1:
            counts[index] += value
        bits >>= 1
        index += 1


def category_names(keywords: tuple[Keyword, ...]) -> list[str]:
    return list(dict.fromkeys(kw.category for kw in keywords))


def _threads(profile: Profile, total_by: list[int], whole: int) -> list[ThreadStat]:
    out: list[ThreadStat] = []
    for fid, (tid, name, _) in profile.frame_info().thread.items():
        if total_by[fid]:
            pid = pid_of(profile, profile.parent[profile.frame.index(fid)])
            out.append(thread_stat(tid, name, pid, total_by[fid], whole))
    out.sort(key=lambda t: (-t["samples"], t["name"], str(t["tid"])))
    return out


def thread_stat(tid: int | str, name: str, pid: int | None, samples: int, whole: int) -> ThreadStat:
    return {
        "name": name,
        "tid": tid,
        "pid": pid,
        "samples": samples,
        "percent": percent(samples, whole),
    }


def pid_of(profile: Profile, node: int) -> int | None:
    """pid when `node` is a `process N:"..."` frame (the one above a thread frame)."""
    if node <= 0:
        return None
    parsed = parse_process(profile.frames[profile.frame[node]])
    return parsed[0] if parsed else None


def _frame_list(profile: Profile, counts: list[int], whole: int, top_n: int) -> list[FrameStat]:
    synthetic = profile.frame_info().synthetic
    rows = ((c, profile.frames[f]) for f, c in enumerate(counts) if c and not synthetic[f])
    return ranked_frames(rows, whole, top_n)


def ranked_frames(rows: Iterable[tuple[int, str]], whole: int, top_n: int) -> list[FrameStat]:
    """The `top_n` (samples, frame) rows, most samples first, ties by name."""
    top = heapq.nsmallest(top_n, rows, key=lambda r: (-r[0], r[1]))  # = sorted(...)[:top_n]
    return [{"frame": f, "samples": c, "percent": percent(c, whole)} for c, f in top]


def keyword_list(keywords: tuple[Keyword, ...], counts: list[int], whole: int) -> list[KeywordStat]:
    rows: list[KeywordStat] = [
        {"keyword": kw.keyword, "category": kw.category, "samples": c, "percent": percent(c, whole)}
        for kw, c in zip(keywords, counts, strict=True)
    ]
    return sorted(rows, key=lambda r: -r["samples"])


def category_list(
    keywords: tuple[Keyword, ...], counts: list[int], whole: int
) -> list[CategoryStat]:
    rows: list[CategoryStat] = [
        {"category": cat, "samples": c, "percent": percent(c, whole)}
        for cat, c in zip(category_names(keywords), counts, strict=True)
    ]
    return sorted(rows, key=lambda r: -r["samples"])


def _uncovered(
    profile: Profile, own: list[int], keywords: tuple[Keyword, ...], view: _View, top_n: int
) -> list[FrameStat]:
    native = profile.frame_info().native
    words = [kw.keyword for kw in keywords]
    counts = [
        c if c and native[f] and not any(w in profile.frames[f] for w in words) else 0
        for f, c in enumerate(own)
    ]
    return _frame_list(profile, counts, view.grand_total, top_n)
