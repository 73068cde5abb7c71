"""How much of a whole-job capture one answer carries (issue 47: 1,024 ranks).

The group page, `GET /api/groups/<id>/`, its timeline, its merged flamegraph and the
whole-job compare aggregate on the server (the stored report's classes of ranks) and
carry per-rank detail a page at a time: `?offset=` (from 0) and `?limit=` (1 to
MAX_RANKS, RANKS_PER_PAGE by default). A job of up to RANKS_PER_PAGE ranks fits one
page, so it reads as it always did; a larger one says where its page lies (`Page`) and
the UI asks for the next. Per answer the work is bounded the same way: a page's ranks
are read, never every rank's stats or files.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from config.params import query_int

RANKS_PER_PAGE = 64
"""Ranks (processes, timeline strips, compared roles) an answer carries by default."""
MAX_RANKS = 256
"""The most a caller may ask for in one answer (`?limit=`, `?ranks=`, `?capture=`)."""
TIMELINE_MAX_RANKS = 128
"""The most ranks one timeline answer draws (each rank's track is read and bucketed:
about 5 ms a rank here, and some 10 kB a rank of JSON)."""
FLAMEGRAPH_PROCESSES = RANKS_PER_PAGE
"""A merged flamegraph reads at most this many processes' trees; a larger job's default
tree is one rank of each class (profiles.captures.selectors.group_flamegraph)."""
FUNCTION_RANKS_PER_CLASS = RANKS_PER_PAGE
"""The whole-job compare pools the user functions of at most this many ranks of each
class (spread evenly over the class, its straggler kept)."""

T = TypeVar("T")
H = TypeVar("H", bound=Hashable)


@dataclass(frozen=True)
class Page:
    """A window of `total` ranks: `limit` of them from `offset`."""

    offset: int
    limit: int
    total: int

    def of(self, items: Sequence[T]) -> list[T]:
        """This page's items of `items` (all `total` of them)."""
        return list(items[self.offset : self.offset + self.limit])

    @property
    def truncated(self) -> bool:
        """Whether some ranks are not on this page."""
        return self.offset > 0 or self.offset + self.limit < self.total

    def as_json(self) -> dict[str, Any]:
        """`{offset, limit, total, next}`: `next` is the next page's offset, or None."""
        following = self.offset + self.limit
        return {
            "offset": self.offset,
            "limit": self.limit,
            "total": self.total,
            "next": following if following < self.total else None,
        }


def page_from(params: Any, total: int, *, most: int = MAX_RANKS) -> Page:
    """`?offset=&limit=` over `total` ranks, `limit` at most `most`; a bad value raises
    ValidationError (a 400 naming the parameter)."""
    offset = query_int(params, "offset", minimum=0, allow_blank=False) or 0
    limit = query_int(params, "limit", minimum=1, maximum=most, allow_blank=False)
    return Page(offset=offset, limit=limit or RANKS_PER_PAGE, total=total)


def lead_order(names: Sequence[H], first: Iterable[H | None]) -> list[H]:
    """`names` with those of `first` that it holds moved to the front, in that order:
    the ranks a truncated answer must not leave out (the straggler, one of each class)."""
    held = set(names)
    front = list(dict.fromkeys(n for n in first if n is not None and n in held))
    chosen = set(front)
    return front + [n for n in names if n not in chosen]


def spread(names: Sequence[str], count: int, keep: Iterable[str | None] = ()) -> list[str]:
    """At most `count` of `names`, evenly spread over them, those of `keep` that it
    holds included; in the order of `names`."""
    if len(names) <= count:
        return list(names)
    held = set(names)
    kept = [n for n in dict.fromkeys(keep) if n and n in held][:count]
    room = count - len(kept)
    picked = {names[i * len(names) // room] for i in range(room)} if room else set()
    picked |= set(kept)
    return [n for n in names if n in picked]
