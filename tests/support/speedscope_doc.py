"""py-spy-style speedscope documents built from stacks, as `py-spy record --format
speedscope` writes them: the time tests' inputs (tests/profiles/pyspy/timeline_data.py)
and bench/engine/bench_intervals.py's simulated captures."""

from __future__ import annotations

import json
import re

_FRAME = re.compile(r"(.*) \((.*?)(?::(\d+))?\)\Z", re.S)


def frame_object(text: str) -> dict:
    """`name (file:line)` as py-spy's speedscope writes a frame."""
    match = _FRAME.match(text)
    if match is None:
        return {"name": text, "file": "", "line": 0}
    name, file, line = match.groups()
    return {"name": name, "file": file, "line": int(line) if line else 0}


def speedscope(
    threads: list[tuple[int, str, list[list[str]]]], weights: str = "seconds", rate: float = 100
) -> str:
    """A speedscope document: per thread (tid, name, its samples in order, root first)."""
    frames: dict[str, int] = {}
    profiles = []
    for tid, name, samples in threads:
        ids = [[frames.setdefault(f, len(frames)) for f in stack] for stack in samples]
        profiles.append(
            {
                "type": "sampled",
                "name": f'Thread {tid} "{name}"',
                "unit": weights,
                "startValue": 0,
                "endValue": len(ids) / rate,
                "samples": ids,
                "weights": [1 / rate if weights == "seconds" else 1] * len(ids),
            }
        )
    return json.dumps(
        {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "profiles": profiles,
            "shared": {"frames": [frame_object(f) for f in frames]},
        }
    )
