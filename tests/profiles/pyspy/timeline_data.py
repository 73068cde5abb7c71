"""Inputs for the time tests: py-spy-style speedscope documents built from stacks, and the
real recordings of tests/data/timeline (README there) split as a capture splits them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from profiles.pyspy.split import Split, split_speedscope
from profiles.pyspy.timed import TimedCapture

TIMELINE = Path(__file__).resolve().parents[2] / "data" / "timeline"
_FRAME = re.compile(r"(.*) \((.*?)(?::(\d+))?\)\Z", re.S)


def frame_object(text: str) -> dict:
    """`name (file:line)` as py-spy's speedscope writes a frame."""
    match = _FRAME.match(text)
    if match is None:
        return {"name": text, "file": "", "line": 0}
    name, file, line = match.groups()
    return {"name": name, "file": file, "line": int(line) if line else 0}


def speedscope(threads: list[tuple[int, str, list[list[str]]]], weights: str = "seconds") -> str:
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
                "endValue": len(ids) / 100,
                "samples": ids,
                "weights": [0.01 if weights == "seconds" else 1] * len(ids),
            }
        )
    return json.dumps(
        {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "profiles": profiles,
            "shared": {"frames": [frame_object(f) for f in frames]},
        }
    )


def recorded(case: str) -> tuple[dict, Split]:
    """A real recording's clock (the job's printout included) and its split."""
    clock = json.loads((TIMELINE / f"{case}.clock.json").read_text())
    data = (TIMELINE / f"{case}.speedscope.json").read_bytes()
    split = split_speedscope(
        data, start=clock["start"], end=clock["end"], rate=clock["rate"], idle=True
    )
    return clock, split


def captured(case: str) -> tuple[dict, TimedCapture]:
    clock, split = recorded(case)
    return clock, TimedCapture(split.raw_text, split.track)
