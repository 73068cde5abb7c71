"""Samples as a prefix tree (trie) of stacks, built one stack at a time.

Frames are interned to ints and each node is found with one dict lookup keyed by
`parent << 32 | frame`, so memory grows with distinct prefixes, not with lines.
A parent is always created before its children (parent id < child id), which lets
every later pass run as a flat loop over arrays instead of a recursive walk.
"""

from __future__ import annotations

from array import array
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
        cached = self._cache.get("totals")
        if cached is None:
            cached = inclusive(self.parent, self.self_count)
            self._cache["totals"] = cached
        return cached  # type: ignore[return-value]

    def frame_info(self) -> FrameInfo:
        cached = self._cache.get("frame_info")
        if cached is None:
            cached = _frame_info(self.frames)
            self._cache["frame_info"] = cached
        return cached  # type: ignore[return-value]

    def children(self) -> tuple[array, array]:
        """CSR adjacency: kids of node i are `kids[start[i]:start[i + 1]]` (cached)."""
        cached = self._cache.get("children")
        if cached is None:
            cached = _csr(self.parent)
            self._cache["children"] = cached
        return cached  # type: ignore[return-value]


def inclusive(parent: Sequence[int], own: Sequence[int]) -> list[int]:
    """Add each node's value into its parent, leaves first (children have larger ids)."""
    total = list(own)
    for i in range(len(total) - 1, 0, -1):
        total[parent[i]] += total[i]
    return total


def _csr(parent: Sequence[int]) -> tuple[array, array]:
    n = len(parent)
    start = array("l", bytes(8 * (n + 1)))
    for i in range(1, n):
        start[parent[i] + 1] += 1
    for i in range(n):
        start[i + 1] += start[i]
    fill = array("l", start)
    kids = array("l", bytes(8 * max(n - 1, 0)))
    for i in range(1, n):
        p = parent[i]
        kids[fill[p]] = i
        fill[p] += 1
    return start, kids


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
        for fid in ids:
            child = get(node << _SHIFT | fid)
            if child is None:
                child = self._new_node(node, fid, ids)
            node = child
        self.self_count[node] += count

    def _new_node(self, parent: int, fid: int, ids: list[int]) -> int:
        child = len(self.parent)
        level = self.depth[parent]
        self._children[parent << _SHIFT | fid] = child
        self.parent.append(parent)
        self.frame.append(fid)
        self.depth.append(level + 1)
        self.self_count.append(0)
        self.first_on_path.append(fid not in ids[:level])
        return child

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
