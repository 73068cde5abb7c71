"""How a keyword-set share is labelled wherever it appears (compare, trends): as a lens
the user picked, naming the set, never as the product's own words (those are the
states). "Keyword lens: GPU training (default set)"."""

from __future__ import annotations

from collections.abc import Iterable

from profiles.models import KeywordSet

BUILT_IN = "built-in GPU set"
"""A capture analysed with no keyword set took the engine's GPU keywords."""


def set_name(name: str | None, is_default: bool | None = False) -> str:
    """One set's name as a lens label says it."""
    if not name:
        return BUILT_IN
    return f"{name} (default set)" if is_default else name


def capture_set_name(keyword_set: KeywordSet | None) -> str:
    return set_name(keyword_set.name, keyword_set.is_default) if keyword_set else BUILT_IN


def keyword_lens(sets: Iterable[tuple[str | None, bool | None]]) -> str:
    """ "Keyword lens: A, B" for the (name, is_default) of the sets a share came from."""
    names = sorted({set_name(name, default) for name, default in sets})
    return f"Keyword lens: {', '.join(names) if names else BUILT_IN}"
