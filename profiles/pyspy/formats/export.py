"""Exports: folded stacks (flamegraph.pl / inferno) and speedscope JSON, of parsed
samples or of stored flamegraph trees (a whole job's, written a process at a time)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..core.frames import parse_process, parse_thread, split_location
from ..core.profile import Profile, ProfileBuilder
from ..version import __version__

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
_LINE = re.compile(r"(.*):(\d+)\Z", re.S)


def _stacks(profile: Profile) -> Iterator[tuple[list[int], int]]:
    """(frame ids root first, count) for every stack with samples, children by name."""
    frames, frame = profile.frames, profile.frame
    path: list[int] = []
    todo: list[tuple[int, int]] = [(0, 0)]
    while todo:
        node, level = todo.pop()
        del path[level:]
        if node:
            path.append(frame[node])
        if profile.self_count[node]:
            yield list(path), profile.self_count[node]
        children = sorted(profile.kids(node), key=lambda k: frames[frame[k]])
        todo.extend((k, len(path)) for k in reversed(children))


def _folded_frame(name: str) -> str:
    # flamegraph.pl splits on ';' and reads the count after the last space.
    return name.replace(";", ":").replace("\n", " ").replace("\r", " ")


def to_folded(profile: Profile) -> Iterator[str]:
    """`a;b;c 12` lines (no newline), sorted like inferno's collapse output."""
    names = [_folded_frame(n) for n in profile.frames]
    for path, count in _stacks(profile):
        if path:
            yield ";".join(names[f] for f in path) + f" {count}"


def to_speedscope(profile: Profile, name: str = "flamedeck profile") -> dict[str, Any]:
    """Speedscope file (schema SPEEDSCOPE_SCHEMA): one "sampled" profile per thread.

    Each distinct stack is one sample weighted by its count (unit "none"); the
    thread's frame becomes the profile name in py-spy's style (`Thread 5066 "x"`,
    `Process 10 Thread 11 "x"`), stacks without thread frames share one profile.
    """
    shared: list[dict[str, Any]] = []
    index: dict[int, int] = {}
    groups: dict[str, tuple[list[list[int]], list[int]]] = {}
    for path, count in _stacks(profile):
        label, rest = _split_synthetic(profile, path, name)
        samples, weights = groups.setdefault(label, ([], []))
        samples.append([_shared_index(profile, f, index, shared) for f in rest])
        weights.append(count)
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "name": name,
        "exporter": f"flamedeck@{__version__}",
        "activeProfileIndex": 0,
        "shared": {"frames": shared},
        "profiles": [_sampled(label, s, w) for label, (s, w) in groups.items()],
    }


def _sampled(label: str, samples: list[list[int]], weights: list[int]) -> dict[str, Any]:
    return {
        "type": "sampled",
        "name": label,
        "unit": "none",
        "startValue": 0,
        "endValue": sum(weights),
        "samples": samples,
        "weights": weights,
    }


def _split_synthetic(profile: Profile, path: list[int], default: str) -> tuple[str, list[int]]:
    pid: int | None = None
    for i, fid in enumerate(path):
        text = profile.frames[fid]
        process = parse_process(text)
        if process is not None:
            pid = process[0]
            continue
        thread = parse_thread(text)
        if thread is None:
            return (f"Process {pid}" if pid is not None else default), path[i:]
        prefix = f"Process {pid} " if pid is not None else ""
        return f'{prefix}Thread {thread[0]} "{thread[1]}"', path[i + 1 :]
    return (f"Process {pid}" if pid is not None else default), []


def _shared_index(profile: Profile, fid: int, index: dict[int, int], shared: list) -> int:
    found = index.get(fid)
    if found is None:
        found = index[fid] = len(shared)
        shared.append(_speedscope_frame(profile.frames[fid]))
    return found


def _speedscope_frame(text: str) -> dict[str, Any]:
    name, location = split_location(text)
    if not location:
        return {"name": name}
    match = _LINE.match(location)
    if match is None:
        return {"name": name, "file": location}
    return {"name": name, "file": match.group(1), "line": int(match.group(2))}


# --- flamegraph trees (the stored, pruned trees; a whole job's export) ----------------


def tree_stacks(tree: dict[str, Any]) -> Iterator[tuple[list[str], int]]:
    """(frames root first, own samples) for every node of a flamegraph tree that has
    samples of its own (its value less its children's); the root's name is left out."""
    todo = [(child, [str(child["name"])]) for child in reversed(tree.get("children") or [])]
    while todo:
        node, path = todo.pop()
        kids = node.get("children") or []
        own = int(node["value"]) - sum(int(k["value"]) for k in kids)
        if own > 0:
            yield path, own
        todo.extend((k, [*path, str(k["name"])]) for k in reversed(kids))


def tree_to_folded(tree: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Folded lines (no newline) of a tree, each stack under `prefix` when given."""
    head = [_folded_frame(prefix)] if prefix else []
    for path, own in tree_stacks(tree):
        yield ";".join(head + [_folded_frame(f) for f in path]) + f" {own}"


def trees_to_speedscope(parts: Iterable[tuple[str, dict[str, Any]]], name: str) -> Iterator[str]:
    """One speedscope file of several processes' trees, written a process at a time
    (memory: one tree and the shared frame table): each thread of each process is a
    profile named `LABEL · Thread …`; equal frames are shared."""
    index: dict[tuple[Any, ...], int] = {}
    frames: list[dict[str, Any]] = []
    head = {"$schema": SPEEDSCOPE_SCHEMA, "name": name, "exporter": f"flamedeck@{__version__}"}
    yield json.dumps(head)[:-1] + ', "activeProfileIndex": 0, "profiles": ['
    separator = ""
    for label, tree in parts:
        for profile in _tree_profiles(label, tree, index, frames):
            yield separator + json.dumps(profile)
            separator = ", "
    yield '], "shared": {"frames": ' + json.dumps(frames) + "}}"


def _tree_profiles(label: str, tree: dict[str, Any], index: dict, frames: list) -> list[dict]:
    """One process's profiles, its frames moved into the shared table."""
    builder = ProfileBuilder()
    for path, own in tree_stacks(tree):
        builder.add(path, own)
    doc = to_speedscope(builder.build("raw"), name=label)
    remap = [_shared_frame(frame, index, frames) for frame in doc["shared"]["frames"]]
    return [
        {
            **profile,
            "name": profile["name"] if profile["name"] == label else f"{label} · {profile['name']}",
            "samples": [[remap[i] for i in sample] for sample in profile["samples"]],
        }
        for profile in doc["profiles"]
    ]


def _shared_frame(frame: dict[str, Any], index: dict, frames: list) -> int:
    key = (frame["name"], frame.get("file"), frame.get("line"))
    found = index.get(key)
    if found is None:
        found = index[key] = len(frames)
        frames.append(frame)
    return found
