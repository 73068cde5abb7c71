"""Thread states: every sample in exactly one of STATES, decided by its stack.

The rule table (state_rules.py, extended by a user file: `load_state_rules`) says
which frames identify a state, at one of three levels. Walking a stack root to leaf:
- a `decide` frame sets the state (so the innermost one wins);
- a `primitive` frame (GPU driver calls) sets it unless a `decide` frame above did;
- a `fallback` frame (generic waits: `pthread_cond_wait`, `clock_nanosleep`, `select`)
  sets it only when nothing above set anything; so does any other symbolised native
  frame, as `compute` (a torch op), unless the table marks it `transparent` (the
  interpreter, binding layers, thread entry points).
Unsymbolised `0x... (lib)` frames, Python frames and py-spy's thread/process frames
set nothing: they keep the state from above. A stack that ends with nothing set is
`compute` when its leaf is a Python frame or a symbolised native frame, and `unknown`
when the leaf is an unsymbolised address.

Each sample's `user caller` is the nearest frame of the user's own code (rules/user_code.py)
at or above the frame where its state began (the outermost frame of the innermost
run of frames that kept this state): `train_step (train.py:77)` for a collective
wait reached through `all_reduce (torch/distributed/distributed_c10d.py:3252)`.

Classification runs once per distinct frame (and once per (frame, caller) for
caller-dependent rules); the per-node pass is a flat loop over the trie's arrays
(parents precede children) with a table lookup per node.
"""

from __future__ import annotations

from array import array
from itertools import compress, islice
from typing import NamedTuple

from ..core.profile import Profile
from .rule_table import LEVELS, StateRules, default_state_rules, load_state_rules
from .state_rules import STATES, StateRule
from .user_code import UserCode, is_user_frame

__all__ = [
    "StateRule",
    "StateRules",
    "UserCode",
    "default_state_rules",
    "is_user_frame",
    "load_state_rules",
    "node_states",
]

COMPUTE, UNKNOWN = STATES.index("compute"), STATES.index("unknown")
_CODES = 64  # a path code is level * 16 + state index; 0: nothing set yet
_COMPUTE_MARK = LEVELS["fallback"] * 16 + COMPUTE
_CONTEXTUAL = -1


def _combine(frame_code: int, path_code: int) -> int:
    level = frame_code >> 4
    if not frame_code or (level == 1 and path_code) or (level == 2 and path_code >> 4 == 3):
        return path_code
    return frame_code


_TABLE = [_combine(f, p) for f in range(_CODES) for p in range(_CODES)]
"""_TABLE[frame_code << 6 | path_code]: the path code below a frame."""


class Classified(NamedTuple):
    """Per node of a profile: its state (as a stack end) and its sample's user caller."""

    state: bytearray
    """Index into STATES of the state a stack ending at this node has."""
    user_caller: array
    """Frame id of the user frame the state is attributed to, or -1."""
    user_at: array
    """Frame id of the nearest user frame at or above this node, or -1."""


def node_states(profile: Profile, rules: StateRules | None = None) -> bytearray:
    """A state index (into STATES) for every node, as the state of a stack ending there."""
    return classify(profile, rules).state


def classify(
    profile: Profile, rules: StateRules | None = None, user: UserCode | None = None
) -> Classified:
    """States and user callers of every node (cached on the profile per rules and spec)."""
    rules = rules or default_state_rules()
    user = user or UserCode()
    key = ("states", rules, user.library)
    cached = profile._cache.get(key)
    if cached is None:
        cached = profile._cache[key] = _walk(profile, rules, user)
    return cached  # type: ignore[return-value]


def _walk(profile: Profile, rules: StateRules, user: UserCode) -> Classified:
    frames = _FrameFacts(profile, rules, user)
    n = profile.node_count
    parent, frame = profile.parent, profile.frame
    codes, fclass, leaf, is_user = bytearray(n), frames.code, frames.leaf, frames.user
    state = bytearray(n)
    state[0] = UNKNOWN  # an empty stack (no frame at all) says nothing
    # Frame ids fit 32 bits ("i"): half the memory of "l" on a big capture.
    user_at = array("i", [-1]) * n
    caller = array("i", [-1]) * n
    table, contextual = _TABLE, frames.contextual
    nodes = zip(range(1, n), islice(parent, 1, None), islice(frame, 1, None), strict=True)
    for node, p, f in nodes:
        fc = fclass[f]
        if fc < 0:
            fc = contextual(f, frame[p] if p else -1)
        above = codes[p]
        code = codes[node] = table[fc << 6 | above]
        here = user_at[node] = f if is_user[f] else user_at[p]
        if not code:
            state[node], caller[node] = leaf[f], here
        else:
            state[node] = code & 15
            caller[node] = caller[p] if above and ((above ^ code) & 15) == 0 else here
    return Classified(state, caller, user_at)


class _FrameFacts:
    """Per distinct frame: its code (or _CONTEXTUAL), leaf state and user-code bit."""

    def __init__(self, profile: Profile, rules: StateRules, user: UserCode) -> None:
        info = profile.frame_info()
        self.profile, self.rules = profile, rules
        count = len(profile.frames)
        self.code = array("b", [0]) * count
        self.leaf = bytearray([UNKNOWN]) * count
        self.user = bytearray(count)
        self._candidates: dict[int, list[int]] = {}
        self._pairs: dict[int, int] = {}
        for fid, text in enumerate(profile.frames):
            if info.synthetic[fid]:
                continue
            unsymbolised = info.native[fid] and text.startswith("0x")
            if not unsymbolised:
                self.leaf[fid] = COMPUTE
                self.code[fid] = self._frame_code(fid, text, bool(info.native[fid]))
            self.user[fid] = info.python[fid] and user.is_user(text)

    def _frame_code(self, fid: int, text: str, native: bool) -> int:
        found = self.rules.candidates(text, native)
        if not found:
            return _COMPUTE_MARK if native else 0
        if self.rules.needs_caller(found[0]):
            self._candidates[fid] = found
            return _CONTEXTUAL
        return self.rules.code(found[0])

    def contextual(self, fid: int, caller: int) -> int:
        key = fid << 32 | (caller & 0xFFFFFFFF)
        code = self._pairs.get(key)
        if code is None:
            code = self._pairs[key] = self._resolve(fid, caller)
        return code

    def _resolve(self, fid: int, caller: int) -> int:
        profile = self.profile
        above = None
        if caller >= 0 and not profile.frame_info().synthetic[caller]:
            above = profile.frames[caller]
        for index in self._candidates[fid]:
            if not self.rules.needs_caller(index) or self.rules.caller_matches(index, above):
                return self.rules.code(index)
        return _COMPUTE_MARK if profile.frame_info().native[fid] else 0


NO_USER_FRAME = "(no user frame)"


class StateCounts:
    """Samples per state, and per state and user caller frame id (-1: none), per thread.

    Threads are keyed by their thread frame id (-1: stacks without a thread frame).
    """

    def __init__(self) -> None:
        self.samples: dict[int, list[int]] = {}
        self.callers: dict[int, list[dict[int, int]]] = {}
        self.frameworks: dict[int, list[dict[tuple[int, int], int]]] = {}
        """Per thread and state: (user caller, framework label) -> samples (framework.py)."""

    def add(self, thread: int, state: int, caller: int, value: int, label: int = -1) -> None:
        samples = self.samples.get(thread)
        if samples is None:
            samples = self.samples[thread] = [0] * len(STATES)
            self.callers[thread] = [{} for _ in STATES]
            self.frameworks[thread] = [{} for _ in STATES]
        samples[state] += value
        per = self.callers[thread][state]
        per[caller] = per.get(caller, 0) + value
        if label >= 0:
            under = self.frameworks[thread][state]
            under[caller, label] = under.get((caller, label), 0) + value

    def total_frameworks(self) -> list[dict[tuple[int, int], int]]:
        """Per state, (user caller, framework label) -> samples over all threads."""
        out: list[dict[tuple[int, int], int]] = [{} for _ in STATES]
        for per_state in self.frameworks.values():
            for mine, theirs in zip(out, per_state, strict=True):
                for key, value in theirs.items():
                    mine[key] = mine.get(key, 0) + value
        return out

    def total(self) -> tuple[list[int], list[dict[int, int]]]:
        """Samples and user callers per state over all threads."""
        samples, callers = [0] * len(STATES), [dict[int, int]() for _ in STATES]
        for thread, counts in self.samples.items():
            samples = [a + b for a, b in zip(samples, counts, strict=True)]
            for mine, theirs in zip(callers, self.callers[thread], strict=True):
                for frame, value in theirs.items():
                    mine[frame] = mine.get(frame, 0) + value
        return samples, callers


def count_states(
    profile: Profile,
    own: list[int],
    classified: Classified,
    owner: array,
    frameworks: array | None = None,
) -> StateCounts:
    """Each stack end's samples under its thread, state and user caller (and framework
    label, framework.node_frameworks, when given)."""
    counts = StateCounts()
    state, caller = classified.state, classified.user_caller
    for node in compress(range(profile.node_count), own):
        label = frameworks[node] if frameworks is not None else -1
        counts.add(owner[node], state[node], caller[node], own[node], label)
    return counts


def named(by_frame: dict[int, int], frames: list[str]) -> dict[str, int]:
    """Caller frame ids as names; -1 is NO_USER_FRAME."""
    return {frames[f] if f >= 0 else NO_USER_FRAME: c for f, c in by_frame.items()}
