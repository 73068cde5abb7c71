"""The regular expressions users and operators write, on RE2: time linear in the text.

Python's `re` backtracks, has no timeout and runs in C, where no signal stops it:
`re:` then `.?` x28, `.` x28 and `!` ran 92 s on a 37-character frame name, doubling
with each extra pair, and a glob of many `*`s (`*a*a*a*a*a*a*a*b`) is polynomial of
that degree. A check for such patterns was never complete (the first one missed
that pattern). So every pattern that comes from outside this package compiles here,
on RE2 (google-re2, the binding Google maintains): `re:` keywords, state rules'
names, files and callers, and the globs they are written as. RE2 runs an automaton
over the text, never backtracks, and bounds a pattern's size when it compiles.
The engine's own fixed patterns stay on `re`.

google-re2 is the one import from outside the standard library in this package, and
only here: a linear-time engine cannot be built on `re`, and one in pure Python ran
the analysis 50-100x slower. It is imported on first use, so what needs no pattern
(parsing, lag, dumps, export) works without it; with it missing a pattern is refused
with the command that installs it, never run on `re`.

RE2 takes Python's syntax except what needs backtracking or is Python's own; such a
pattern is refused when it is saved, saying what to write instead (`unsupported`):
lookahead and lookbehind, backreferences, possessive repeats and atomic groups
(needless: nothing backtracks), `\\Z` (write `\\z`), verbose mode and comments, `\\u`,
`\\U` and `\\N` escapes (write the character, or `\\x{...}`), repeat counts past 1000.
`\\d`, `\\w`, `\\s` and `\\b` mean ASCII, as frame names are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

INSTALL = "pip install google-re2"
# RE2's own limit on one compiled pattern (its default); a pattern past it is refused.
MAX_MEMORY = 8 << 20
# RE2's words for what it refuses, and what to write instead.
_HINTS = (
    ("(?=", "lookahead is not supported: match the text itself"),
    ("(?!", "negative lookahead is not supported: list what may match instead"),
    ("(?<", "lookbehind is not supported: match the text before it as well"),
    ("operator: (?P", "backreferences (`(?P=name)`) are not supported"),
    ("(?>", "atomic groups are not needed: RE2 never backtracks; drop `?>`"),
    ("(?#", "comments are not supported"),
    ("(?x", "verbose mode is not supported: write the pattern without spaces"),
    ("operator: *+", "possessive repeats are not needed: RE2 never backtracks; write `*`"),
    ("operator: ++", "possessive repeats are not needed: RE2 never backtracks; write `+`"),
    ("operator: ?+", "possessive repeats are not needed: RE2 never backtracks; write `?`"),
    ("sequence: \\Z", "write `\\z` for the end of the name"),
    ("sequence: \\u", "write the character itself, or `\\x{...}`"),
    ("sequence: \\U", "write the character itself, or `\\x{...}`"),
    ("sequence: \\N", "write the character itself, or `\\x{...}`"),
    ("repetition size", "repeat counts go up to 1000, nested ones multiplied"),
    ("pattern too large", "it compiles to more than RE2's limit; write it shorter"),
)


class UnsupportedPattern(ValueError):
    """A pattern RE2 cannot take; the message says why, and what to write instead."""


def _re2() -> Any:
    try:
        import re2  # noqa: PLC0415 — the package's one outside import (module doc)
    except ImportError:
        raise UnsupportedPattern(
            f"regular expressions need RE2, a linear-time engine: {INSTALL}"
        ) from None
    return re2


def _options() -> Any:
    re2 = _re2()
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern on stderr
    options.never_capture = True  # only "does it match" is ever asked
    options.max_mem = MAX_MEMORY
    return options


def _encoded(text: str) -> bytes:
    # A speedscope name may hold a lone surrogate (a JSON escape), which UTF-8 cannot.
    return text.encode("utf-8", "replace")


def _reason(said: object) -> str:
    message = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    if any(f"sequence: \\{digit}" in message for digit in "123456789"):
        return f"{message}: backreferences are not supported"
    hint = next((h for token, h in _HINTS if token in message), "")
    return f"{message}: {hint}" if hint else message


class LinearPattern:
    """One compiled pattern: `search` anywhere in a text, or `fullmatch` all of it."""

    __slots__ = ("pattern", "_compiled")

    def __init__(self, pattern: str) -> None:
        re2 = _re2()
        self.pattern = pattern
        try:
            self._compiled = re2.compile(pattern, _options())
        except re2.error as exc:
            raise UnsupportedPattern(_reason(exc.args[0] if exc.args else "")) from None
        except (TypeError, ValueError) as exc:  # a NUL or an unencodable character
            raise UnsupportedPattern(str(exc)) from None

    def __repr__(self) -> str:
        return f"LinearPattern({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __reduce__(self) -> tuple:
        return (LinearPattern, (self.pattern,))

    def search(self, text: str) -> bool:
        return self._compiled.search(_encoded(text)) is not None

    def fullmatch(self, text: str) -> bool:
        return self._compiled.fullmatch(_encoded(text)) is not None


class PatternSet:
    """Several patterns tried in one pass over a text: which of them match.

    `whole=True` matches each against the whole text (like `fullmatch`), else
    anywhere in it (like `search`)."""

    __slots__ = ("_set", "patterns", "whole", "size")

    def __init__(self, patterns: Iterable[str], *, whole: bool = False) -> None:
        re2 = _re2()
        options = _options()
        self._set = re2.Set.FullMatchSet(options) if whole else re2.Set.SearchSet(options)
        self.patterns, self.whole, self.size = tuple(patterns), whole, 0
        for pattern in self.patterns:
            try:
                self._set.Add(pattern)
            except re2.error:
                LinearPattern(pattern)  # raises, saying why
                raise UnsupportedPattern(f"RE2 cannot take {pattern!r}") from None
            self.size += 1
        try:
            self._set.Compile()
        except re2.error:
            raise UnsupportedPattern(
                f"the {self.size} patterns together compile to more than RE2's limit; "
                "write fewer or shorter ones"
            ) from None

    def __reduce__(self) -> tuple:
        return (_pattern_set, (self.patterns, self.whole))

    def matching(self, text: str) -> list[int]:
        """Indexes of the patterns that match `text` (counted from 0 as added; any order)."""
        if not self.size:
            return []
        return self._set.Match(_encoded(text)) or []


def _pattern_set(patterns: tuple[str, ...], whole: bool) -> PatternSet:
    return PatternSet(patterns, whole=whole)


def escape(text: str) -> str:
    """`text` as a pattern that matches it literally (every ASCII punctuation escaped)."""
    return re.escape(text)
