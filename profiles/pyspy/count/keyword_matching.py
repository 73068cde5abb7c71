"""Which trie nodes match which keywords and categories, and the Python line above.

Bits: keyword i is bit i, category j is bit n_keywords + j. A node's bits come
from its frame (and, for `... under CALLER` keywords, from its parent's frame);
a frame counts toward one category, the first matching keyword's (keywords.py).
`fresh_matches` yields each node whose bits no ancestor set: the outermost match
of a keyword or category on the path ("the first matching frame"), so a sample
counts once per keyword and category. Its `python_caller` is the nearest Python
frame strictly above that node (toward the root), or -1 when there is none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import compress, islice

from ..core.linear_regex import PatternSet, UnsupportedPattern
from ..core.profile import Profile
from .keywords import Keyword, Rule, compiled_keyword

NO_PYTHON_FRAME = "(no Python frame)"
_SHIFT = 32


def category_names(keywords: tuple[Keyword, ...]) -> list[str]:
    return list(dict.fromkeys(kw.category for kw in keywords))


class KeywordMatcher:
    """Keyword and category bits per node of one profile (build with `matcher_for`)."""

    def __init__(self, profile: Profile, keywords: tuple[Keyword, ...]) -> None:
        self.profile = profile
        self.n_keywords = len(keywords)
        names = category_names(keywords)
        self._category_of = [names.index(kw.category) for kw in keywords]
        self._rules = [compiled_keyword(kw.keyword) for kw in keywords]
        self._contextual = sum(1 << i for i, r in enumerate(self._rules) if r.caller)
        self.candidates = _candidate_masks(profile, self._rules)
        """Per frame: keywords whose own pattern matches it (callers not checked)."""
        self._claimed: dict[int, int] = {}
        self._caller_ok: dict[int, bool] = {}
        self._pairs: dict[int, int] = {}
        self.static = [
            0 if not found or found & self._contextual else self._claimed_bits(found)
            for found in self.candidates
        ]
        """Per frame: its bits when they do not depend on the caller, else 0."""

    def frame_bits(self, node: int) -> int:
        """Keyword and category bits of `node` (0 when nothing matches)."""
        profile = self.profile
        fid = profile.frame[node]
        found = self.candidates[fid]
        if not found & self._contextual:
            return self._claimed_bits(found)
        parent = profile.parent[node]
        caller = profile.frame[parent] if parent > 0 else -1
        key = caller << 32 | fid  # caller -1 gives a negative key: no clash
        bits = self._pairs.get(key)
        if bits is None:
            bits = self._pairs[key] = self._claimed_bits(self._with_callers(found, caller))
        return bits

    def _claimed_bits(self, found: int) -> int:
        claimed = self._claimed.get(found)
        if claimed is None:
            claimed = self._claimed[found] = self._claim(found)
        return claimed

    def _with_callers(self, found: int, caller: int) -> int:
        for bit, rule in enumerate(self._rules):
            if found >> bit & 1 and rule.caller and not self._caller_matches(bit, rule, caller):
                found &= ~(1 << bit)
        return found

    def _caller_matches(self, bit: int, rule: Rule, caller: int) -> bool:
        if caller < 0 or self.profile.frame_info().synthetic[caller]:
            return False
        key = caller << 16 | bit
        ok = self._caller_ok.get(key)
        if ok is None:
            assert rule.caller is not None
            ok = self._caller_ok[key] = rule.caller.matches(self.profile.frames[caller])
        return ok

    def _claim(self, found: int) -> int:
        """The first matching keyword's category claims the frame (keywords.py)."""
        if not found:
            return 0
        first = (found & -found).bit_length() - 1
        category = self._category_of[first]
        bits = 0
        for bit, cat in enumerate(self._category_of):
            if cat == category and found >> bit & 1:
                bits |= 1 << bit
        return bits | 1 << (self.n_keywords + category)


def matcher_for(profile: Profile, keywords: tuple[Keyword, ...]) -> KeywordMatcher:
    """The profile's matcher for `keywords` (cached on the profile)."""
    key = ("matcher", keywords)
    cached = profile._cache.get(key)
    if cached is None:
        cached = profile._cache[key] = KeywordMatcher(profile, keywords)
    return cached  # type: ignore[return-value]


def _candidate_masks(profile: Profile, rules: list[Rule]) -> list[int]:
    """Per distinct frame, the keywords whose own pattern matches it.

    Two passes find the few frames that can match: an alternation of the plain texts
    over the whole frame, and the regexes as one RE2 set over the function name (up
    to the ` (location)`, so `$` anchors at the name's end). Only those frames are
    tested keyword by keyword.
    """
    masks = [0] * len(profile.frames)
    if not rules:
        return masks
    synthetic = profile.frame_info().synthetic
    texts = [re.escape(n) for r in rules if (n := r.match.needle()) is not None]
    by_text = re.compile("|".join(texts)).search if texts else None
    by_name = _name_regexes(rules)
    for fid, name in enumerate(profile.frames):
        if synthetic[fid]:
            continue
        if not ((by_text and by_text(name)) or (by_name and by_name(name[: _name_end(name)]))):
            continue
        for bit, rule in enumerate(rules):
            if rule.match.matches(name):
                masks[fid] |= 1 << bit
    return masks


def _name_regexes(rules: list[Rule]) -> Callable[[str], object] | None:
    """Whether any `re:` keyword matches a function name: one pass of an RE2 set."""
    patterns = [r.match.regex.pattern for r in rules if r.match.regex is not None]
    if not patterns:
        return None
    try:
        return PatternSet(patterns).matching
    except UnsupportedPattern:  # together past RE2's memory limit: each on its own
        regexes = [r.match.regex for r in rules if r.match.regex is not None]
        return lambda name: any(regex.search(name) for regex in regexes)


def _name_end(frame: str) -> int:
    """Length of the function name in `name (location)` (frames.split_location's cut)."""
    if frame.endswith(")"):
        cut = frame.rfind(" (")
        if cut > 0:
            return cut
    return len(frame)


def fresh_matches(profile: Profile, matcher: KeywordMatcher) -> Iterator[tuple[int, int]]:
    """(node, bits) for each node whose bits no ancestor on its path set.

    Only nodes whose frame is a candidate are visited (in id order, so parents
    first); each finds the union of its matched ancestors by walking up to the
    nearest matched one, whose union is already known.
    """
    parent, frame, frame_bits = profile.parent, profile.frame, matcher.frame_bits
    static = matcher.static
    node_mask = map(matcher.candidates.__getitem__, islice(frame, 1, None))
    union: dict[int, int] = {}
    for node in compress(range(1, profile.node_count), node_mask):
        mine = static[frame[node]] or frame_bits(node)
        if not mine:
            continue
        up = parent[node]
        while up > 0 and up not in union:
            up = parent[up]
        above = union.get(up, 0)
        union[node] = above | mine
        fresh = mine & ~above
        if fresh:
            yield node, fresh


class PythonCallers:
    """Nearest Python frame strictly above a node.

    A walk up the parent links, remembered only for the node it starts from:
    remembering every node passed cost ~50 MB on a 100 MB capture, while walks are
    short (the native frames between a match and its Python caller).
    """

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.python = profile.frame_info().python
        self._found: dict[int, int] = {0: -1}

    def of(self, node: int) -> int:
        """Frame id of the nearest Python frame above `node`, or -1."""
        start = self.profile.parent[node]
        found = self._found.get(start)
        if found is None:
            found = self._found[start] = self._walk(start)
        return found

    def _walk(self, node: int) -> int:
        parent, frame, python = self.profile.parent, self.profile.frame, self.python
        while node > 0:
            if python[frame[node]]:
                return frame[node]
            node = parent[node]
        return -1


_BITS: dict[int, tuple[int, ...]] = {}


def bits_of(mask: int) -> tuple[int, ...]:
    """Indexes of the set bits of `mask` (memoised: a profile has few distinct masks)."""
    found = _BITS.get(mask)
    if found is None:
        found = _BITS[mask] = tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
    return found
