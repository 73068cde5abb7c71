"""Samples as a prefix tree (trie) of stacks, built one stack at a time.

Frames are interned to ints. A node's first child is created right after it
(id + 1, a "chain child") and found by comparing arrays; other children are found
with one dict lookup keyed by `parent << 32 | frame`. Memory grows with distinct
prefixes, not with lines, and the dict holds only branch points.
A parent is always created before its children (parent id < child id), which lets
every later pass run as a flat loop over arrays instead of a recursive walk.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Literal, NamedTuple

from . import frames as fr

_SHIFT = 32


class _Interner(dict[str, int]):
    def __missing__(self, key: str) -> int:
        value = self[key] = len(self)
        return value


class FrameInfo(NamedTuple):
    """Per-frame facts computed once per distinct frame, not once per sample."""

    synthetic: bytearray
    native: bytearray
    python: bytearray
    """1 for Python frames (frames.is_python): neither synthetic nor native."""
    thread: dict[int, tuple[int | str, str, int | None]]


class Profile:
    """Parsed py-spy samples. Node 0 is the root; node i's frame is `frames[frame[i]]`.

    `first_on_path[i]` is 1 when node i's frame does not occur above it, so a
    recursive frame is counted once per sample. (A plain class, not a dataclass:
    importing dataclasses cost every CLI run ~8 ms.)
    """

    def __init__(
        self,
        *,
        format: Literal["raw", "speedscope"],
        frames: list[str],
        parent: array,
        frame: array,
        depth: array,
        self_count: list[int],
        first_on_path: bytearray,
        branches: dict[int, int],
        skipped_lines: int = 0,
        installed: frozenset[str] = frozenset(),
    ) -> None:
        self.format = format
        self.installed = installed
        """Packages known to be installed code from the full paths they were read with
        (frames.installed_packages): library code for rules/user_code.py."""
        self.renamed: dict[str, str] = {}
        """Full name -> short name of each frame read with a name py-spy shortens by
        default (frames.renamed): where the full path stays available (a tooltip)."""
        self.frames = frames
        self.parent = parent
        self.frame = frame
        self.depth = depth
        self.self_count = self_count
        self.first_on_path = first_on_path
        self.branches = branches
        self.skipped_lines = skipped_lines
        self._cache: dict[object, object] = {}

    @property
    def node_count(self) -> int:
        return len(self.parent)

    def accumulated(self) -> Accumulated:
        """Inclusive values, subtree sizes and once-per-sample frame totals (cached)."""
        cached = self._cache.get("accumulated")
        if cached is None:
            cached = accumulate(self, self.self_count)
            self._cache["accumulated"] = cached
        return cached  # type: ignore[return-value]

    def frame_info(self) -> FrameInfo:
        cached = self._cache.get("frame_info")
        if cached is None:
            cached = _frame_info(self.frames)
            self._cache["frame_info"] = cached
        return cached  # type: ignore[return-value]

    def kids(self, node: int) -> list[int]:
        """Children of `node`: its chain child (id + 1) and its dict branches."""
        index = self._cache.get("branches")
        if index is None:
            index = self._cache["branches"] = _branch_index(self.branches)
        chain = node + 1
        found = [chain] if chain < len(self.parent) and self.parent[chain] == node else []
        return found + index.get(node, [])  # type: ignore[attr-defined]


class Accumulated(NamedTuple):
    total: list[int]
    """Inclusive value per node."""
    size: list[int]
    """Nodes per subtree, the node itself included."""
    frame_total: list[int]
    """Per frame id: inclusive samples, each sample once (first on its path)."""


def accumulate(profile: Profile, own: list[int]) -> Accumulated:
    """One backward pass: children have larger ids, so each total is final when read."""
    total = list(own)
    size = [1] * len(total)
    frame_total = [0] * len(profile.frames)
    parent, frame, first = profile.parent, profile.frame, profile.first_on_path
    for i in range(len(total) - 1, 0, -1):
        p = parent[i]
        value = total[i]
        total[p] += value
        size[p] += size[i]
        if first[i]:
            frame_total[frame[i]] += value
    return Accumulated(total, size, frame_total)


def _branch_index(branches: dict[int, int]) -> dict[int, list[int]]:
    """Children reached through the dict, per parent (chain children are not in it)."""
    index: dict[int, list[int]] = {}
    for key, child in branches.items():
        index.setdefault(key >> _SHIFT, []).append(child)
    return index


def _frame_info(names: list[str]) -> FrameInfo:
    synthetic = bytearray(len(names))
    native = bytearray(len(names))
    python = bytearray(len(names))
    threads: dict[int, tuple[int | str, str, int | None]] = {}
    for fid, name in enumerate(names):
        if fr.is_synthetic(name):
            synthetic[fid] = 1
            parsed = fr.parse_thread(name)
            if parsed is not None:
                threads[fid] = (parsed[0], parsed[1], None)
        elif fr.is_native(name):
            native[fid] = 1
        else:
            python[fid] = 1
    return FrameInfo(synthetic, native, python, threads)


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

    def add(self, stack: Sequence[str], count: int) -> int:
        """Add `count` samples of one stack given root first; returns its leaf node (the
        built Profile's too, unless build() merges frames whose full names shorten
        alike: a caller keeping nodes adds names already short, as timed/timed_capture.py does)."""
        ids = list(map(self._intern.__getitem__, stack))
        parent, frame, get = self.parent, self.frame, self._children.get
        size = len(parent)
        node = 0
        for pos, fid in enumerate(ids):
            # A chain child (id node + 1) is not in the dict: try it first.
            nxt = node + 1
            if nxt < size and frame[nxt] == fid and parent[nxt] == node:
                node = nxt
                continue
            child = get(node << _SHIFT | fid)
            if child is None:
                node = self._grow(node, pos, ids)
                break
            node = child
        self.self_count[node] += count
        return node

    def _grow(self, node: int, pos: int, ids: list[int]) -> int:
        """Create the nodes for ids[pos:] below `node` (all new); returns the leaf.

        Only the first new node goes in the dict: each later one is its parent's
        chain child (id parent + 1), which `add` finds without a dict lookup.
        """
        fresh = ids[pos:]
        first = len(self.parent)
        last = first + len(fresh) - 1
        # Smallest position of each frame in the stack: a frame is first on its
        # path exactly at that position (recursion counts once).
        first_pos = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1), strict=True))
        if node + 1 != first:  # else it is node's chain child: no dict entry
            self._children[node << _SHIFT | fresh[0]] = first
        self.parent.append(node)
        self.parent.extend(range(first, last))
        self.frame.extend(fresh)
        self.depth.extend(range(pos + 1, len(ids) + 1))
        self.self_count.extend([0] * len(fresh))
        self.first_on_path.extend([first_pos[f] == p for p, f in enumerate(fresh, pos)])
        return last

    def build(self, fmt: Literal["raw", "speedscope"]) -> Profile:
        """The Profile, its frames named as py-spy names them by default
        (frames.short_names): a speedscope file's full paths and raw text's short ones
        give one name per frame. Two full names that shorten alike are one frame, as
        in py-spy's own raw output, so their stacks are merged."""
        full = list(self._intern)
        frames = fr.short_names(full)
        installed = fr.installed_packages(full)
        renamed = {f: s for f, s in zip(full, frames, strict=True) if f != s}
        if len(set(frames)) < len(frames):
            merged = self._merged(frames).build(fmt)
            merged.installed, merged.renamed = installed, renamed
            return merged
        profile = Profile(
            format=fmt,
            frames=frames,
            parent=self.parent,
            frame=self.frame,
            depth=self.depth,
            self_count=self.self_count,
            first_on_path=self.first_on_path,
            branches=self._children,
            skipped_lines=self.skipped_lines,
            installed=installed,
        )
        profile.renamed = renamed
        return profile

    def _merged(self, names: list[str]) -> ProfileBuilder:
        """A builder holding every stack again under the frames' new names (rare: only
        when two full paths shorten alike)."""
        merged = ProfileBuilder()
        merged.skipped_lines = self.skipped_lines
        parent, frame = self.parent, self.frame
        for node in range(1, len(parent)):
            if not self.self_count[node]:
                continue
            stack, up = [], node
            while up > 0:
                stack.append(names[frame[up]])
                up = parent[up]
            merged.add(stack[::-1], self.self_count[node])
        return merged
