"""Statistics from a Profile: every figure counts a sample at most once per item.

All passes are flat loops over the trie's arrays (parents precede children):
- a node adds its inclusive value to frame f only when f is not above it
  (`first_on_path`), so recursion never double counts;
- keywords and categories use bit masks carried down the path (count/keyword_matching.py): a
  node adds its inclusive value to a keyword only for bits its frame sets and no
  ancestor set, and to that keyword's Python caller (the nearest Python frame above)
  and user caller (the nearest frame of the user's own code at or above it);
- thread states (states.py) give every stack end one state and one user caller, so
  the states of the capture and of each thread add up to their samples exactly;
  `rounds`, `idle_included` and each thread's `active_percent` come from activity.py.
Synthetic process/thread frames are left out of the frame lists and are never
matched by keywords (a command line mentioning `queue` must not count).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import compress
from typing import NamedTuple

from ..core.frames import ThreadFilter, parse_process
from ..core.profile import Accumulated, Profile, accumulate
from ..core.types import (
    CategoryStat,
    FrameStat,
    KeywordStat,
    LagReport,
    StateStat,
    Stats,
    ThreadStat,
)
from ..formats.log import analyze_lag
from ..rules.findings import findings_for_capture
from ..rules.framework import describer, node_frameworks, rules_of
from ..rules.rule_table import StateRules, default_state_rules
from ..rules.state_rules import STATES
from ..rules.states import (
    NO_USER_FRAME,
    Classified,
    StateCounts,
    UserCode,
    classify,
    count_states,
    named,
)
from .activity import (
    BLOCKED,
    Activity,
    ThreadCount,
    active_percent,
    activity,
    thread_owners,
)
from .flamegraph import trie_flamegraph
from .functions import thread_functions
from .keyword_matching import (
    NO_PYTHON_FRAME,
    PythonCallers,
    bits_of,
    category_names,
    fresh_matches,
    matcher_for,
)
from .keywords import GPU_KEYWORDS, Keyword, compiled_keyword

TOP_CALLERS = 10


class AnalysisOptions(NamedTuple):
    """What to compute and for which threads (immutable, like a frozen dataclass)."""

    keywords: tuple[Keyword, ...] = GPU_KEYWORDS
    """Keywords to look for in frames (forms in keywords.py), with their categories."""
    max_nodes: int = 8192
    """Most nodes the flamegraph may have, the pruned-mass nodes included (>= 2)."""
    threads: frozenset[str] | None = None
    """Only samples of these threads (names or tid strings); None means all."""
    top_n: int = 50
    """Length of the top_self, top_total and uncovered_native lists (>= 30)."""
    include_flamegraph: bool = True
    """Whether the result carries the (pruned) flamegraph tree."""
    state_rules: StateRules | None = None
    """The thread-state rule table (states.load_state_rules); None: the defaults."""
    library: tuple[str, ...] = ()
    """Extra package names or path prefixes that are library code, not the user's."""
    idle: bool | None = None
    """Whether py-spy recorded with --idle, when known; None: inferred from the data."""


class _View(NamedTuple):
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
    library = (*options.library, *profile.installed)
    classified = classify(profile, options.state_rules, UserCode(library))
    matched = _keyword_counts(profile, view, options.keywords, classified.user_at)
    n_kw, frames = len(options.keywords), profile.frames
    callers, users = matched.named_callers(frames), matched.named_user_callers(frames)
    found = node_frameworks(profile, rules_of(options.state_rules), classified.user_at)
    counts = count_states(profile, view.own, classified, thread_owners(profile), found.label)
    describe = describer(found, frames, rules_of(options.state_rules), NO_USER_FRAME)
    lag = analyze_lag(log_text) if log_text is not None else None
    whole = counts if options.threads is None else None
    act = capture_activity(profile, classified, lag, options.idle, whole)
    stats: Stats = {
        "format": profile.format,
        "total_samples": view.grand_total,
        "unique_stacks": len(view.own) - view.own.count(0),
        "skipped_lines": profile.skipped_lines,
        "max_depth": max(compress(profile.depth, view.own), default=0),
        "threads": _threads(profile, view.grand_total, counts, act.rounds, describe),
        "top_self": _frame_list(profile, own_by_frame, view.grand_total, top_n),
        "top_total": _frame_list(profile, total_by_frame, view.grand_total, top_n),
        "keywords": keyword_list(
            options.keywords,
            matched.samples[:n_kw],
            callers[:n_kw],
            view.grand_total,
            users[:n_kw],
        ),
        "categories": category_list(
            options.keywords,
            matched.samples[n_kw:],
            callers[n_kw:],
            view.grand_total,
            users[n_kw:],
        ),
        "uncovered_native": _uncovered(profile, own_by_frame, options.keywords, view, top_n),
        "states": _all_states(counts, frames, view.grand_total),
        "idle_included": act.idle_included,
        "rounds": act.rounds,
    }
    describe(stats["states"], counts.total_frameworks(), view.grand_total)
    if options.include_flamegraph:
        stats["flamegraph"] = trie_flamegraph(profile, view.total, view.sizes, options.max_nodes)
    if log_text is not None:
        stats["lag"] = lag
    stats["thread_functions"] = thread_functions(profile, view.total, classified, stats["threads"])
    stats["findings"] = findings_for_capture(stats)
    return stats


def prepare_analysis(options: AnalysisOptions) -> None:
    """Compile, in this process, the tables an analysis of `options` would build on first
    use: the default state rules and the keywords' patterns (both cached by module).
    A worker that forks a child an analysis calls it before forking: each child
    inherits them compiled instead of compiling them again (a whole-job capture brings
    a thousand analyses; on a 1,376-sample rank the child's 20 ms become 7 ms)."""
    if options.state_rules is None:
        default_state_rules()
    for keyword in options.keywords:
        compiled_keyword(keyword.keyword)


def capture_activity(
    profile: Profile,
    classified: Classified,
    lag: LagReport | None,
    idle: bool | None,
    counts: StateCounts | None = None,
) -> Activity:
    """Rounds and idle_included of the whole capture (whatever the thread filter);
    `counts` are its state counts when already made for the whole profile."""
    if counts is None:
        counts = count_states(profile, profile.self_count, classified, thread_owners(profile))
    blocked = [STATES.index(s) for s in BLOCKED]
    threads = (
        ThreadCount(sum(samples), sum(samples[i] for i in blocked))
        for fid, samples in counts.samples.items()
        if fid >= 0
    )
    return activity(threads, lag, idle)


def _all_states(counts: StateCounts, frames: list[str], whole: int) -> list[StateStat]:
    samples, callers = counts.total()
    return state_list(samples, [named(c, frames) for c in callers], whole)


def state_list(samples: list[int], callers: list[dict[str, int]], whole: int) -> list[StateStat]:
    """Every state in STATES order, zeros included; user callers percent of `whole`."""
    return [
        {
            "state": state,
            "samples": count,
            "percent": percent(count, whole),
            "user_callers": top_callers(by_frame, whole),
        }
        for state, count, by_frame in zip(STATES, samples, callers, strict=True)
    ]


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


def _keyword_counts(
    profile: Profile, view: _View, keywords: tuple[Keyword, ...], user_at: list[int]
) -> Matched:
    """Samples, Python and user callers per keyword and category bit (see
    count/keyword_matching.py)."""
    matched = Matched(len(keywords) + len(category_names(keywords)))
    if keywords:
        callers = PythonCallers(profile)
        for node, fresh in fresh_matches(profile, matcher_for(profile, keywords)):
            if view.total[node]:
                matched.add(fresh, view.total[node], callers.of(node), user_at[node])
    return matched


class Matched:
    """Per bit: samples, and samples per Python / user caller frame id (-1: none)."""

    def __init__(self, n_bits: int) -> None:
        self.samples = [0] * n_bits
        self.callers: list[dict[int, int]] = [{} for _ in range(n_bits)]
        self.user_callers: list[dict[int, int]] = [{} for _ in range(n_bits)]

    def add(self, bits: int, value: int, caller: int, user: int) -> None:
        samples, callers, users = self.samples, self.callers, self.user_callers
        for bit in bits_of(bits):
            samples[bit] += value
            per = callers[bit]
            per[caller] = per.get(caller, 0) + value
            per = users[bit]
            per[user] = per.get(user, 0) + value

    def named_callers(self, frames: list[str]) -> list[dict[str, int]]:
        return [
            {frames[f] if f >= 0 else NO_PYTHON_FRAME: c for f, c in per.items()}
            for per in self.callers
        ]

    def named_user_callers(self, frames: list[str]) -> list[dict[str, int]]:
        return [named(per, frames) for per in self.user_callers]


def _threads(
    profile: Profile, whole: int, counts: StateCounts, rounds: int | None, describe=None
) -> list[ThreadStat]:
    out: list[ThreadStat] = []
    frames = profile.frames
    for fid, (tid, name, _) in profile.frame_info().thread.items():
        # A thread's samples are those of the stacks it owns (its frame outermost): a
        # thread frame below another one (py-spy never writes that) adds to the outer
        # thread, as in thread_tables.
        samples = sum(counts.samples[fid]) if fid in counts.samples else 0
        if samples:
            pid = pid_of(profile, profile.parent[profile.frame.index(fid)])
            by_caller = [named(c, frames) for c in counts.callers[fid]]
            states = state_list(counts.samples[fid], by_caller, samples)
            if describe is not None:  # framework.py: the framework frames of its states
                describe(states, counts.frameworks[fid], samples)
            out.append(thread_stat(tid, name, pid, samples, whole, states, rounds))
    out.sort(key=lambda t: (-t["samples"], t["name"], str(t["tid"])))
    return out


def thread_stat(
    tid: int | str,
    name: str,
    pid: int | None,
    samples: int,
    whole: int,
    states: list[StateStat],
    rounds: int | None,
) -> ThreadStat:
    return {
        "name": name,
        "tid": tid,
        "pid": pid,
        "samples": samples,
        "percent": percent(samples, whole),
        "states": states,
        "active_percent": active_percent(samples, rounds),
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


def keyword_list(
    keywords: tuple[Keyword, ...],
    counts: list[int],
    callers: list[dict[str, int]],
    whole: int,
    users: list[dict[str, int]],
) -> list[KeywordStat]:
    rows: list[KeywordStat] = [
        {
            "keyword": kw.keyword,
            "category": kw.category,
            "samples": c,
            "percent": percent(c, whole),
            "python_callers": top_callers(by_frame, whole),
            "user_callers": top_callers(by_user, whole),
        }
        for kw, c, by_frame, by_user in zip(keywords, counts, callers, users, strict=True)
    ]
    return sorted(rows, key=lambda r: -r["samples"])


def category_list(
    keywords: tuple[Keyword, ...],
    counts: list[int],
    callers: list[dict[str, int]],
    whole: int,
    users: list[dict[str, int]],
) -> list[CategoryStat]:
    rows: list[CategoryStat] = [
        {
            "category": cat,
            "samples": c,
            "percent": percent(c, whole),
            "python_callers": top_callers(by_frame, whole),
            "user_callers": top_callers(by_user, whole),
        }
        for cat, c, by_frame, by_user in zip(
            category_names(keywords), counts, callers, users, strict=True
        )
    ]
    return sorted(rows, key=lambda r: -r["samples"])


def top_callers(by_frame: dict[str, int], whole: int) -> list[FrameStat]:
    """The 10 callers with most samples, ties by frame name."""
    return ranked_frames(((c, f) for f, c in by_frame.items() if c), whole, TOP_CALLERS)


def _uncovered(
    profile: Profile, own: list[int], keywords: tuple[Keyword, ...], view: _View, top_n: int
) -> list[FrameStat]:
    native = profile.frame_info().native
    matched = matcher_for(profile, keywords).candidates
    counts = [c if c and native[f] and not matched[f] else 0 for f, c in enumerate(own)]
    return _frame_list(profile, counts, view.grand_total, top_n)
