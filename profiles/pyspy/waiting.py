"""Waiting versus computing, per process, from a stored flamegraph tree.

Input: a flamegraph tree ({name, value, children}, as `analyze` stores it) and the
keyword list of the analysis ((keyword, category) pairs). A sample is *waiting* when
any frame of its stack counts toward a wait category under the engine's own rules
(`keywords.py`: substring, `=name`, `re:` and `... under CALLER` forms; the first
matching keyword claims the frame; synthetic `thread (…)`/`process …` frames left
out), counted once however many frames match. It is *computing* otherwise.

Wait categories (`WAIT_CATEGORIES`), from the GPU keyword set: `sync` (stream/event/
device synchronize), `host sync` (`.item()`, `_local_scalar_dense`), `wait` (futex,
pthread_cond, sched_yield), `comm` (NCCL collectives), `gil` (take_gil) and
`python queue`. So compute = samples in none of those: Python, kernel launches,
allocator and copies included.

Samples below a pruned-mass node (`[pruned: N frames]`) cannot be classified, since
their frames were not kept: they count as `unknown`, never as computing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from .frames import is_synthetic
from .keywords import Rule, parse_keyword

WAIT_CATEGORIES = frozenset({"sync", "host sync", "wait", "comm", "gil", "python queue"})


class WaitSplit(TypedDict):
    """Samples of one process: waiting, computing and unknown (under pruned nodes)."""

    total: int
    waiting: int
    computing: int
    unknown: int


def wait_split(
    tree: Mapping[str, Any],
    keywords: Iterable[tuple[str, str]],
    wait_categories: frozenset[str] = WAIT_CATEGORIES,
) -> WaitSplit:
    """Split the tree's samples into waiting / computing / unknown (see the module doc)."""
    claims = _Claims([(parse_keyword(word), category) for word, category in keywords if word])
    total = int(tree.get("value") or 0)
    waiting = unknown = 0
    stack = [(child, "") for child in tree.get("children") or []]
    while stack:  # iterative: native stacks nest deeper than the recursion limit
        node, parent = stack.pop()
        name, value = str(node.get("name", "")), int(node.get("value") or 0)
        if "pruned_frames" in node:
            unknown += value
        elif not is_synthetic(name) and claims.category(name, parent) in wait_categories:
            waiting += value
        else:
            caller = "" if is_synthetic(name) else name
            stack.extend((child, caller) for child in node.get("children") or [])
    return {
        "total": total,
        "waiting": waiting,
        "unknown": unknown,
        "computing": max(0, total - waiting - unknown),
    }


class _Claims:
    """The category a frame counts toward: its first matching keyword's (memoised)."""

    def __init__(self, rules: list[tuple[Rule, str]]) -> None:
        self.rules = rules
        self.seen: dict[tuple[str, str], str | None] = {}

    def category(self, frame: str, caller: str) -> str | None:
        key = (frame, caller)
        if key not in self.seen:
            self.seen[key] = next(
                (
                    category
                    for rule, category in self.rules
                    if rule.match.matches(frame)
                    and (rule.caller is None or (caller and rule.caller.matches(caller)))
                ),
                None,
            )
        return self.seen[key]
