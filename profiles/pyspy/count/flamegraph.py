"""Flamegraph JSON ({name, value, children}) built from the trie, pruned to a budget.

Pruning keeps the heaviest nodes first (best-first from the root) and replaces
the children it drops under a kept node by ONE node named `[pruned: N frames]`
whose value is their summed value, so pruned mass stays visible and is never
shown as self time. That node counts against the budget. Frames deeper than
MAX_DEPTH are pruned the same way so `json` and d3 can nest the tree.
The same algorithm prunes a stored tree (`prune_flamegraph`), and
`select_threads` keeps only some `thread (tid): name` subtrees of one.
A node whose frame was read with a full path py-spy shortens by default
(`threading.py:320` from `/usr/lib/python3.11/threading.py:320`) carries that file
as `path`: only there, so a tree of short names costs nothing more.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from ..core.frames import ThreadFilter, recorded_files
from ..core.profile import Profile
from ..core.types import FlameNode
from ..errors import ProfileError

MAX_DEPTH = 400
ROOT_NAME = "all"
N = TypeVar("N")


def pruned_node(frames: int, value: int) -> FlameNode:
    """The explicit stand-in for `frames` dropped frames holding `value` samples."""
    return {
        "name": f"[pruned: {frames} frames]",
        "value": value,
        "children": [],
        "pruned_frames": frames,
    }


def choose_nodes(
    root: N,
    kids: Callable[[N], Sequence[N]],
    value: Callable[[N], int],
    max_nodes: int,
) -> set[N]:
    """The nodes to keep: heaviest first, budget counting one pruned node per cut."""
    if max_nodes < 2:
        raise ProfileError("max_nodes must be at least 2 (a root and its pruned-mass node)")
    waiting = {root: len(kids(root))}
    depth = {root: 0}
    used = 1 + (1 if waiting[root] else 0)
    heap: list[tuple[int, int, N, N]] = []
    order = 0
    for kid in kids(root):
        heap.append((-value(kid), order := order + 1, kid, root))
    heapq.heapify(heap)
    while heap:
        _, _, node, parent = heapq.heappop(heap)
        node_kids = kids(node)
        n_kids = len(node_kids) if depth[parent] + 1 < MAX_DEPTH else 0
        cost = 1 + (1 if node_kids else 0) - (1 if waiting[parent] == 1 else 0)
        if used + cost > max_nodes:
            break
        used += cost
        waiting[parent] -= 1
        waiting[node] = n_kids
        depth[node] = depth[parent] + 1
        for kid in node_kids[:n_kids]:
            heapq.heappush(heap, (-value(kid), order := order + 1, kid, node))
    return set(waiting)


def trie_flamegraph(
    profile: Profile, total: list[int], sizes: list[int], max_nodes: int
) -> FlameNode:
    """Flamegraph of a Profile with per-node inclusive values and subtree sizes."""
    frames, frame = profile.frames, profile.frame
    cache: dict[int, list[int]] = {}

    def kids(node: int) -> Sequence[int]:
        # Sorted by name so ties are broken the same whatever the line order was.
        found = cache.get(node)
        if found is None:
            found = [k for k in profile.kids(node) if total[k]]
            found.sort(key=lambda k: frames[frame[k]])
            cache[node] = found
        return found

    keep = choose_nodes(0, kids, total.__getitem__, max_nodes)
    nodes: dict[int, FlameNode] = {}
    files = recorded_files(profile.renamed)
    for i in sorted(keep):
        name = ROOT_NAME if i == 0 else profile.frames[profile.frame[i]]
        nodes[i] = {"name": name, "value": total[i], "children": []}
        if name in files:
            nodes[i]["path"] = files[name]
        if i:
            nodes[profile.parent[i]]["children"].append(nodes[i])
    for i in keep:
        dropped = [k for k in kids(i) if k not in keep]
        _finish(nodes[i], sum(sizes[k] for k in dropped), sum(total[k] for k in dropped))
    return nodes[0]


def _finish(node: FlameNode, dropped_frames: int, dropped_value: int) -> None:
    """Sort children by name and put all pruned mass into one last child."""
    real = [c for c in node["children"] if "pruned_frames" not in c]
    for old in node["children"]:
        if "pruned_frames" in old:
            dropped_frames += old["pruned_frames"]
            dropped_value += old["value"]
    real.sort(key=lambda c: c["name"])
    if dropped_value or dropped_frames:
        real.append(pruned_node(dropped_frames, dropped_value))
    node["children"] = real


def prune_flamegraph(tree: FlameNode, max_nodes: int) -> FlameNode:
    """A copy of `tree` with at most `max_nodes` nodes, pruned mass made explicit."""
    keep = choose_nodes(_Ref(tree), _ref_kids, lambda r: r.node["value"], max_nodes)
    kept = {id(r.node) for r in keep}
    out: FlameNode = {"name": tree["name"], "value": tree["value"], "children": []}
    stack = [(tree, out)]
    while stack:
        src, dst = stack.pop()
        dropped = [c for c in src["children"] if id(c) not in kept]
        for child in src["children"]:
            if id(child) in kept:
                copy = _shallow(child)
                dst["children"].append(copy)
                stack.append((child, copy))
        frames = sum(_count_frames(c) for c in dropped)
        _finish(dst, frames, sum(c["value"] for c in dropped))
    return out


class _Ref:
    """Hashable handle on a dict node (dicts are not hashable)."""

    __slots__ = ("node",)

    def __init__(self, node: FlameNode) -> None:
        self.node = node

    def __hash__(self) -> int:
        return id(self.node)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Ref) and other.node is self.node

    def __lt__(self, other: _Ref) -> bool:
        return False


def _ref_kids(ref: _Ref) -> list[_Ref]:
    return [_Ref(c) for c in ref.node.get("children", []) if "pruned_frames" not in c] + [
        _Ref(c) for c in ref.node.get("children", []) if "pruned_frames" in c
    ]


def _shallow(node: FlameNode) -> FlameNode:
    copy: FlameNode = {"name": node["name"], "value": node["value"], "children": []}
    if "pruned_frames" in node:
        copy["pruned_frames"] = node["pruned_frames"]
    if "path" in node:
        copy["path"] = node["path"]
    return copy


def _count_frames(node: FlameNode) -> int:
    count, stack = 0, [node]
    while stack:
        item = stack.pop()
        count += item.get("pruned_frames", 1)
        stack.extend(item.get("children", []))
    return count


def select_threads(tree: FlameNode, names_or_tids: Collection[str]) -> FlameNode:
    """Keep only thread subtrees whose name or tid is listed; values re-summed upward.

    Thread nodes are found by their py-spy frame name (`thread (5066): target-2`) at
    any depth (below `process` frames with --subprocesses). Pruned-mass nodes that
    are not inside a kept thread are dropped, so select before you prune.
    """
    kept = _select(tree, ThreadFilter(names_or_tids))
    return kept or {"name": tree["name"], "value": 0, "children": []}


def _select(tree: FlameNode, wanted: ThreadFilter) -> FlameNode | None:
    # Iterative post-order: stacks can be thousands of frames deep.
    results: dict[int, FlameNode | None] = {}
    stack: list[tuple[FlameNode, bool]] = [(tree, False)]
    while stack:
        node, done = stack.pop()
        if wanted.matches_frame(node["name"]):
            results[id(node)] = _deep_copy(node)
        elif not done:
            stack.append((node, True))
            stack.extend((c, False) for c in node.get("children", []))
        else:
            kids = [results.pop(id(c), None) for c in node.get("children", [])]
            kept = [k for k in kids if k is not None]
            results[id(node)] = _rebuilt(node, kept) if kept else None
    return results[id(tree)]


def _rebuilt(node: FlameNode, kept: list[FlameNode]) -> FlameNode:
    out: FlameNode = {
        "name": node["name"],
        "value": sum(k["value"] for k in kept),
        "children": kept,
    }
    if "path" in node:
        out["path"] = node["path"]
    return out


def _deep_copy(node: FlameNode) -> FlameNode:
    out = _shallow(node)
    stack = [(node, out)]
    while stack:
        src, dst = stack.pop()
        for child in src.get("children", []):
            copy = _shallow(child)
            dst["children"].append(copy)
            stack.append((child, copy))
    return out
