"""Where every rank stands, and whether anything moves: a whole-job dump's verdict.

Input: per rank, its successive `py-spy dump` outputs as `dump.parse_dump` returns them
(threads with frames innermost first), oldest first; a rank that exited between dumps
has fewer. In the manner of LLNL's STAT (stack trace analysis of hung MPI jobs):

- **The step thread** of a rank, one per rank for all its dumps: the threads named in
  `step_names` (name or tid) when the rank has one; else the threads with the job's
  step-thread name: the name of the threads that stand in a collective on most ranks
  (a torch.distributed / c10d / gloo / NCCL wait), else the name whose stacks hold
  most frames of the user's own code (a trainer thread over a main thread that only
  joins it; `MainThread` on a tie); a rank without such a thread takes its own thread
  with most user frames (its main thread on a tie, then the first listed). Among
  several candidates: the one in a collective, then the one with most user frames.
- **State and user frame** of a stack: the record analysis's thread state
  (states.py, the default rule table) of the stack given root→leaf; a thread py-spy
  found inactive whose stack reads `compute` or `unknown` is `idle` (a dump without
  native frames ends in the Python line that waits). `user_frame`: the innermost
  frame of the user's own code (rules/user_code.py).
- **Classes**: ranks whose step thread, in its last dump, stands at the same call path
  (every frame's function, file and line; unsymbolised native addresses differ per
  process and are left out) form one class, biggest first. A rank *moved* when its
  step thread's stack differs between two of its dumps (every frame, addresses too:
  one process keeps its addresses), or the thread ended; a class is `moving` when
  one of its ranks moved.
- **Odd ranks**: none when all stand in one class, or when the job is progressing
  (where a moving rank was last seen sets nothing apart); else, when at least half of
  the ranks wait in a collective, the ranks that do not; else the ranks outside the
  biggest class, when that class holds more than half of them.
- **Verdict**: `unclear` with no stack or with one dump per rank; `stuck` when no step
  thread moved across two or more dumps; `progressing` when the ranks moved; `unclear`
  when only some moved while the biggest class, in a collective, did not (a slow rank
  the others wait for each step, or one looping while the job hangs).
  Identical stacks cannot tell a wait that lasts from the same wait reached again: a
  job whose every dump lands in the same collective reads `stuck`; dump again at
  another interval when in doubt.
- **Layouts** (layout.py): when the ranks said where they sit in the job's parallel
  layout, the verdict names the parallel group of the ranks it singles out ("rank-29
  (pipeline stage 3 of data-parallel replica 7) stands in …") and each class the group
  its ranks share (`group`); without layouts nothing changes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, NamedTuple

from ..core.frames import ThreadFilter, installed_packages
from ..core.profile import ProfileBuilder
from ..core.rank_names import natural, ranks_label
from ..core.types import (
    DumpThread,
    FrameworkFrame,
    Stacks,
    StacksClass,
    StacksRank,
    StacksVerdict,
)
from ..rules.framework import (
    default_framework_rules,
    framework_text,
    site_text,
    stack_framework,
)
from ..rules.state_rules import STATES
from ..rules.states import UserCode, classify
from .layout import NO_LAYOUTS, Layouts

__all__ = ["Stacks", "StacksClass", "StacksRank", "StacksVerdict", "analyze_stacks"]

Kind = Literal["stuck", "progressing", "unclear"]
COLLECTIVE, IDLE = "collective", "idle"
MAIN_THREAD = "MainThread"
_HEX = re.compile(r"0[xX][0-9a-fA-F]+\Z")
_ADDRESS = "0x0"
"""Stands for every unsymbolised address when a stack is classified (they set no state)."""


class _Thread(NamedTuple):
    """One thread in one dump: `frames` root first, as py-spy wrote them; `key` the same
    with unsymbolised addresses made alike (what states and classes compare)."""

    tid: int | str
    name: str
    frames: tuple[str, ...]
    key: tuple[str, ...]
    active: bool | None
    main: bool


class _Rank(NamedTuple):
    name: str
    stacks: list[_Thread | None]
    """The step thread in each dump (None where it was absent); [None] without dumps."""
    moving: bool
    dumps: int


def analyze_stacks(
    ranks: Sequence[tuple[str, Sequence[list[DumpThread]]]],
    step_names: Iterable[str] = (),
    layouts: Mapping[str, Mapping[str, int] | None] | None = None,
) -> Stacks:
    """The verdict, classes and per-rank step threads of a whole-job dump (module doc).

    `ranks`: (rank name, its dumps oldest first, each parsed by `dump.parse_dump`);
    `step_names`: the run's step-thread names or tids, if any; `layouts`: rank name ->
    its place in the parallel layout, where known."""
    places = Layouts(layouts)
    facts = _Facts(_installed(ranks))
    dumped = [(name, [[_thread(t) for t in dump] for dump in dumps]) for name, dumps in ranks]
    wanted = ThreadFilter(step_names)
    step_name = _job_step_name([t for _, d in dumped for dump in d for t in dump], facts)
    views = [_rank(name, dumps, wanted, step_name, facts) for name, dumps in dumped]
    views.sort(key=lambda v: natural(v.name))
    classes = _classes(views, facts, places)
    return {
        "verdict": _verdict(views, classes, places),
        "classes": classes,
        "ranks": [_rank_row(v, facts) for v in views],
    }


# --- threads and their facts ---


def _thread(thread: DumpThread) -> _Thread:
    frames, key = [], []
    for frame in reversed(thread.get("frames") or []):
        name, location = frame.get("name") or "?", frame.get("location") or ""
        text = f"{name} ({location})" if location else name
        frames.append(text)
        address = _HEX.match(name) is not None
        key.append((f"{_ADDRESS} ({location})" if location else _ADDRESS) if address else text)
    tid, pid = thread.get("tid", ""), thread.get("pid")
    main = thread.get("name") == MAIN_THREAD or (pid is not None and tid == pid)
    name = thread.get("name") or ""
    return _Thread(tid, name, tuple(frames), tuple(key), thread.get("active"), main)


def _installed(ranks: Sequence[tuple[str, Sequence[list[DumpThread]]]]) -> frozenset[str]:
    """Packages the dumps' full files show installed (frames.installed_packages): library
    code once frames are named short, as a record's Profile.installed."""
    paths = (f.get("path") for _, dumps in ranks for d in dumps for t in d for f in t["frames"])
    return installed_packages(f"? ({p})" for p in paths if p)


def _is_address(frame: str) -> bool:
    return frame == _ADDRESS or frame.startswith(f"{_ADDRESS} (")


class _Facts:
    """A stack's state and innermost user frame, worked out once per distinct key."""

    def __init__(self, installed: Iterable[str] = ()) -> None:
        self.user = UserCode(installed)
        self._seen: dict[tuple[str, ...], tuple[str, str | None]] = {}
        self._frameworks: dict[tuple[str, ...], FrameworkFrame | None] = {}

    def classified(self, key: tuple[str, ...]) -> tuple[str, str | None]:
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = self._classify(key)
        return found

    def _classify(self, key: tuple[str, ...]) -> tuple[str, str | None]:
        if not key:
            return "unknown", None
        builder = ProfileBuilder()
        leaf = builder.add(key, 1)
        profile = builder.build("raw")
        classified = classify(profile, user=self.user)
        at = classified.user_at[leaf]
        return STATES[classified.state[leaf]], profile.frames[at] if at >= 0 else None

    def state(self, thread: _Thread | None) -> str:
        if thread is None:
            return "unknown"
        state = self.classified(thread.key)[0]
        return IDLE if state in ("compute", "unknown") and thread.active is False else state

    def user_frame(self, thread: _Thread | None) -> str | None:
        return None if thread is None else self.classified(thread.key)[1]

    def framework(self, thread: _Thread | None) -> FrameworkFrame | None:
        """The framework frame of the stack (framework.py), None without one."""
        if thread is None:
            return None
        if thread.key not in self._frameworks:
            found = stack_framework(thread.key, default_framework_rules(), self.user.is_user)
            self._frameworks[thread.key] = found
        return self._frameworks[thread.key]

    def user_frames(self, thread: _Thread) -> int:
        return sum(self.user.is_user(f) for f in thread.key if not _is_address(f))


# --- the step thread ---


def _job_step_name(threads: list[_Thread], facts: _Facts) -> str | None:
    """The name of the threads in a collective on most ranks' dumps, else the name whose
    stacks hold most user frames (MainThread on a tie); None when no thread has either."""
    waiting = Counter(t.name for t in threads if t.name and facts.state(t) == COLLECTIVE)
    if waiting:
        return waiting.most_common(1)[0][0]
    mine: Counter[str] = Counter()
    for thread in threads:
        if thread.name:
            mine[thread.name] += facts.user_frames(thread)
    top = max(mine.values(), default=0)
    if not top:
        return None
    best = sorted(name for name, count in mine.items() if count == top)
    return MAIN_THREAD if MAIN_THREAD in best else best[0]


def _rank(
    name: str, dumps: list[list[_Thread]], wanted: ThreadFilter, step: str | None, facts: _Facts
) -> _Rank:
    tid = _step_tid(dumps, wanted, step, facts)
    stacks = [next((t for t in dump if t.tid == tid), None) for dump in dumps]
    seen = {s.frames if s is not None else None for s in stacks}
    return _Rank(name, stacks or [None], len(seen) > 1, len(dumps))


def _step_tid(
    dumps: list[list[_Thread]], wanted: ThreadFilter, step: str | None, facts: _Facts
) -> int | str | None:
    """The rank's step thread (module doc), by tid, so each dump shows the same one."""
    threads = [t for dump in dumps for t in dump]
    if not threads:
        return None
    named = [t for t in threads if wanted.wanted and wanted.matches(t.tid, t.name)]
    candidates = named or [t for t in threads if step and t.name == step] or threads
    # Per tid: in a collective in some dump, user frames over all dumps, main, first seen.
    score: dict[int | str, list[int]] = {}
    for order, thread in enumerate(candidates):
        mine = score.setdefault(thread.tid, [0, 0, thread.main, -order])
        mine[0] |= facts.state(thread) == COLLECTIVE
        mine[1] += facts.user_frames(thread)
    return max(score, key=score.__getitem__)


def _rank_row(view: _Rank, facts: _Facts) -> StacksRank:
    last = view.stacks[-1]
    return {
        "name": view.name,
        "thread": _thread_label(last),
        "user_frame": facts.user_frame(last),
        "state": facts.state(last),
        "moving": view.moving,
        "dumps": view.dumps,
        "framework_frame": facts.framework(last),
    }


def _thread_label(thread: _Thread | None) -> str:
    return "" if thread is None else thread.name or str(thread.tid)


# --- classes ---


def _classes(
    views: Sequence[_Rank], facts: _Facts, places: Layouts = NO_LAYOUTS
) -> list[StacksClass]:
    """Ranks grouped by their step thread's call path in the last dump, biggest first."""
    groups: dict[tuple[str, ...], list[_Rank]] = {}
    for view in views:
        last = view.stacks[-1]
        path = tuple(f for f in last.key if not _is_address(f)) if last else ()
        groups.setdefault(path, []).append(view)
    classes = [_describe(path, members, facts, places) for path, members in groups.items()]
    classes.sort(key=lambda c: (-len(c["ranks"]), c["state"] != COLLECTIVE, natural(c["ranks"][0])))
    return classes


def _describe(
    path: tuple[str, ...], members: list[_Rank], facts: _Facts, places: Layouts
) -> StacksClass:
    last = members[0].stacks[-1]
    described: StacksClass = {
        "ranks": [m.name for m in members],
        "thread": _thread_label(last),
        "user_frame": facts.user_frame(last),
        "state": facts.state(last),
        "frames": list(path),
        "moving": any(m.moving for m in members),
        "framework_frame": facts.framework(last),
    }
    if group := places.place(described["ranks"]):
        described["group"] = group
    return described


# --- the verdict ---


def odd_ranks(classes: Sequence[StacksClass]) -> list[str]:
    """The ranks that stand apart (see the module doc), in natural order."""
    if len(classes) < 2:
        return []
    everyone = [n for c in classes for n in c["ranks"]]
    waiting = [n for c in classes if c["state"] == COLLECTIVE for n in c["ranks"]]
    if waiting and 2 * len(waiting) >= len(everyone) and len(waiting) < len(everyone):
        apart = [n for c in classes if c["state"] != COLLECTIVE for n in c["ranks"]]
    elif 2 * len(classes[0]["ranks"]) > len(everyone):
        apart = everyone[len(classes[0]["ranks"]) :]
    else:
        apart = []
    return sorted(apart, key=natural)


def _verdict(
    views: Sequence[_Rank], classes: list[StacksClass], places: Layouts = NO_LAYOUTS
) -> StacksVerdict:
    if not views or all(v.stacks[-1] is None for v in views):
        return _unclear("No rank gave a dump with a thread in it: nothing to tell.")
    dumps = max(v.dumps for v in views)
    moved = [v.name for v in views if v.moving]
    odd = odd_ranks(classes)
    apart = [c for c in classes if set(c["ranks"]) <= set(odd)]
    rest = [c for c in classes if c not in apart]
    kind = _kind(dumps, moved, len(views), rest)
    if kind == "progressing":  # where a moving rank was last seen sets nothing apart
        odd, apart, rest = [], [], classes
    shown = apart[0] if apart else classes[0]
    sentence = _where(apart, rest, classes, places) + _movement(kind, dumps, moved)
    return {
        "kind": kind,
        "odd": odd,
        "explanation": sentence + _short_ranks(views, dumps),
        "user_frame": shown["user_frame"],
        "state": shown["state"],
        "framework_frame": shown.get("framework_frame"),
    }


def _unclear(text: str) -> StacksVerdict:
    return {
        "kind": "unclear",
        "odd": [],
        "explanation": text,
        "user_frame": None,
        "state": None,
        "framework_frame": None,
    }


def _kind(dumps: int, moved: list[str], ranks: int, rest: list[StacksClass]) -> Kind:
    if dumps < 2:
        return "unclear"
    if not moved:
        return "stuck"
    waits_still = bool(rest) and rest[0]["state"] == COLLECTIVE and not rest[0]["moving"]
    return "unclear" if waits_still and 2 * len(moved) < ranks else "progressing"


def _where(
    apart: list[StacksClass],
    rest: list[StacksClass],
    classes: list[StacksClass],
    places: Layouts = NO_LAYOUTS,
) -> str:
    """`rank-2 stands in `f (x.py:9)` (idle) while ranks 0-1, 3 wait in a collective at ...`;
    the ranks set apart named with their parallel group, when known."""
    if not apart:
        if len(classes) == 1:
            count = len(classes[0]["ranks"])
            who = "The only rank" if count == 1 else f"All {count} ranks"
            return f"{who} {_at(classes[0], count > 1)}"
        most = _names(classes[0], places)
        return f"The ranks stand in {len(classes)} places, the most ({most}) " + (
            _at(classes[0], len(classes[0]["ranks"]) > 1)
        )
    sentence = f"{_names(apart[0], places)} {_at(apart[0], len(apart[0]['ranks']) > 1)}"
    others = sum(len(c["ranks"]) for c in apart[1:])
    if others:
        sentence += f" ({others} more odd rank{'s' if others > 1 else ''} elsewhere)"
    waiting = [n for c in rest for n in c["ranks"]]
    verb = _at(rest[0], len(waiting) > 1) if len(rest) == 1 else _at_most(rest)
    label = _label(waiting)
    if "…" in label:  # elided runs: name them by what they are
        label = f"the other {len(waiting)} ranks"
    return f"{sentence} while {label} {verb}"


def _at(cls: StacksClass, plural: bool) -> str:
    frame, found = _frame(cls), cls.get("framework_frame")
    if cls["state"] == COLLECTIVE:
        where = f"in {site_text(cls['user_frame'], found)}" if found else f"at `{frame}`"
        return f"{'wait' if plural else 'waits'} in a collective {where}"
    if found:
        return f"{'stand' if plural else 'stands'} {_in_state(cls, found)}"
    return f"{'stand' if plural else 'stands'} in `{frame}` ({cls['state']})"


def _in_state(cls: StacksClass, found: FrameworkFrame) -> str:
    """`in `f (x.py:9)` (idle), called from `CallbackHandler.on_step_end` (callback)`."""
    user, state = cls["user_frame"], cls["state"]
    if not user:
        return f"in {framework_text(found)} ({state})"
    if found["user_inside"]:
        return f"in `{user}` ({state}), called from {framework_text(found)}"
    return f"in {framework_text(found)}, called from `{user}` ({state})"


def _at_most(rest: list[StacksClass]) -> str:
    """Several classes on the waiting side: where the most of them stand."""
    if all(c["state"] == COLLECTIVE for c in rest):
        found = rest[0].get("framework_frame")
        if found:
            return f"wait in collectives, the most in {site_text(rest[0]['user_frame'], found)}"
        return f"wait in collectives, the most at `{_frame(rest[0])}`"
    return f"stand in {len(rest)} places, the most in `{_frame(rest[0])}` ({rest[0]['state']})"


def _frame(cls: StacksClass) -> str:
    """The class's user frame, else its innermost frame."""
    return cls["user_frame"] or (cls["frames"][-1] if cls["frames"] else "an empty stack")


def _names(cls: StacksClass, places: Layouts = NO_LAYOUTS) -> str:
    return places.named(_label(cls["ranks"]), cls["ranks"])


def _label(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ranks_label(sorted(names, key=natural))


def _movement(kind: str, dumps: int, moved: list[str]) -> str:
    if dumps < 2:
        return (
            ". One dump per rank cannot tell stuck from progressing: dump again (repeat 2 or more)."
        )
    if kind == "stuck":
        return f"; no step thread moved across {dumps} dumps."
    if kind == "progressing":
        return f"; {_label(moved)} moved between the {dumps} dumps: the job is progressing."
    return (
        f"; only {_label(moved)} moved across {dumps} dumps: a slow rank the others wait for, "
        "or one that loops while the job hangs. Dump again to tell."
    )


def _short_ranks(views: Sequence[_Rank], dumps: int) -> str:
    """` rank-3 gave 1 dump of 3.`: a rank that ended, or py-spy could not reach, between dumps."""
    short = [v for v in views if v.dumps < dumps]
    if not short or dumps < 2:
        return ""
    first = short[0]
    count = first.dumps
    more = f" ({len(short) - 1} more such)" if len(short) > 1 else ""
    return f" {first.name} gave {count} dump{'s' if count != 1 else ''} of {dumps}{more}."
