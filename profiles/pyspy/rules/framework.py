"""The framework's step: which frame of a training framework a sample stands in.

A job that lives inside a framework (Hugging Face Trainer, accelerate, Lightning,
DeepSpeed, torch DDP) has one user frame for most of its stack: the line that calls
`Trainer.train()`. The informative place is the framework's step phase. The table
(framework_rules.py; a user adds rows in the state-rules file, docs/states.md) says
which frames mark one. On a stack root→leaf, the framework of the outermost matching
frame owns the step; the frame named is its innermost `step` row frame (a Python
frame), and the phase is that of the innermost matching frame of any framework:
`Trainer.training_step` (DDP backward) for a collective wait in DDP's reducer under
the Trainer's step.

`user_inside` says which way round the user's frame and the framework's sit: false
when the user's code calls into the framework (`main (train.py:106)` calls
`Trainer.train`), true when the framework calls the user's code (a callback, a
dataset's `__getitem__`, an overridden `training_step`). Sentences read
"in `Trainer.training_step` (DDP backward), called from `main (train.py:106)`" or
"in `on_step_end (train.py:60)`, called from `CallbackHandler.on_step_end` (callback)".
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..core.frames import is_python, split_location
from ..core.profile import Profile
from ..core.types import FrameworkCaller, FrameworkFrame
from ..errors import ProfileError
from .framework_rules import DEFAULT_FRAMEWORK_RULES
from .rule_table import (
    StateRules,
    file_matches,
    is_plain_name,
    normalise_native_name,
    rule_pattern,
)
from .state_rules import StateRule

TOP_FRAMEWORK_CALLERS = 10


class _Compiled(NamedTuple):
    name: Any
    file: Any


class FrameworkRules:
    """The compiled framework rows: the user's first, then framework_rules' defaults."""

    def __init__(self, rules: Sequence[StateRule] = (), source: str = "state rules") -> None:
        self.rules = (*rules, *DEFAULT_FRAMEWORK_RULES)
        self._normalise, self.file_matches = normalise_native_name, file_matches
        self._compiled = []
        for rule in self.rules:
            if not rule.framework.strip() or not rule.phase.strip():
                raise ProfileError(f"{source}: a {rule.state} row needs a framework and a phase")
            if rule.kind not in ("", "native", "python") or not rule.name.strip():
                raise ProfileError(f"{source}: {rule.name!r}: bad framework row")
            name = None if is_plain_name(rule.name) else rule_pattern(rule.name, source)
            file = rule_pattern(rule.file, source, path=True) if rule.file else None
            self._compiled.append(_Compiled(name, file))
        self._seen: dict[str, int] = {}

    def match(self, frame: str) -> int:
        """The index of the first row matching `frame`, or -1 (cached per frame text)."""
        found = self._seen.get(frame)
        if found is None:
            found = self._seen[frame] = self._match(frame)
        return found

    def _match(self, frame: str) -> int:
        python = is_python(frame)
        name, location = split_location(frame)
        if not python:
            if not location or frame.startswith(("thread (", "process ")):
                return -1
            name = self._normalise(name)
        file = location.rsplit(":", 1)[0] if python and ":" in location else location
        kind = "python" if python else "native"
        for index, (rule, compiled) in enumerate(zip(self.rules, self._compiled, strict=True)):
            if rule.kind not in ("", kind):
                continue
            named = rule.name == name if compiled.name is None else compiled.name.fullmatch(name)
            if named and self.file_matches(compiled.file, file):
                return index
        return -1

    def names_step(self, index: int, frame: str, owner: str) -> bool:
        rule = self.rules[index]
        return rule.state == "step" and rule.framework == owner and is_python(frame)


_DEFAULT: FrameworkRules | None = None


def default_framework_rules() -> FrameworkRules:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = FrameworkRules()
    return _DEFAULT


def rules_of(state_rules: StateRules | None) -> FrameworkRules:
    """The framework rows of a StateRules, its user's rows first, compiled once (None,
    or no rows of the user's: the defaults)."""
    if state_rules is None or not state_rules.framework_rows:
        return default_framework_rules()
    if state_rules._frameworks is None:
        state_rules._frameworks = FrameworkRules(state_rules.framework_rows)
    return state_rules._frameworks


class _Label(NamedTuple):
    shown: int
    """Frame id of the frame named (-1: only a phase matched)."""
    row: int
    """The innermost matching row (its phase)."""
    outer_user: int
    """Frame id of the nearest user frame at or above the frame named (-1: none)."""
    owner: str


class NodeFrameworks(NamedTuple):
    label: array
    """Per node: an index into `labels`, or -1 when no framework frame is on its path."""
    labels: list[_Label]


def node_frameworks(profile: Profile, rules: FrameworkRules, user_at: array) -> NodeFrameworks:
    """The framework label of every node's path (module doc), cached on the profile."""
    key = ("frameworks", id(rules))
    cached = profile._cache.get(key)
    if cached is None:
        cached = profile._cache[key] = _walk(profile, rules, user_at)
    return cached  # type: ignore[return-value]


def _walk(profile: Profile, rules: FrameworkRules, user_at: array) -> NodeFrameworks:
    synthetic = profile.frame_info().synthetic
    matched = [-1 if synthetic[f] else rules.match(t) for f, t in enumerate(profile.frames)]
    labels: list[_Label] = []
    interned: dict[_Label, int] = {}
    moves: dict[tuple[int, int, int], int] = {}
    parent, frame = profile.parent, profile.frame
    label = array("i", [-1]) * profile.node_count
    for node in range(1, profile.node_count):
        above, fid = label[parent[node]], frame[node]
        row = matched[fid]
        if row < 0:
            label[node] = above
            continue
        move = (above, fid, user_at[node])
        found = moves.get(move)
        if found is None:
            new = _next(
                labels[above] if above >= 0 else None, row, fid, profile, rules, user_at[node]
            )
            found = moves[move] = interned.setdefault(new, len(labels))
            if found == len(labels):
                labels.append(new)
        label[node] = found
    return NodeFrameworks(label, labels)


def _next(
    cur: _Label | None, row: int, fid: int, profile: Profile, rules: FrameworkRules, user: int
) -> _Label:
    owner = cur.owner if cur else rules.rules[row].framework
    if rules.names_step(row, profile.frames[fid], owner):
        return _Label(fid, row, user, owner)
    return _Label(cur.shown if cur else -1, row, cur.outer_user if cur else -1, owner)


def framework_frame(
    label: _Label, frames: Sequence[str], rules: FrameworkRules, user_frame: int
) -> FrameworkFrame:
    """The JSON form of a label, for a sample whose user caller is `user_frame` (-1: none)."""
    shown = frames[label.shown] if label.shown >= 0 else ""
    rule = rules.rules[label.row]
    return {
        "frame": shown,
        "function": split_location(shown)[0] if shown else "",
        "framework": label.owner,
        "phase": rule.phase,
        "user_inside": label.shown >= 0 and user_frame >= 0 and user_frame != label.outer_user,
    }


def stack_framework(
    frames: Iterable[str], rules: FrameworkRules, is_user: Any
) -> FrameworkFrame | None:
    """The framework frame of one stack given root→leaf (a dump), with `user_inside`
    for its innermost user frame (`is_user(frame)`); None when no row matches."""
    owner, shown, row, user_after = None, "", -1, False
    for frame in frames:
        if is_user(frame):
            user_after = bool(shown)
        index = rules.match(frame)
        if index < 0:
            continue
        owner = owner or rules.rules[index].framework
        row = index
        if rules.names_step(index, frame, owner):
            shown, user_after = frame, False
    if owner is None:
        return None
    return {
        "frame": shown,
        "function": split_location(shown)[0] if shown else "",
        "framework": owner,
        "phase": rules.rules[row].phase,
        "user_inside": user_after,
    }


def caller_rows(
    counts: Mapping[tuple[int, int], int],
    labels: Sequence[_Label],
    frames: Sequence[str],
    rules: FrameworkRules,
    whole: int,
    no_user: str,
) -> list[FrameworkCaller]:
    """(user caller id, label) -> samples as `framework_callers` rows, top first."""
    merged: dict[tuple, int] = {}
    for (caller, label), samples in counts.items():
        shown = framework_frame(labels[label], frames, rules, caller)
        user = frames[caller] if caller >= 0 else no_user
        key = (*(shown[k] for k in FRAME_KEYS), user)  # type: ignore[literal-required]
        merged[key] = merged.get(key, 0) + samples
    return top_framework_callers(merged, whole)


FRAME_KEYS = ("frame", "function", "framework", "phase", "user_inside")


def top_framework_callers(
    merged: Mapping[tuple, int], whole: int, top: int = TOP_FRAMEWORK_CALLERS
) -> list[FrameworkCaller]:
    """Rows from (frame, function, framework, phase, user_inside, user_frame) -> samples."""
    rows = sorted(merged.items(), key=lambda kv: (-kv[1], str(kv[0])))[:top]
    return [
        {
            **dict(zip(FRAME_KEYS, key[:5], strict=True)),  # type: ignore[typeddict-item]
            "user_frame": key[5],
            "samples": samples,
            "percent": round(100 * samples / whole, 2) if whole else 0.0,
        }
        for key, samples in rows
        if samples
    ]


def caller_key(row: Mapping[str, Any]) -> tuple:
    """A framework_callers row's identity (what pooling adds up by)."""
    return (*(row[k] for k in FRAME_KEYS), row["user_frame"])


def top_for(by_key: Mapping[tuple, int], user_frame: str | None = None) -> FrameworkFrame | None:
    """The framework frame with most samples (of `user_frame` only, when given)."""
    best: dict[tuple, int] = {}
    for key, samples in by_key.items():
        if user_frame is None or key[5] == user_frame:
            best[key[:5]] = best.get(key[:5], 0) + samples
    if not best:
        return None
    key = min(best, key=lambda k: (-best[k], str(k)))
    return dict(zip(FRAME_KEYS, key, strict=True))  # type: ignore[return-value]


def framework_text(found: Mapping[str, Any]) -> str:
    """`` `Trainer.training_step` (DDP backward) ``, or the phase alone."""
    if not found.get("function"):
        return found["phase"]
    return f"`{found['function']}` ({found['phase']})"


def site_text(user_frame: str | None, found: Mapping[str, Any] | None) -> str:
    """Where a thread stands, its user frame and the framework frame in the order they
    call each other; the user frame alone (in backticks) without a framework frame."""
    if not found:
        return f"`{user_frame}`" if user_frame else ""
    framework = framework_text(found)
    if not user_frame:
        return framework
    if found.get("user_inside"):
        return f"`{user_frame}`, called from {framework}"
    return f"{framework}, called from `{user_frame}`"


def describer(found: NodeFrameworks, frames: Sequence[str], rules: FrameworkRules, no_user: str):
    """A function that adds `framework_callers` to the rows of a state list from the
    per-state (user caller, label) counts, percent of `whole`; rows without any stay as
    they are (StateCounts.frameworks)."""

    def describe(
        states: list[Any], per_state: Sequence[Mapping[tuple[int, int], int]], whole: int
    ) -> None:
        for row, counts in zip(states, per_state, strict=True):
            if counts:
                rows = caller_rows(counts, found.labels, frames, rules, whole, no_user)
                if rows:
                    row["framework_callers"] = rows

    return describe
