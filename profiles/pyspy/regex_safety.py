"""Whether a `re:` keyword can backtrack catastrophically, read off its parsed pattern.

Python's `re` backtracks, has no timeout, and runs in C where no signal stops it:
`^(a+)+$` on a frame of 31 `a`s and a `!` takes minutes, each extra `a` doubling it.
Refused (a conservative check: a few safe patterns are refused too, never a known
exponential one):
- a repeat inside a repeat, when the inner one can match more or less (`(a+)+`,
  `(a*)*`, `(a?){30}`, `(\\w+\\s?)*`), unless each pass starts with a character
  the inner repeats cannot match (`(\\.\\w+)+` is fine: a pass cannot be split two ways);
- alternatives that can start alike inside a repeat (`(a|ab)*`, `(\\w|\\d)+`);
- two unbounded repeats side by side that can match the same character
  (`\\d+\\d+`, `.*.*`, `a*(?:b?)a*`).
Possessive repeats (`a++`) and atomic groups never backtrack and are allowed. Patterns
that are only polynomial (`foo.*bar.*baz`) pass: the analysis time limit bounds them.
"""

from __future__ import annotations

from re import _constants as c  # noqa: PLC2701 — the stdlib's own parser, no other way
from re import _parser as sre_parse  # noqa: PLC2701

_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT)
_WIDE = None  # a character set that may hold any character


def backtracking_problem(pattern: str) -> str | None:
    """Why `pattern` can backtrack catastrophically, or None (it must compile)."""
    parsed = sre_parse.parse(pattern)
    fold = bool(parsed.state.flags & c.SRE_FLAG_IGNORECASE)
    return _walk(list(parsed), fold)


def _walk(items: list, fold: bool) -> str | None:
    for problem in (_adjacent(items, fold), *(_item(op, av, fold) for op, av in items)):
        if problem:
            return problem
    return None


def _item(op, av, fold: bool) -> str | None:
    if op in _REPEATS:
        low, high, body = av
        if high >= 2:
            problem = _inside_repeat(list(body), fold)
            if problem:
                return problem
        return _walk(list(body), fold)
    return next((p for sub in _children(op, av) if (p := _walk(sub, fold))), None)


def _children(op, av) -> list[list]:
    """The sub-sequences of one parsed item (groups, alternatives, lookarounds)."""
    if op is c.SUBPATTERN:
        return [list(av[3])]
    if op is c.BRANCH:
        return [list(alt) for alt in av[1]]
    if op in (c.ASSERT, c.ASSERT_NOT):
        return [list(av[1])]
    if op is c.GROUPREF_EXISTS:
        return [list(alt) for alt in av[1:] if alt is not None]
    return []  # literals, sets, anchors; atomic groups and possessive repeats never backtrack


def _inside_repeat(body: list, fold: bool) -> str | None:
    while len(body) == 1 and body[0][0] is c.SUBPATTERN:
        body = list(body[0][1][3])
    delimited = _delimited(body, fold)
    for op, av in _flatten(body):
        if op in _REPEATS and av[0] != av[1] and not delimited:
            return "a repeat inside a repeat, as in (a+)+"
        if op is c.BRANCH and _alternatives_overlap(av[1], fold):
            return "alternatives that can start alike inside a repeat, as in (a|ab)*"
    return None


def _delimited(body: list, fold: bool) -> bool:
    """Each pass starts with a fixed character that no inner repeat can match."""
    if not body or body[0][0] not in (c.LITERAL, c.IN):
        return False
    lead = _chars(body[:1], fold)
    inner = [
        _chars(list(av[2]), fold)
        for op, av in _flatten(body[1:])
        if op in _REPEATS and av[0] != av[1]
    ]
    return lead is not _WIDE and not any(_overlap(lead, chars) for chars in inner)


def _flatten(items: list):
    """Every item below `items` that still backtracks (not inside an atomic group)."""
    for op, av in items:
        yield op, av
        if op in _REPEATS:
            yield from _flatten(list(av[2]))
        for sub in _children(op, av):
            yield from _flatten(sub)


def _alternatives_overlap(alternatives, fold: bool) -> bool:
    seen: set[int] = set()
    for alt in alternatives:
        chars = _chars(list(alt), fold)
        if chars is _WIDE or chars & seen or not alt:
            return True
        seen |= chars
    return False


def _adjacent(items: list, fold: bool) -> str | None:
    """Two unbounded repeats in a row (optional items between) that share a character."""
    open_sets: list = []
    for op, av in items:
        if op in _REPEATS and av[1] == c.MAXREPEAT:
            chars = _chars(list(av[2]), fold)
            if any(_overlap(chars, other) for other in open_sets):
                return "two unbounded repeats side by side that match alike, as in .*.*"
            open_sets.append(chars)
        elif not (op in _REPEATS and av[0] == 0):
            open_sets = []
    return None


def _overlap(a, b) -> bool:
    return a is _WIDE or b is _WIDE or bool(a & b)


# Character sets are ASCII code points plus OTHER, which stands for every character
# past ASCII (an over-estimate: enough to tell `\.` from `\w`).
OTHER = -1
_ASCII = frozenset(range(128))
_CATEGORIES = {
    c.CATEGORY_DIGIT: frozenset(range(48, 58)),
    c.CATEGORY_WORD: frozenset(map(ord, "_0123456789abcdefghijklmnopqrstuvwxyz"))
    | frozenset(range(65, 91)),
    c.CATEGORY_SPACE: frozenset(map(ord, " \t\n\r\f\v")),
}


def _code(point: int, fold: bool) -> set[int]:
    if point >= 128:
        return {OTHER}
    return {point, ord(chr(point).lower()), ord(chr(point).upper())} if fold else {point}


def _chars(items: list, fold: bool):
    """The characters `items` may match (an over-estimate), or _WIDE."""
    found: set[int] = set()
    for op, av in _flatten(items):
        if op is c.LITERAL:
            found |= _code(av, fold)
        elif op in (c.NOT_LITERAL, c.ANY):
            found |= _ASCII | {OTHER}
        elif op is c.IN:
            found |= _set_chars(av, fold)
        elif op in (c.GROUPREF, c.GROUPREF_EXISTS):
            return _WIDE
    return found


def _set_chars(members, fold: bool) -> set[int]:
    found: set[int] = set()
    negate = False
    for op, av in members:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            found |= _code(av, fold)
        elif op is c.RANGE and av[1] < 128 and av[1] - av[0] < 128:
            for point in range(av[0], av[1] + 1):
                found |= _code(point, fold)
        elif op is c.CATEGORY and av in _CATEGORIES:
            found |= _CATEGORIES[av] | {OTHER}
        else:  # other categories (\W, \D, \S), ranges past ASCII
            return set(_ASCII | {OTHER})
    return (set(_ASCII) - found) | {OTHER} if negate else found
