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

Each sample's `user caller` is the nearest frame of the user's own code (usercode.py)
at or above the frame where its state began (the outermost frame of the innermost
run of frames that kept this state): `train_step (train.py:77)` for a collective
wait reached through `all_reduce (torch/distributed/distributed_c10d.py:3252)`.

Classification runs once per distinct frame (and once per (frame, caller) for
caller-dependent rules); the per-node pass is a flat loop over the trie's arrays
(parents precede children) with a table lookup per node.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from .errors import ProfileError
from .frames import is_interpreter, is_python, split_location
from .profile import Profile
from .state_rules import DEFAULT_RULES, StateRule
from .usercode import UserCode, file_of, is_user_frame

__all__ = [
    "STATES",
    "StateRule",
    "StateRules",
    "UserCode",
    "default_state_rules",
    "is_user_frame",
    "load_state_rules",
    "node_states",
]

STATES: tuple[str, ...] = (
    "compute",
    "gpu_launch",
    "gpu_sync",
    "host_sync",
    "allocator",
    "collective",
    "data_wait",
    "backpressure",
    "gil",
    "idle",
    "unknown",
)
COMPUTE, UNKNOWN = STATES.index("compute"), STATES.index("unknown")
TRANSPARENT = "transparent"
LEVELS = {"fallback": 1, "primitive": 2, "decide": 3}
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


class _Rule(NamedTuple):
    code: int
    """level * 16 + state index, or 0 for a transparent frame."""
    name: re.Pattern[str] | None
    """None for a plain name (looked up exactly, no pattern needed)."""
    file: re.Pattern[str] | None
    caller: re.Pattern[str] | str | None
    caller_file: re.Pattern[str] | None
    kind: str


class StateRules:
    """A compiled rule table: the user's rules first, then the defaults."""

    def __init__(self, rules: Sequence[StateRule], source: str = "state rules") -> None:
        self.rules = tuple(rules)
        self._compiled = [_compile_rule(rule, source) for rule in self.rules]
        self._exact: dict[str, list[int]] = {}
        self._any_name: list[int] = []
        wild: list[int] = []
        for index, rule in enumerate(self.rules):
            if rule.name == "*":
                self._any_name.append(index)
            elif _is_plain(rule.name):
                self._exact.setdefault(rule.name, []).append(index)
            else:
                wild.append(index)
        self._wild = wild
        names = "|".join(f"(?:{self._compiled[i].name.pattern})" for i in wild)  # type: ignore[union-attr]
        self._any_wild = re.compile(names).fullmatch if wild else None

    def __repr__(self) -> str:
        return f"StateRules({len(self.rules)} rules)"

    def candidates(self, frame: str, native: bool) -> list[int]:
        """Indexes of the rules whose name, file and kind match `frame`, in order."""
        name, _ = split_location(frame)
        if native:
            name = normalise_native_name(name)
        found = [*self._exact.get(name, ()), *self._any_name]
        if self._any_wild is not None and self._any_wild(name):
            found += [i for i in self._wild if self._compiled[i].name.fullmatch(name)]  # type: ignore[union-attr]
        kind = "native" if native else "python"
        file = file_of(frame)
        return sorted(
            i
            for i in found
            if self._compiled[i].kind in ("", kind) and _file_matches(self._compiled[i].file, file)
        )

    def needs_caller(self, index: int) -> bool:
        rule = self._compiled[index]
        return rule.caller is not None or rule.caller_file is not None

    def code(self, index: int) -> int:
        return self._compiled[index].code

    def caller_matches(self, index: int, caller: str | None) -> bool:
        """Whether the frame above (None at the root or a synthetic frame) fits rule `index`."""
        rule = self._compiled[index]
        if caller is None:
            return False
        if rule.caller == "python":
            if not (is_python(caller) or is_interpreter(caller)):
                return False
        elif isinstance(rule.caller, re.Pattern):
            if not rule.caller.fullmatch(normalise_native_name(split_location(caller)[0])):
                return False
        return _file_matches(rule.caller_file, file_of(caller))


def default_state_rules() -> StateRules:
    """The built-in table (state_rules.DEFAULT_RULES), compiled once."""
    global _DEFAULT_RULES
    if _DEFAULT_RULES is None:
        _DEFAULT_RULES = StateRules(DEFAULT_RULES, "default state rules")
    return _DEFAULT_RULES


_DEFAULT_RULES: StateRules | None = None


def load_state_rules(path: str | Path) -> StateRules:
    """The user's rules from `path`, ahead of the defaults; ProfileError when invalid.

    JSON: `[{"state": "data_wait", "name": "Prefetcher.next", "file": "loader.py"}, ...]`
    with the fields of state_rules.StateRule; or text, one `STATE: NAME` per line
    (`#` comments), optionally followed by ` in FILE`, ` under CALLER` and
    ` [LEVEL]` in that order.
    """
    name = Path(path).name
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"state rules {name}: cannot read it ({exc})") from None
    rules = _rules_from_json(name, text) if text.lstrip().startswith("[") else _rules_from_text(name, text)
    return StateRules((*rules, *DEFAULT_RULES), f"state rules {name}")


def _rules_from_json(name: str, text: str) -> list[StateRule]:
    try:
        items = json.loads(text)
        if not isinstance(items, list):
            raise TypeError("not a list")
        return [StateRule(**{k: str(v) for k, v in item.items()}) for item in items]
    except (ValueError, TypeError, AttributeError) as exc:
        raise ProfileError(
            f'state rules {name}: expected [{{"state": ..., "name": ...}}, ...] ({exc})'
        ) from None


_TEXT_RULE = re.compile(
    r"(?P<state>\w+)\s*:\s*(?P<name>.+?)(?: in (?P<file>\S+))?(?: under (?P<caller>\S+))?"
    r"(?: \[(?P<level>\w+)\])?\Z"
)


def _rules_from_text(name: str, text: str) -> list[StateRule]:
    rules = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _TEXT_RULE.match(line)
        if match is None:
            raise ProfileError(f"state rules {name}: line {number} is not `STATE: NAME`")
        fields = {k: v for k, v in match.groupdict().items() if v}
        rules.append(StateRule(**fields))
    return rules


def _compile_rule(rule: StateRule, source: str) -> _Rule:
    if rule.state != TRANSPARENT and rule.state not in STATES:
        raise ProfileError(
            f"{source}: unknown state {rule.state!r} (one of {', '.join(STATES)} or transparent)"
        )
    if rule.level not in LEVELS:
        raise ProfileError(f"{source}: unknown level {rule.level!r} (decide, primitive, fallback)")
    if rule.kind not in ("", "native", "python"):
        raise ProfileError(f"{source}: unknown kind {rule.kind!r} (native, python or empty)")
    code = 0 if rule.state == TRANSPARENT else LEVELS[rule.level] * 16 + STATES.index(rule.state)
    caller = rule.caller or None
    if caller is not None and caller != "python":
        caller = _pattern(caller, source)
    file = _pattern(rule.file, source, path=True) if rule.file else None
    caller_file = _pattern(rule.caller_file, source, path=True) if rule.caller_file else None
    if not rule.name.strip():
        raise ProfileError(f"{source}: a rule needs a name")
    name = None if _is_plain(rule.name) else _pattern(rule.name, source)
    if name is not None and name.fullmatch("") and not (file or caller or caller_file):
        raise ProfileError(f"{source}: {rule.name!r} would match every frame: add a file")
    return _Rule(code, name, file, caller, caller_file, rule.kind)


def _is_plain(text: str) -> bool:
    return "*" not in text and not text.startswith("re:")


def _pattern(text: str, source: str, path: bool = False) -> re.Pattern[str]:
    """A `*` glob or `re:REGEX`, compiled for a whole-name match (after any `/` for paths)."""
    if not text.strip():
        raise ProfileError(f"{source}: a rule needs a name")
    if text.startswith("re:"):
        body = text[3:]
    else:
        body = ".*".join(re.escape(part) for part in text.split("*"))
    try:
        compiled = re.compile(f"(?:.*/)?(?:{body})" if path else f"(?:{body})")
    except (re.error, RecursionError, OverflowError) as exc:
        raise ProfileError(f"{source}: bad pattern {text!r} ({exc})") from None
    return compiled


def _file_matches(pattern: re.Pattern[str] | None, file: str) -> bool:
    return pattern is None or pattern.fullmatch(file) is not None


# Tokens whose brackets are no template or parameter list: kept as they are.
_KEEP = ("(anonymous namespace)", *(f"operator{op}" for op in "<<= >>= <=> << >> <= >= ->* -> < > () []".split()))
_KEPT = re.compile("|".join(re.escape(token) for token in _KEEP))
_CLONE = re.compile(r" \[clone [^\]]*\]")
_INNERMOST = re.compile(r"<[^<>()]*>|\([^<>()]*\)")


def normalise_native_name(name: str) -> str:
    """`a::b<T, c<int>>::f(int) [clone .cold]` -> `a::b<>::f()`: template arguments,
    parameter lists and clone suffixes removed, so a pattern never matches inside them."""
    if "<" not in name and "(" not in name and "[" not in name:
        return name
    name = _KEPT.sub(lambda m: chr(0xE000 + _KEEP.index(m.group())), _CLONE.sub("", name))
    while True:  # innermost groups first; each pass removes one level of nesting
        shorter = _INNERMOST.sub(_placeholder, name)
        if shorter == name:
            break
        name = shorter
    name = name.replace("\x01", "<>").replace("\x02", "()")
    return re.sub("[\ue000-\ue0ff]", lambda m: _KEEP[ord(m.group()) - 0xE000], name)


def _placeholder(match: re.Match[str]) -> str:
    return "\x01" if match.group().startswith("<") else "\x02"


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
    user_at = array("l", [-1]) * n
    caller = array("l", [-1]) * n
    table, contextual = _TABLE, frames.contextual
    for node in range(1, n):
        p, f = parent[node], frame[node]
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
