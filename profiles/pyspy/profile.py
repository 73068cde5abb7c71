"""Samples as a prefix tree (trie) of stacks, built one stack at a time.

Frames are interned to ints and each node is found with one dict lookup keyed by
`parent << 32 | frame`, so memory grows with distinct prefixes, not with lines.
A parent is always created before its children (parent id < child id), which lets
every later pass run as a flat loop over arrays instead of a recursive walk.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from . import frames as fr

_SHIFT = 32


class _Interner(dict[str, int]):
    def __missing__(self, key: str) -> int:
        value = self[key] = len(self)
        return value


@dataclass
class FrameInfo:
    """Per-frame facts computed once per distinct frame, not once per sample."""

    synthetic: bytearray
    native: bytearray
    thread: dict[int, tuple[int | str, str, int | None]]


@dataclass
class Profile:
    """Parsed py-spy samples. Node 0 is the root; node i's frame is `frames[frame[i]]`.

    `first_on_path[i]` is 1 when node i's frame does not occur above it, so a
    recursive frame is counted once per sample.
    """

    format: Literal["raw", "speedscope"]
    frames: list[str]
    parent: array
    frame: array
    depth: array
    self_count: list[int]
    first_on_path: bytearray
    skipped_lines: int = 0
    _cache: dict[str, object] = field(default_factory=dict, repr=False)

    @property
    def node_count(self) -> int:
        return len(self.parent)

    def totals(self) -> list[int]:
        """Inclusive samples per node (cached)."""
        return self._totals_and_sizes()[0]

    def sizes(self) -> list[int]:
        """Nodes per subtree, the node itself included (cached)."""
        return self._totals_and_sizes()[1]

    def _totals_and_sizes(self) -> tuple[list[int], list[int]]:
        cached = self._cache.get("totals")
        if cached is None:
            cached = inclusive_and_sizes(self.parent, self.self_count)
            self._cache["totals"] = cached
        return cached  # type: ignore[return-value]

    def frame_info(self) -> FrameInfo:
        cached = self._cache.get("frame_info")
        if cached is None:
            cached = _frame_info(self.frames)
            self._cache["frame_info"] = cached
        return cached  # type: ignore[return-value]

    def kids(self, node: int) -> list[int]:
        """Children of `node` in creation order (index built once, cached)."""
        cached = self._cache.get("children")
        if cached is None:
            cached = _csr(self.parent)
            self._cache["children"] = cached
        keys, order = cached  # type: ignore[misc]
        return order[bisect_left(keys, node) : bisect_right(keys, node)]


def inclusive_and_sizes(parent: Sequence[int], own: Sequence[int]) -> tuple[list[int], list[int]]:
    """Inclusive values and subtree sizes of nodes with samples, leaves first.

    Children have larger ids than parents, so one backward loop suffices.
    """
    total = list(own)
    size = [1] * len(total)
    for i in range(len(total) - 1, 0, -1):
        p = parent[i]
        total[p] += total[i]
        size[p] += size[i]
    return total, size


def _csr(parent: Sequence[int]) -> tuple[list[int], list[int]]:
    """Node ids grouped by parent (stable, so by id) and the sorted parent keys."""
    order = sorted(range(1, len(parent)), key=parent.__getitem__)
    return sorted(parent[1:]), order


def _frame_info(names: list[str]) -> FrameInfo:
    synthetic = bytearray(len(names))
    native = bytearray(len(names))
    threads: dict[int, tuple[int | str, str, int | None]] = {}
    for fid, name in enumerate(names):
        if fr.is_synthetic(name):
            synthetic[fid] = 1
            parsed = fr.parse_thread(name)
            if parsed is not None:
                threads[fid] = (parsed[0], parsed[1], None)
        elif fr.is_native(name):
            native[fid] = 1
    return FrameInfo(synthetic, native, threads)


class ProfileBuilder:
    """Accumulates stacks (root first) into a trie; `build()` returns the Profile."""

    def __init__(self) -> None:
        self._intern = _Interner()
        self._children: dict[int, int] = {}
        self.parent = array("l", [-1])
        self.frame = array("l", [-1])
        self.depth = array("l", [0])
        self.self_count: list[int] = [0]
        self.first_on_path = bytearray(1)
        self.skipped_lines = 0

    def add(self, stack: Sequence[str], count: int) -> None:
        """Add `count` samples of one stack given root first."""
        ids = list(map(self._intern.__getitem__, stack))
        get = self._children.get
        node = 0
        for pos, fid in enumerate(ids):
            child = get(node << _SHIFT | fid)
            if child is None:
                node = self._grow(node, pos, ids)
                break
            node = child
        self.self_count[node] += count

    def _grow(self, node: int, pos: int, ids: list[int]) -> int:
        """Create the nodes for ids[pos:] below `node` (all new); returns the leaf."""
        fresh = ids[pos:]
        first = len(self.parent)
        last = first + len(fresh) - 1
        parents = [node, *range(first, last)]
        # Smallest position of each frame in the stack: a frame is first on its
        # path exactly at that position (recursion counts once).
        first_pos = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1), strict=True))
        self._children.update(
            zip([p << _SHIFT | f for p, f in zip(parents, fresh, strict=True)], range(first, last + 1), strict=True)
        )
        self.parent.extend(parents)
        self.frame.extend(fresh)
        self.depth.extend(range(pos + 1, len(ids) + 1))
        self.self_count.extend([0] * len(fresh))
        self.first_on_path.extend([first_pos[f] == p for p, f in enumerate(fresh, pos)])
        return last

    def build(self, fmt: Literal["raw", "speedscope"]) -> Profile:
        frames = list(self._intern)
        self._children.clear()
        return Profile(
            format=fmt,
            frames=frames,
            parent=self.parent,
            frame=self.frame,
            depth=self.depth,
            self_count=self.self_count,
            first_on_path=self.first_on_path,
            skipped_lines=self.skipped_lines,
        )
