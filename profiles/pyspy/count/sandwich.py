"""Sandwich view (speedscope's): one frame's callers and callees, merged across stacks.

Input is a stored flamegraph tree ({name, value, children}, root `all`, values
inclusive, pruned mass as `[pruned: N frames]` nodes with `pruned_frames`), never
raw samples. For every root→leaf path only the outermost occurrence of the frame
counts, so a recursive frame counts each sample once:
- `callers` is inverted: the frame at the root, its direct callers as children,
  their callers below, merged by name. Synthetic `thread (…)`/`process …` frames and
  the root are left out: they are not calls (filter by thread before, with
  `select_threads`).
- `callees` is the merged subtree under the frame's outermost occurrences (inner
  recursive occurrences stay as nodes there, with their own values).
- `self_samples` are the samples whose leaf is the frame (any occurrence).
A pruned tree can hide occurrences inside pruned nodes: `approximate` is then true
and `hidden_samples` bounds how many of its samples could be missing (pruned mass
outside its occurrences: inside them every sample is counted already).
`hidden_self_samples` bounds the self samples that could be missing: all pruned mass,
inside occurrences too (a pruned part under one can end in the frame itself).
"""

from __future__ import annotations

from typing import Any, TypedDict

from ..core.frames import is_synthetic
from ..core.types import FlameNode
from .flamegraph import pruned_node


class Sandwich(TypedDict):
    frame: str
    samples: int
    self_samples: int
    total_samples: int
    percent: float
    self_percent: float
    occurrences: int
    callers: FlameNode
    callees: FlameNode
    approximate: bool
    hidden_samples: int
    hidden_self_samples: int


def sandwich(tree: FlameNode, frame: str) -> Sandwich:
    """Callers and callees of `frame` in `tree`, counted once per sample.

    A frame absent from the tree gives zero samples and single-node trees.
    """
    callers, callees = _Merged(frame), _Merged(frame)
    samples = self_samples = occurrences = hidden = hidden_self = 0
    # Iterative walk: stored trees nest up to 400 frames deep.
    stack: list[tuple[FlameNode, tuple[str, ...], bool]] = [(tree, (), False)]
    while stack:
        node, path, inside = stack.pop()
        name, kids = node["name"], node.get("children", [])
        if "pruned_frames" in node:
            hidden += 0 if inside else node["value"]
            hidden_self += node["value"]
            continue
        if name == frame and node is not tree:
            self_samples += node["value"] - sum(k["value"] for k in kids)
            if not inside:
                samples += node["value"]
                occurrences += 1
                callers.add_path(reversed(path), node["value"])
                callees.add_subtree(node)
        calls = path if node is tree or is_synthetic(name) else (*path, name)
        stack.extend((kid, calls, inside or name == frame) for kid in kids)
    total = tree["value"]
    return {
        "frame": frame,
        "samples": samples,
        "self_samples": self_samples,
        "total_samples": total,
        "percent": _percent(samples, total),
        "self_percent": _percent(self_samples, total),
        "occurrences": occurrences,
        "callers": callers.tree(samples),
        "callees": callees.tree(samples),
        "approximate": hidden > 0,
        "hidden_samples": hidden,
        "hidden_self_samples": hidden_self,
    }


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


_PRUNED = "\x00pruned"  # merge key of pruned-mass nodes (no frame name holds NUL)


class _Merged:
    """A tree built by adding paths and subtrees, children merged by name.

    Output nodes are built in place; `_kids` indexes each node's children by name
    (by id(node): dicts are not hashable), so nothing is copied at the end.
    """

    def __init__(self, name: str) -> None:
        self.root: FlameNode = {"name": name, "value": 0, "children": []}
        self._kids: dict[int, dict[str, FlameNode]] = {}

    def _child(self, node: FlameNode, key: str) -> FlameNode:
        kids = self._kids.setdefault(id(node), {})
        found = kids.get(key)
        if found is None:
            found = kids[key] = {"name": key, "value": 0, "children": []}
            node["children"].append(found)
        return found

    def add_path(self, names: Any, value: int) -> None:
        node = self.root
        for name in names:
            node = self._child(node, name)
            node["value"] += value

    def add_subtree(self, source: FlameNode) -> None:
        stack = [(source, self.root)]
        while stack:
            src, dst = stack.pop()
            for kid in src.get("children", []):
                if "pruned_frames" in kid:
                    merged = self._child(dst, _PRUNED)
                    merged["pruned_frames"] = merged.get("pruned_frames", 0) + kid["pruned_frames"]
                else:
                    merged = self._child(dst, kid["name"])
                    stack.append((kid, merged))
                merged["value"] += kid["value"]

    def tree(self, value: int) -> FlameNode:
        """The finished tree: children sorted by name, pruned mass last."""
        self.root["value"] = value
        stack = [self.root]
        while stack:
            node = stack.pop()
            children = node["children"]
            children.sort(key=lambda k: (k["name"] == _PRUNED, k["name"]))
            if children and children[-1]["name"] == _PRUNED:
                last = children[-1]
                children[-1] = pruned_node(last["pruned_frames"], last["value"])
            stack.extend(children)
        return self.root


def frames_like(tree: FlameNode, text: str, limit: int = 10) -> list[tuple[str, int]]:
    """Frames whose name contains `text` (case-insensitive), heaviest first, with
    once-per-sample counts: to pick a frame for the sandwich from a search."""
    wanted = text.lower()
    found: dict[str, int] = {}
    stack: list[tuple[FlameNode, tuple[str, ...]]] = [(tree, ())]
    while stack:
        node, path = stack.pop()
        name = node["name"]
        real = node is not tree and "pruned_frames" not in node and not is_synthetic(name)
        if real and wanted in name.lower() and name not in path:
            found[name] = found.get(name, 0) + node["value"]
        below = (*path, name) if real else path
        stack.extend((kid, below) for kid in node.get("children", []))
    return sorted(found.items(), key=lambda item: (-item[1], item[0]))[:limit]
