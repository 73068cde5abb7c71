"""The compiled thread-state rule table: matching frames to rules, loading user rules.

Rules are records (state_rules.StateRule; the defaults and their fields are
documented there and in docs/states.md). A frame's function name is matched whole:
exact names through a dict, globs and `re:` patterns through one RE2 set that
rules out most frames at once and names the rules that match; native names lose
their template arguments and parameter lists first (`normalise_native_name`), so no
pattern matches inside them. Every glob and `re:` pattern (a user's rules come from
FLAMEDECK_STATE_RULES or `--state-rules`) runs on RE2, in time linear in the name
(linear_regex.py); one RE2 does not take is refused when the rules load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ..core.frames import is_interpreter, is_python, split_location
from ..core.linear_regex import LinearPattern, PatternSet, UnsupportedPattern, escape
from ..errors import ProfileError
from .state_rules import DEFAULT_RULES, STATES, StateRule
from .user_code import file_of

TRANSPARENT = "transparent"
FRAMEWORK_STATES = ("step", "phase")
"""The `state` of a framework-step row (framework.py) in a rules file."""
LEVELS = {"fallback": 1, "primitive": 2, "decide": 3}


class _Rule(NamedTuple):
    code: int
    """level * 16 + state index, or 0 for a transparent frame."""
    name: LinearPattern | None
    """None for a plain name (looked up exactly, no pattern needed)."""
    file: LinearPattern | None
    caller: LinearPattern | str | None
    caller_file: LinearPattern | None
    kind: str


class StateRules:
    """A compiled rule table: the user's rules first, then the defaults."""

    def __init__(self, rules: Sequence[StateRule], source: str = "state rules") -> None:
        self.framework_rows = tuple(r for r in rules if r.state in FRAMEWORK_STATES)
        """The user's framework-step rows (framework.py compiles them, after its defaults)."""
        for row in self.framework_rows:
            if not row.framework.strip() or not row.phase.strip():
                raise ProfileError(f"{source}: a {row.state} row needs a framework and a phase")
        self._frameworks = None  # framework.rules_of compiles them once
        self.rules = tuple(r for r in rules if r.state not in FRAMEWORK_STATES)
        self._compiled = [_compile_rule(rule, source) for rule in self.rules]
        self._exact: dict[str, list[int]] = {}
        self._any_name: list[int] = []
        wild: list[int] = []
        for index, rule in enumerate(self.rules):
            if rule.name == "*":
                self._any_name.append(index)
            elif is_plain_name(rule.name):
                self._exact.setdefault(rule.name, []).append(index)
            else:
                wild.append(index)
        self._wild = wild
        names = [self._compiled[i].name.pattern for i in wild]  # type: ignore[union-attr]
        try:
            self._any_wild = PatternSet(names, whole=True).matching if wild else None
        except UnsupportedPattern as exc:
            raise ProfileError(f"{source}: {exc}") from None

    def __repr__(self) -> str:
        return f"StateRules({len(self.rules)} rules)"

    def candidates(self, frame: str, native: bool) -> list[int]:
        """Indexes of the rules whose name, file and kind match `frame`, in order."""
        name, _ = split_location(frame)
        if native:
            name = normalise_native_name(name)
        found = [*self._exact.get(name, ()), *self._any_name]
        if self._any_wild is not None:
            found += [self._wild[i] for i in self._any_wild(name)]
        kind = "native" if native else "python"
        file = file_of(frame)
        return sorted(
            i
            for i in found
            if self._compiled[i].kind in ("", kind) and file_matches(self._compiled[i].file, file)
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
        elif isinstance(rule.caller, LinearPattern):
            if not rule.caller.fullmatch(normalise_native_name(split_location(caller)[0])):
                return False
        return file_matches(rule.caller_file, file_of(caller))


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
    is_json = text.lstrip().startswith("[")
    rules = _rules_from_json(name, text) if is_json else _rules_from_text(name, text)
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
    r"(?P<state>\w+)(?:\s+(?P<framework>[\w.-]+)\s*\((?P<phase>[^()]+)\))?"
    r"\s*:\s*(?P<name>.+?)(?: in (?P<file>\S+))?(?: under (?P<caller>\S+))?"
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
        caller = rule_pattern(caller, source)
    file = rule_pattern(rule.file, source, path=True) if rule.file else None
    caller_file = rule_pattern(rule.caller_file, source, path=True) if rule.caller_file else None
    if not rule.name.strip():
        raise ProfileError(f"{source}: a rule needs a name")
    name = None if is_plain_name(rule.name) else rule_pattern(rule.name, source)
    if name is not None and name.fullmatch("") and not (file or caller or caller_file):
        raise ProfileError(f"{source}: {rule.name!r} would match every frame: add a file")
    return _Rule(code, name, file, caller, caller_file, rule.kind)


def is_plain_name(text: str) -> bool:
    return "*" not in text and not text.startswith("re:")


def rule_pattern(text: str, source: str, path: bool = False) -> LinearPattern:
    """A `*` glob or `re:REGEX`, compiled for a whole-name match (after any `/` for paths)."""
    if not text.strip():
        raise ProfileError(f"{source}: a rule needs a name")
    if text.startswith("re:"):
        body = text[3:]
    else:
        body = ".*".join(escape(part) for part in text.split("*"))
    try:
        return LinearPattern(f"(?:.*/)?(?:{body})" if path else f"(?:{body})")
    except UnsupportedPattern as exc:
        raise ProfileError(f"{source}: bad pattern {text!r} ({exc})") from None


def file_matches(pattern: LinearPattern | None, file: str) -> bool:
    return pattern is None or pattern.fullmatch(file)


# Tokens whose brackets are no template or parameter list: kept as they are.
_OPERATORS = "<<= >>= <=> << >> <= >= ->* -> < > () []".split()
_KEEP = ("(anonymous namespace)", *(f"operator{op}" for op in _OPERATORS))
_KEPT = re.compile("|".join(re.escape(token) for token in _KEEP))
_CLONE = re.compile(r" \[clone [^\]]*\]")


def normalise_native_name(name: str) -> str:
    """`a::b<T, c<int>>::f(int) [clone .cold]` -> `a::b<>::f()`: template arguments,
    parameter lists and clone suffixes removed, so a pattern never matches inside them."""
    if "<" not in name and "(" not in name and "[" not in name:
        return name
    name = _KEPT.sub(lambda m: chr(0xE000 + _KEEP.index(m.group())), _CLONE.sub("", name))
    name = _emptied_groups(name)
    return re.sub("[\ue000-\ue0ff]", lambda m: _KEEP[ord(m.group()) - 0xE000], name)


def _emptied_groups(name: str) -> str:
    """Each `<...>` and `(...)` emptied, innermost first, in one pass over `name`.

    A closing bracket that does not close the last open one of its kind stays, and so
    does everything open before it: nothing closes across a bracket left in place
    (`f(a<b)` stays as it is). One pass instead of one per level of nesting, which
    took 0.65 s on a 16 KiB name nested 8,000 deep."""
    out: list[str] = []
    opened: list[int] = []  # where in `out` each open bracket sits
    for char in name:
        if char == "<" or char == "(":
            opened.append(len(out))
            out.append(char)
        elif char == ">" or char == ")":
            if opened and out[opened[-1]] == ("<" if char == ">" else "("):
                del out[opened.pop() :]
                out.append("<>" if char == ">" else "()")
            else:
                opened.clear()
                out.append(char)
        else:
            out.append(char)
    return "".join(out)
