"""py-spy `--format speedscope`: JSON with shared frames and one sampled profile per thread.

Each sample (a list of frame indices, root first) counts as one sample, because
py-spy gives every sample the same weight (1/rate seconds); for files whose unit
is "none" and whose weights are whole numbers, the weight is the count. The
profile name `Thread 5066 "target-2"` (or `Process 10 Thread 11 "name"`) becomes
the same synthetic root frames raw output has (`process 10:""`, `thread (11): name`)
unless the samples already start with them (py-spy --threads), so both formats
analyse alike. Frame names are `name (file:line)` with the file as given (py-spy
writes full paths here, short ones in raw). Malformed samples count in `skipped_lines`.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import ProfileError
from .frames import is_synthetic
from .profile import Profile, ProfileBuilder

_NAME = re.compile(r'(?:Process (\d+) )?Thread (\d+|0[xX][0-9a-fA-F]+)(?: "(.*)")?\Z', re.S)


def is_speedscope(doc: object) -> bool:
    return isinstance(doc, dict) and "profiles" in doc and "shared" in doc


def parse_speedscope(doc: dict[str, Any], label: str = "input") -> Profile:
    """Build a Profile from a decoded speedscope document."""
    names = _frame_names(doc.get("shared"), label)
    profiles = doc.get("profiles")
    if not isinstance(profiles, list):
        raise ProfileError(f"{label} is speedscope JSON without a list of profiles")
    sampled = [p for p in profiles if isinstance(p, dict) and p.get("type") == "sampled"]
    if not sampled:
        raise ProfileError(
            f"{label} is speedscope JSON with no sampled profiles "
            "(evented profiles are not py-spy output)"
        )
    builder = ProfileBuilder()
    for prof in sampled:
        _add_profile(builder, prof, names)
    return builder.build("speedscope")


def _frame_names(shared: object, label: str) -> list[str]:
    frames = shared.get("frames") if isinstance(shared, dict) else None
    if not isinstance(frames, list):
        raise ProfileError(f"{label} is speedscope JSON without shared.frames")
    return [_frame_name(f) for f in frames]


def _frame_name(frame: object) -> str:
    if not isinstance(frame, dict):
        return str(frame)
    name, file, line = str(frame.get("name", "?")), frame.get("file"), frame.get("line")
    if file and isinstance(line, int) and line > 0:
        return f"{name} ({file}:{line})"
    return f"{name} ({file})" if file else name


def _prefix(profile_name: str) -> list[str]:
    match = _NAME.match(profile_name)
    if match is None:
        return []
    pid, tid, tname = match.groups()
    prefix = [f'process {pid}:""'] if pid else []
    prefix.append(f"thread ({tid}): {tname}" if tname else f"thread ({tid})")
    return prefix


def _add_profile(builder: ProfileBuilder, prof: dict[str, Any], names: list[str]) -> None:
    samples, weights = prof.get("samples"), prof.get("weights")
    if not isinstance(samples, list):
        builder.skipped_lines += 1
        return
    prefix = _prefix(str(prof.get("name", "")))
    use_weights = prof.get("unit") == "none" and isinstance(weights, list)
    for index, sample in enumerate(samples):
        stack = _stack(sample, names)
        count = _count(weights, index) if use_weights else 1
        if stack is None or count is None:
            builder.skipped_lines += 1
        elif stack and is_synthetic(stack[0]):
            builder.add(stack, count)  # py-spy --threads already put them in
        elif stack or prefix:
            builder.add(prefix + stack, count)


def _stack(sample: object, names: list[str]) -> list[str] | None:
    if not isinstance(sample, list):
        return None
    size = len(names)
    if not all(type(i) is int and 0 <= i < size for i in sample):
        return None
    return [names[i] for i in sample]


def _count(weights: list[Any], index: int) -> int | None:
    weight = weights[index] if index < len(weights) else None
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        return None
    if weight < 0 or weight != int(weight) or weight >= 10**18:
        return None
    return int(weight)
